"""ImageTextDataset, multimodal_collate, multimodal_loader: ids, pixels, caption policies, errors (resume: test_resume.py)."""

import csv
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image, ImageOps
from tokenizers import Tokenizer
from torchvision.transforms import v2

from recipes.core.loading.device import normalize_images
from recipes.core.contracts.errors import DataError, SkippedSampleWarning
from recipes.multimodal import CLIP_MEAN, CLIP_STD, ImageTextDataset, multimodal_collate, multimodal_loader
from tests.special_tokens import truncated

RESIZE = v2.Compose([v2.Resize(24), v2.CenterCrop(24)])
AUGMENT = v2.Compose([v2.RandomResizedCrop(16, scale=(0.3, 1.0), antialias=True), v2.RandomHorizontalFlip()])


@pytest.fixture(scope="module")
def tokenizer(fixtures):
    return Tokenizer.from_file(str(fixtures / "text" / "tokenizer.json"))


def oracle_pairs(manifest: Path) -> list[tuple[str, str]]:
    """(image name, caption) for every caption, read with json / csv / pycocotools."""
    if manifest.suffix == ".jsonl":
        rows = [json.loads(line) for line in manifest.read_text(encoding="utf-8").splitlines()]
        return [(r["image"], c) for r in rows for c in r.get("captions", [r.get("caption")])]
    if manifest.suffix == ".csv":
        with open(manifest, newline="", encoding="utf-8") as file:
            return [(r["image"], r["caption"]) for r in csv.DictReader(file)]
    from pycocotools.coco import COCO

    coco = COCO(str(manifest))
    return [(coco.imgs[i]["file_name"], a["caption"]) for i in coco.getImgIds() for a in coco.imgToAnns[i]]


def pil_rgb(path: Path) -> torch.Tensor:
    with Image.open(path) as image:
        array = np.array(ImageOps.exif_transpose(image).convert("RGB"))
    return torch.from_numpy(array).permute(2, 0, 1)


MANIFESTS = ["manifest.jsonl", "manifest.csv", "captions.json"]


@pytest.mark.parametrize("max_length", [77, 5], ids=["len77", "len5"])
@pytest.mark.parametrize("name", MANIFESTS, ids=["jsonl", "csv", "coco"])
def test_caption_ids_equal_tokenizer_truncation_for_every_pair(fixtures, tokenizer, name, max_length):
    manifest = fixtures / "multimodal" / name
    dataset = ImageTextDataset(manifest, tokenizer, max_length=max_length, captions="all")
    pairs = oracle_pairs(manifest)
    assert len(dataset) == len(pairs)
    for index, (image_name, caption) in enumerate(pairs):
        assert dataset.images[dataset.caption_image[index]] == image_name
        assert dataset.caption_tokens[index].tolist() == truncated(tokenizer, caption, max_length)
    item = dataset[len(pairs) - 1]
    assert item["input_ids"].dtype == torch.int64 and item["index"] == len(pairs) - 1
    assert item["input_ids"].tolist() == truncated(tokenizer, pairs[-1][1], max_length)


def test_images_are_uint8_rgb_equal_to_pil_decoding(fixtures, tokenizer):
    root = fixtures / "multimodal"
    dataset = ImageTextDataset(root / "manifest.jsonl", tokenizer, captions="first")
    for index in range(len(dataset)):
        image = dataset[index]["image"]
        assert image.dtype == torch.uint8 and image.shape[0] == 3
        assert torch.equal(image, pil_rgb(root / dataset.images[index]))


def test_first_policy_takes_each_images_first_caption(fixtures, tokenizer):
    manifest = fixtures / "multimodal" / "captions.json"
    dataset = ImageTextDataset(manifest, tokenizer, captions="first")
    firsts = {}
    for image_name, caption in oracle_pairs(manifest):
        firsts.setdefault(image_name, caption)
    assert len(dataset) == len(firsts) == 8
    for index in range(len(dataset)):
        expected = tokenizer.encode(firsts[dataset.images[index]]).ids
        assert dataset[index]["input_ids"].tolist() == expected


