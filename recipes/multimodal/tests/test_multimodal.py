"""What a copy of the multimodal recipe must keep doing, checked against the tokenizer, PIL, json, csv and pycocotools.

    python -m pytest multimodal/tests          # in the folder you copied the recipe into

Each test builds the fixture folders from the recipes' own ``fixtures.py`` files (eight images with
captions as JSONL, CSV and COCO captions, and the text recipe's tokenizer), so they run wherever
the recipe does, with or without ``dataloader-recipes`` installed.
"""

import contextlib
import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image, ImageOps
from pycocotools.coco import COCO
from tokenizers import Tokenizer
from torchvision.transforms import v2

from recipes.core import DataError, SkippedSampleWarning
from recipes.multimodal import ImageTextDataset, ImageTextShards, multimodal_collate, multimodal_loader, write_shards
from recipes.multimodal.fixtures import write_multimodal
from recipes.text.fixtures import write_text

RESIZE = v2.Compose([v2.Resize(24), v2.CenterCrop(24)])
AUGMENT = v2.Compose([v2.RandomResizedCrop(16, scale=(0.3, 1.0), antialias=True), v2.RandomHorizontalFlip()])
MANIFESTS = ("manifest.jsonl", "manifest.csv", "captions.json")


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("fixtures")
    write_multimodal(folder / "multimodal")
    write_text(folder / "text")  # the tokenizer
    return folder / "multimodal"


@pytest.fixture(scope="module")
def tok(root: Path) -> Tokenizer:
    return Tokenizer.from_file(str(root.parent / "text" / "tokenizer.json"))


def pairs(manifest: Path) -> list[tuple[str, str]]:
    """(image name, caption) for every caption of ``manifest``, read with json, csv or pycocotools."""
    if manifest.suffix == ".jsonl":
        rows = [json.loads(line) for line in manifest.read_text(encoding="utf-8").splitlines()]
        return [(row["image"], caption) for row in rows for caption in row.get("captions", [row.get("caption")])]
    if manifest.suffix == ".csv":
        with open(manifest, newline="", encoding="utf-8") as file:
            return [(row["image"], row["caption"]) for row in csv.DictReader(file)]
    with contextlib.redirect_stdout(io.StringIO()):
        coco = COCO(str(manifest))
    return [(coco.imgs[i]["file_name"], a["caption"]) for i in coco.getImgIds() for a in coco.imgToAnns[i]]


def cut(tok: Tokenizer, text: str, max_length: int) -> list[int]:
    copy = Tokenizer.from_str(tok.to_str())
    copy.enable_truncation(max_length)
    return copy.encode(text).ids


@pytest.mark.parametrize("name", MANIFESTS)
def test_every_caption_is_the_tokenizers_ids_cut_to_max_length(root, tok, name):
    dataset = ImageTextDataset(root / name, tok, max_length=6, captions="all")
    expected = pairs(root / name)
    assert len(dataset) == len(expected) >= 8
    for index, (image, caption) in enumerate(expected):
        item = dataset[index]
        assert dataset.images[dataset.caption_image[index]] == image, f"{name} pair {index}"
        assert item["input_ids"].tolist() == cut(tok, caption, 6) and item["index"] == index


def test_images_are_uint8_rgb_equal_to_pil(root, tok):
    dataset = ImageTextDataset(root / "manifest.jsonl", tok, captions="first")
    for index in range(len(dataset)):
        image = dataset[index]["image"]
        with Image.open(root / dataset.images[index]) as opened:
            expected = np.asarray(ImageOps.exif_transpose(opened).convert("RGB"))
        assert image.dtype == torch.uint8 and np.array_equal(image.permute(1, 2, 0).numpy(), expected)


def test_collate_pads_the_captions_and_stacks_uint8_pixels(root, tok):
    dataset = ImageTextDataset(root / "captions.json", tok, transform=RESIZE, captions="all")
    items = [dataset[i] for i in (0, 5, 9)]
    batch = multimodal_collate([items[0], None, items[1], items[2]], pad_id=0)  # None: a sample skipped
    assert batch["pixel_values"].shape == (3, 3, 24, 24) and batch["pixel_values"].dtype == torch.uint8
    assert batch["index"].tolist() == [0, 5, 9]
    for row, item in enumerate(items):
        n = len(item["input_ids"])
        assert batch["lengths"][row] == batch["attention_mask"][row].sum() == n
        assert torch.equal(batch["input_ids"][row, :n], item["input_ids"]) and not batch["input_ids"][row, n:].any()
        assert torch.equal(batch["pixel_values"][row], item["image"])
    unresized = ImageTextDataset(root / "captions.json", tok)
    with pytest.raises(ValueError, match="Resize"):
        multimodal_collate([unresized[0], unresized[1]])  # 64x48 and 48x64