def test_random_policy_draws_every_caption_over_epochs(fixtures, tokenizer):
    manifest = fixtures / "multimodal" / "captions.json"
    dataset = ImageTextDataset(manifest, tokenizer, transform=RESIZE, captions="random")
    options: dict[int, set] = {}
    for image_name, caption in oracle_pairs(manifest):
        row = list(dataset.images).index(image_name)
        options.setdefault(row, set()).add(tuple(tokenizer.encode(caption).ids))
    loader = multimodal_loader(dataset, 8, train=False, device="cpu", seed=0, num_workers=0)
    drawn: dict[int, set] = {row: set() for row in options}
    epochs = [[] for _ in range(40)]
    for epoch in epochs:
        batch = next(iter(loader))
        for row, ids, length in zip(batch["index"].tolist(), batch["input_ids"], batch["lengths"]):
            drawn[row].add(tuple(ids[:length].tolist()))
            epoch.append(tuple(ids[:length].tolist()))
    assert drawn == options  # every caption of every image, and nothing else
    assert epochs[0] != epochs[1]


def test_spawned_workers_give_the_batches_of_the_main_process(fixtures, tokenizer):
    dataset = ImageTextDataset(fixtures / "multimodal" / "captions.json", tokenizer, transform=AUGMENT)
    spawned = multimodal_loader(dataset, 4, device="cpu", seed=1, num_workers=2, multiprocessing_context="spawn")
    local = multimodal_loader(dataset, 4, device="cpu", seed=1, num_workers=0)
    for a, b in zip(spawned, local, strict=True):
        assert torch.equal(a["pixel_values"], b["pixel_values"]) and torch.equal(a["input_ids"], b["input_ids"])


def test_eval_loader_yields_every_pair_once_in_order(fixtures, tokenizer):
    dataset = ImageTextDataset(fixtures / "multimodal" / "captions.json", tokenizer, transform=RESIZE, captions="all")
    loader = multimodal_loader(dataset, 5, train=False, device="cpu", num_workers=0)
    assert [i for batch in loader for i in batch["index"].tolist()] == list(range(len(dataset)))


# -- collate ---------------------------------------------------------------------------------------


def test_collate_pads_like_the_tokenizer_and_stacks_uint8_pixels(fixtures, tokenizer):
    dataset = ImageTextDataset(fixtures / "multimodal" / "captions.json", tokenizer, transform=RESIZE, captions="all")
    items = [dataset[i] for i in (0, 4, 9, 17)]
    batch = multimodal_collate(items, pad_id=dataset.pad_id)
    padded = Tokenizer.from_str(tokenizer.to_str())
    padded.enable_padding(pad_id=0, pad_token="[PAD]")
    pairs = oracle_pairs(fixtures / "multimodal" / "captions.json")
    encodings = padded.encode_batch([pairs[i][1] for i in (0, 4, 9, 17)])
    assert batch["input_ids"].tolist() == [e.ids for e in encodings]
    assert batch["attention_mask"].tolist() == [e.attention_mask for e in encodings]
    assert batch["lengths"].tolist() == [sum(e.attention_mask) for e in encodings]
    assert batch["index"].tolist() == [0, 4, 9, 17]
    assert batch["pixel_values"].dtype == torch.uint8 and batch["pixel_values"].shape == (4, 3, 24, 24)
    assert torch.equal(batch["pixel_values"], torch.stack([item["image"] for item in items]))
    # decoded + resized images are [3,H,W] views of [H,W,3] memory; the batch keeps that layout
    assert batch["pixel_values"].is_contiguous(memory_format=torch.channels_last)
    nchw = multimodal_collate([{**item, "image": item["image"].contiguous()} for item in items])
    assert nchw["pixel_values"].is_contiguous() and torch.equal(nchw["pixel_values"], batch["pixel_values"])
    assert all(batch[k].dtype == torch.int64 for k in ("input_ids", "attention_mask", "lengths", "index"))


def test_collate_drops_skipped_samples_and_uses_the_pad_id():
    items = [
        {"image": torch.zeros(3, 4, 4, dtype=torch.uint8), "input_ids": torch.tensor([5, 6, 7]), "index": 0},
        None,
        {"image": torch.ones(3, 4, 4, dtype=torch.uint8), "input_ids": torch.tensor([8]), "index": 2},
    ]
    batch = multimodal_collate(items, pad_id=9)
    assert batch["index"].tolist() == [0, 2]
    assert batch["input_ids"].tolist() == [[5, 6, 7], [8, 9, 9]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 0, 0]]


def test_keys_a_user_adds_to_caption_items_reach_the_batch():
    items = [{"image": torch.zeros(3, 4, 4, dtype=torch.uint8), "input_ids": torch.tensor([5, 6, 7][:n]), "index": n,
              "source": f"shard {n}", "score": 0.5 * n, "boxes": torch.ones(n, 4)} for n in (1, 2, 3)]
    batch = multimodal_collate(items)
    assert batch["source"] == ["shard 1", "shard 2", "shard 3"]
    assert batch["score"].tolist() == [0.5, 1.0, 1.5]
    assert [tuple(b.shape) for b in batch["boxes"]] == [(1, 4), (2, 4), (3, 4)]  # ragged: kept as a list
    with pytest.raises(ValueError, match=r"multimodal_collate: the items' key 'lengths' would overwrite"):
        multimodal_collate([{**item, "lengths": 1} for item in items])


def test_collate_of_different_sizes_asks_for_a_resize_and_crop(fixtures, tokenizer):
    dataset = ImageTextDataset(fixtures / "multimodal" / "manifest.jsonl", tokenizer)
    with pytest.raises(ValueError, match="add a resize \\+ crop transform"):
        multimodal_collate([dataset[0], dataset[1]])
    float_item = {"image": torch.zeros(3, 4, 4), "input_ids": torch.tensor([1]), "index": 0}
    with pytest.raises(ValueError, match="uint8"):
        multimodal_collate([float_item])


def test_one_clip_training_step_on_a_normalised_batch(fixtures, tokenizer):
    pytest.importorskip("transformers")
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel
    from transformers.image_utils import OPENAI_CLIP_MEAN, OPENAI_CLIP_STD

    assert CLIP_MEAN == tuple(OPENAI_CLIP_MEAN) and CLIP_STD == tuple(OPENAI_CLIP_STD)
    dataset = ImageTextDataset(fixtures / "multimodal" / "captions.json", tokenizer, transform=RESIZE)
    batch = next(iter(multimodal_loader(dataset, 4, device="cpu", seed=0, num_workers=0)))
    inputs = normalize_images(batch, CLIP_MEAN, CLIP_STD)
    processor = CLIPImageProcessor(do_resize=False, do_center_crop=False, do_convert_rgb=False)
    oracle = processor(images=list(batch["pixel_values"]), return_tensors="pt")["pixel_values"]
    torch.testing.assert_close(inputs["pixel_values"], oracle, atol=1e-5, rtol=1e-5)

    torch.manual_seed(0)
    config = CLIPConfig(
        text_config={"vocab_size": tokenizer.get_vocab_size(), "hidden_size": 32, "intermediate_size": 64,
                     "num_hidden_layers": 2, "num_attention_heads": 4, "max_position_embeddings": 77,
                     "pad_token_id": dataset.pad_id, "bos_token_id": 2, "eos_token_id": 3},
        vision_config={"image_size": 24, "patch_size": 8, "hidden_size": 32, "intermediate_size": 64,
                       "num_hidden_layers": 2, "num_attention_heads": 4},
        projection_dim=16,
    )
    model = CLIPModel(config)
    output = model(pixel_values=inputs["pixel_values"], input_ids=inputs["input_ids"],
                   attention_mask=inputs["attention_mask"], return_loss=True)
    assert torch.isfinite(output.loss)
    output.loss.backward()
    for tower in (model.text_model, model.vision_model):
        grads = [p.grad for p in tower.parameters() if p.grad is not None]
        assert grads and all(torch.isfinite(g).all() for g in grads)
        assert any(g.abs().sum() > 0 for g in grads)


# -- manifests, paths and bad input ----------------------------------------------------------------


def write_jsonl(path: Path, rows: list) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def photos(tmp_path, fixtures):
    """tmp/data/pics/{a,b}.jpg copied from the fixtures."""
    pics = tmp_path / "data" / "pics"
    pics.mkdir(parents=True)
    shutil.copy(fixtures / "multimodal" / "images" / "img_0.jpg", pics / "a.jpg")
    shutil.copy(fixtures / "multimodal" / "images" / "img_1.jpg", pics / "b.jpg")
    return tmp_path / "data"