def test_a_seed_draws_the_same_captions_and_crops_with_or_without_workers_and_every_caption_in_time(root, tok):
    dataset = ImageTextDataset(root / "captions.json", tok, transform=AUGMENT)

    def batches(workers: int, seed: int = 0) -> list:
        loader = multimodal_loader(dataset, 4, device="cpu", seed=seed, num_workers=workers)
        return [(b["pixel_values"], b["input_ids"]) for b in loader]

    first = batches(0)
    for other in (batches(0), batches(2)):
        assert all(torch.equal(a, c) and torch.equal(b, d) for (a, b), (c, d) in zip(first, other, strict=True))
    assert not all(torch.equal(a, c) for (a, _), (c, _) in zip(first, batches(0, seed=1)))
    options = {}
    for image, caption in pairs(root / "captions.json"):
        options.setdefault(list(dataset.images).index(image), set()).add(tuple(tok.encode(caption).ids))
    drawn = {row: set() for row in options}
    loader = multimodal_loader(dataset, 8, train=False, device="cpu", seed=0, num_workers=0)
    for _ in range(40):  # a fresh draw every epoch
        batch = next(iter(loader))
        for row, ids, n in zip(batch["index"].tolist(), batch["input_ids"], batch["lengths"]):
            drawn[row].add(tuple(ids[:n].tolist()))
    assert drawn == options


def test_a_stateful_loader_resumes_mid_epoch_with_exactly_the_batches_still_to_come(root, tok):
    def loader():
        return multimodal_loader(ImageTextDataset(root / "captions.json", tok, transform=AUGMENT, captions="all"), 4,
                                 device="cpu", seed=3, stateful=True, num_workers=0)

    uninterrupted = loader()
    expected = list(uninterrupted) + list(uninterrupted)
    interrupted = loader()
    batches = iter(interrupted)
    seen = [next(batches) for _ in range(3)]
    resumed = loader()
    resumed.load_state_dict(interrupted.state_dict())
    got = seen + list(resumed) + list(resumed)  # the epoch's rest, then the next epoch
    assert len(got) == len(expected)
    assert all(torch.equal(a["pixel_values"], b["pixel_values"]) and torch.equal(a["input_ids"], b["input_ids"])
               for a, b in zip(got, expected))


def test_shards_give_the_manifests_pairs_and_two_workers_read_each_once(root, tok, tmp_path):
    paths = write_shards(root / "captions.json", tmp_path, samples_per_shard=3)
    assert [path.name for path in paths] == ["shard-000000.tar", "shard-000001.tar", "shard-000002.tar"]
    dataset = ImageTextDataset(root / "captions.json", tok, captions="all")
    streamed = list(ImageTextShards(paths, tok, captions="all"))
    assert len(streamed) == len(dataset)
    for index, item in enumerate(streamed):
        assert torch.equal(item["image"], dataset[index]["image"])
        assert torch.equal(item["input_ids"], dataset[index]["input_ids"])
    shards = ImageTextShards(paths, tok, transform=RESIZE, captions="first")
    keys = [key for batch in multimodal_loader(shards, 2, train=False, device="cpu", num_workers=2)
            for key in batch["key"]]
    assert sorted(keys) == sorted({item["key"] for item in streamed}) and len(keys) == 8


def test_a_bad_image_is_named_with_its_manifest_line_or_skipped_with_a_warning(root, tok, tmp_path):
    (tmp_path / "images").mkdir()
    (tmp_path / "images" / "good.jpg").write_bytes((root / "images" / "img_0.jpg").read_bytes())
    (tmp_path / "images" / "broken.jpg").write_bytes((root / "images" / "img_1.jpg").read_bytes()[:200])
    rows = [{"image": f"images/{name}", "caption": "a picture"} for name in ("good.jpg", "broken.jpg", "good.jpg")]
    manifest = tmp_path / "pairs.jsonl"
    manifest.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    with pytest.raises(DataError, match=r"pairs\.jsonl line 2: .*broken\.jpg"):
        ImageTextDataset(manifest, tok)[1]
    dataset = ImageTextDataset(manifest, tok, transform=RESIZE, on_error="skip")
    with pytest.warns(SkippedSampleWarning, match=r"broken\.jpg"):
        batches = list(multimodal_loader(dataset, 3, train=False, device="cpu", num_workers=0))
    assert [batch["index"].tolist() for batch in batches] == [[0, 2]]