def test_image_root_defaults_to_the_manifest_folder(photos, tokenizer):
    manifest = write_jsonl(photos / "m.jsonl", [{"image": "pics/a.jpg", "caption": "a cat"}])
    assert torch.equal(ImageTextDataset(manifest, tokenizer)[0]["image"], pil_rgb(photos / "pics" / "a.jpg"))
    elsewhere = write_jsonl(photos.parent / "lists" / "m.jsonl", [{"image": "b.jpg", "caption": "a dog"}])
    dataset = ImageTextDataset(elsewhere, tokenizer, image_root=photos / "pics")
    assert torch.equal(dataset[0]["image"], pil_rgb(photos / "pics" / "b.jpg"))


BAD_ROWS = {
    "missing": {"image": "pics/b.jpg"},
    "empty": {"image": "pics/b.jpg", "caption": ""},
    "blank": {"image": "pics/b.jpg", "caption": "   "},
    "empty-list": {"image": "pics/b.jpg", "captions": []},
    "none-in-list": {"image": "pics/b.jpg", "captions": ["fine", None]},
    "no-image": {"caption": "a dog"},
    "dotdot": {"image": "../outside.jpg", "caption": "a dog"},
    "absolute": {"image": "/etc/passwd", "caption": "a dog"},
    "not-json": "{not json",
}


@pytest.mark.parametrize("bad", list(BAD_ROWS), ids=list(BAD_ROWS))
def test_bad_rows_raise_naming_the_manifest_line_or_are_skipped(photos, tokenizer, bad):
    rows = [{"image": "pics/a.jpg", "caption": "a cat"}, BAD_ROWS[bad], {"image": "pics/a.jpg", "caption": "one"}]
    manifest = write_jsonl(photos / "m.jsonl", rows)
    with pytest.raises(DataError, match=f"{manifest} line 2"):
        ImageTextDataset(manifest, tokenizer)
    with pytest.warns(SkippedSampleWarning, match=f"{manifest} line 2"):
        dataset = ImageTextDataset(manifest, tokenizer, on_error="skip", captions="all")
    assert len(dataset) == 2 and dataset.index.where(1) == f"{manifest} line 3"


def test_csv_blank_caption_names_its_line(photos, tokenizer):
    manifest = photos / "m.csv"
    manifest.write_text('image,caption\npics/a.jpg,"a cat,\nover two lines"\npics/b.jpg,\n', encoding="utf-8")
    with pytest.raises(DataError, match=f"{manifest} line 4: empty caption"):
        ImageTextDataset(manifest, tokenizer)
    bad_header = photos / "h.csv"
    bad_header.write_text("path,caption\npics/a.jpg,x\n", encoding="utf-8")
    with pytest.raises(DataError, match="'image' and 'caption' columns"):
        ImageTextDataset(bad_header, tokenizer)


def test_coco_image_without_captions_and_unknown_image_id(photos, tokenizer):
    coco = {"images": [{"id": 1, "file_name": "pics/a.jpg"}, {"id": 2, "file_name": "pics/b.jpg"}],
            "annotations": [{"id": 10, "image_id": 1, "caption": "a cat"}, {"id": 11, "image_id": 3, "caption": "x"}]}
    manifest = photos / "c.json"
    manifest.write_text(json.dumps(coco), encoding="utf-8")
    with pytest.raises(DataError, match="annotation id 11: image_id 3 is not in 'images'"):
        ImageTextDataset(manifest, tokenizer)
    with pytest.warns(SkippedSampleWarning) as caught:
        dataset = ImageTextDataset(manifest, tokenizer, on_error="skip")
    reasons = [str(w.message).split(f"{manifest} ")[1] for w in caught]
    assert reasons == ["annotation id 11: image_id 3 is not in 'images'", "image id 2: image has no caption annotation"]
    assert list(dataset.images) == ["pics/a.jpg"]


def test_symlink_out_of_the_root_is_refused_when_loading(photos, tokenizer, tmp_path):
    outside = tmp_path / "secret.jpg"
    shutil.copy(photos / "pics" / "a.jpg", outside)
    (photos / "pics" / "link.jpg").symlink_to(outside)
    manifest = write_jsonl(photos / "m.jsonl", [{"image": "pics/link.jpg", "caption": "a cat"}])
    with pytest.raises(DataError, match=f"{manifest} line 1: .*outside the root"):
        ImageTextDataset(manifest, tokenizer)[0]


HOSTILE = ["truncated.jpg", "empty.jpg", "not_an_image.jpg", "bomb.png"]


@pytest.mark.parametrize("name", HOSTILE, ids=[n.split(".")[0] for n in HOSTILE])
def test_bad_images_raise_naming_manifest_line_and_file(fixtures, tokenizer, tmp_path, name):
    manifest = write_jsonl(tmp_path / "m.jsonl", [{"image": f"images/{name}", "caption": "broken"}])
    dataset = ImageTextDataset(manifest, tokenizer, image_root=fixtures / "hostile")
    with pytest.raises(DataError, match=f"{manifest} line 1: .*{name}"):
        dataset[0]


def test_skip_policy_drops_bad_images_from_their_batch_with_warnings(fixtures, tokenizer, tmp_path):
    shutil.copytree(fixtures / "hostile" / "images", tmp_path / "images")
    shutil.copy(fixtures / "multimodal" / "images" / "img_0.jpg", tmp_path / "images" / "good.jpg")
    rows = [{"image": f"images/{n}", "caption": "a picture"} for n in ["good.jpg", *HOSTILE, "good.jpg"]]
    dataset = ImageTextDataset(write_jsonl(tmp_path / "m.jsonl", rows), tokenizer, transform=RESIZE, on_error="skip")
    loader = multimodal_loader(dataset, 6, train=False, device="cpu", num_workers=0)
    with pytest.warns(SkippedSampleWarning) as caught:
        batches = list(loader)
    assert [b["index"].tolist() for b in batches] == [[0, 5]]
    assert len(caught) == 4 and all("line" in str(w.message) for w in caught)


def test_unknown_options_list_the_choices(fixtures, tokenizer):
    manifest = fixtures / "multimodal" / "manifest.jsonl"
    with pytest.raises(ValueError, match="'random', 'first', 'all'"):
        ImageTextDataset(manifest, tokenizer, captions="longest")
    with pytest.raises(ValueError, match="on_error"):
        ImageTextDataset(manifest, tokenizer, on_error="ignore")
    with pytest.raises(ValueError, match="unknown manifest format"):
        ImageTextDataset(manifest.with_suffix(".xlsx"), tokenizer)


@pytest.mark.gpu
def test_pinned_channels_last_batches_reach_a_cuda_clip_step_normalised(fixtures, tokenizer):
    pytest.importorskip("transformers")
    from transformers import CLIPConfig, CLIPModel

    from recipes.core.loading.device import DevicePrefetcher

    dataset = ImageTextDataset(fixtures / "multimodal" / "captions.json", tokenizer, transform=RESIZE)
    loader = multimodal_loader(dataset, 4, device="cuda", seed=0, num_workers=2)
    assert loader.pin_memory
    cpu = [normalize_images(b, CLIP_MEAN, CLIP_STD) for b in multimodal_loader(dataset, 4, device="cpu", seed=0, num_workers=0)]
    torch.manual_seed(0)
    config = CLIPConfig(
        text_config={"vocab_size": tokenizer.get_vocab_size(), "hidden_size": 32, "intermediate_size": 64,
                     "num_hidden_layers": 2, "num_attention_heads": 4, "eos_token_id": 3},
        vision_config={"image_size": 24, "patch_size": 8, "hidden_size": 32, "intermediate_size": 64,
                       "num_hidden_layers": 2, "num_attention_heads": 4},
        projection_dim=16,
    )
    model = CLIPModel(config).cuda()
    for batch, expected in zip(DevicePrefetcher(loader, "cuda", mean=CLIP_MEAN, std=CLIP_STD), cpu, strict=True):
        pixels = batch["pixel_values"]
        assert pixels.is_cuda and pixels.dtype == torch.float32
        assert pixels.is_contiguous(memory_format=torch.channels_last)  # kept through pinning and the copy
        torch.testing.assert_close(pixels.cpu(), expected["pixel_values"], atol=1e-5, rtol=1e-5)
        loss = model(pixel_values=pixels, input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                     return_loss=True).loss
        assert torch.isfinite(loss)
        loss.backward()
