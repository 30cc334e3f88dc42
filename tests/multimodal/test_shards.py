"""ImageTextShards and write_shards: round trip, WebDataset layout, safety, worker coverage.

Real torchrun ranks with loader workers: tests/multimodal/test_ranks.py."""

import io
import json
import tarfile
from collections import Counter
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer
from torch.utils.data import DataLoader
from torchvision.transforms import v2

from recipes.core.contracts.errors import DataError, SkippedSampleWarning
from recipes.multimodal import ImageTextDataset, ImageTextShards, expand_shards, multimodal_loader, write_shards
from recipes.core.sampling.stream_order import StreamOrder

RESIZE = v2.Compose([v2.Resize(24), v2.CenterCrop(24)])
AUGMENT = v2.Compose([v2.RandomResizedCrop(16, scale=(0.3, 1.0), antialias=True), v2.RandomHorizontalFlip()])


@pytest.fixture(scope="module")
def tokenizer(fixtures):
    return Tokenizer.from_file(str(fixtures / "text" / "tokenizer.json"))


@pytest.fixture(scope="module")
def coco_shards(fixtures, tmp_path_factory):
    """The 8 COCO-caption fixture images (28 captions) in 4 shards of 2."""
    out = tmp_path_factory.mktemp("shards")
    return write_shards(fixtures / "multimodal" / "captions.json", out, samples_per_shard=2)


def items(shards: ImageTextShards) -> list[dict]:
    return list(shards)


@pytest.mark.parametrize("name", ["manifest.jsonl", "captions.json"], ids=["jsonl", "coco"])
def test_round_trip_gives_the_pairs_of_the_manifest_dataset(fixtures, tokenizer, tmp_path, name):
    manifest = fixtures / "multimodal" / name
    paths = write_shards(manifest, tmp_path, samples_per_shard=3)
    assert [p.name for p in paths] == ["shard-000000.tar", "shard-000001.tar", "shard-000002.tar"]
    dataset = ImageTextDataset(manifest, tokenizer, captions="all")
    streamed = items(ImageTextShards(paths, tokenizer, captions="all"))
    assert len(streamed) == len(dataset)
    for index, item in enumerate(streamed):
        expected = dataset[index]
        assert torch.equal(item["image"], expected["image"])
        assert torch.equal(item["input_ids"], expected["input_ids"])
        assert item["key"] == f"{paths[dataset.caption_image[index] // 3].name}/{dataset.caption_image[index]:09d}"


def test_shards_hold_the_original_bytes_under_webdataset_names(fixtures, tmp_path):
    root = fixtures / "multimodal"
    first = write_shards(root / "manifest.jsonl", tmp_path / "a", samples_per_shard=8)
    again = write_shards(root / "manifest.jsonl", tmp_path / "b", samples_per_shard=8)
    assert first[0].read_bytes() == again[0].read_bytes()  # reproducible
    rows = [json.loads(line) for line in (root / "manifest.jsonl").read_text(encoding="utf-8").splitlines()]
    with tarfile.open(first[0]) as tar:
        names = tar.getnames()
        assert names[:2] == ["000000000.jpg", "000000000.txt"]
        assert names[6:8] == ["000000003.jpg", "000000003.json"]  # the row with three captions
        for row, data in enumerate(rows):
            assert tar.extractfile(f"{row:09d}.jpg").read() == (root / data["image"]).read_bytes()
        assert tar.extractfile("000000000.txt").read().decode() == rows[0]["caption"]
        assert json.loads(tar.extractfile("000000003.json").read()) == {"captions": rows[3]["captions"]}


def test_write_shards_accepts_a_dataset_and_its_image_root(fixtures, tokenizer, tmp_path):
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"image": "img_2.jpg", "caption": "a tree"}) + "\n", encoding="utf-8")
    dataset = ImageTextDataset(manifest, tokenizer, image_root=fixtures / "multimodal" / "images")
    (path,) = write_shards(dataset, tmp_path / "out")
    (item,) = items(ImageTextShards(path, tokenizer))
    assert torch.equal(item["image"], dataset[0]["image"])


def make_tar(path: Path, members: list[tuple[str, bytes | None]]) -> Path:
    """A tar with these (name, data) members; data None makes a directory entry."""
    with tarfile.open(path, "w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return path


def test_reads_shards_from_other_tools_with_txt_and_json_captions(fixtures, tokenizer, tmp_path):
    images = fixtures / "multimodal" / "images"
    png = io.BytesIO()
    from PIL import Image

    Image.open(images / "img_1.jpg").save(png, format="PNG")
    shard = make_tar(tmp_path / "web.tar", [
        ("a", None),
        ("a/000.jpg", (images / "img_0.jpg").read_bytes()),
        ("a/000.txt", b"a red kite\n"),
        ("./001.json", json.dumps({"caption": "two dogs", "url": "x"}).encode()),
        ("./001.png", png.getvalue()),
        # WebDataset's rule: the key ends at the first dot, so these are extensions "tar.gz.jpg"...
        ("002.tar.gz.jpg", (images / "img_2.jpg").read_bytes()),
        ("002.tar.gz.txt", b"not a caption member"),
    ])
    with pytest.warns(SkippedSampleWarning, match="web.tar:002: no image file"):
        got = items(ImageTextShards(shard, tokenizer, on_error="skip"))
    assert [item["key"] for item in got] == ["web.tar/a/000", "web.tar/001"]
    assert [item["input_ids"].tolist() for item in got] == [tokenizer.encode(c).ids for c in ("a red kite", "two dogs")]
    assert got[1]["image"].shape == (3, 64, 48)


@pytest.mark.parametrize("name", ["../evil.jpg", "/tmp/evil.jpg"], ids=["dotdot", "absolute"])
def test_unsafe_member_names_are_refused_and_nothing_is_extracted(fixtures, tokenizer, tmp_path, name):
    jpeg = (fixtures / "multimodal" / "images" / "img_0.jpg").read_bytes()
    shard = make_tar(tmp_path / "bad.tar", [(name, jpeg), ("000.jpg", jpeg), ("000.txt", b"a cat")])
    before = sorted(p.name for p in tmp_path.parent.iterdir()), sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(DataError, match=f"bad.tar: member: path '{name}'"):
        items(ImageTextShards(shard, tokenizer))
    with pytest.warns(SkippedSampleWarning, match="bad.tar"):
        assert [item["key"] for item in items(ImageTextShards(shard, tokenizer, on_error="skip"))] == ["bad.tar/000"]
    assert (sorted(p.name for p in tmp_path.parent.iterdir()), sorted(p.name for p in tmp_path.iterdir())) == before


def test_missing_caption_and_bad_image_name_the_shard_and_key(fixtures, tokenizer, tmp_path):
    jpeg = (fixtures / "multimodal" / "images" / "img_0.jpg").read_bytes()
    truncated = (fixtures / "hostile" / "images" / "truncated.jpg").read_bytes()
    cases = {
        "nocap": [("000.jpg", jpeg)],
        "emptycap": [("000.jpg", jpeg), ("000.json", b'{"caption": " "}')],
        "badimage": [("000.jpg", truncated), ("000.txt", b"a cat")],
        "noimage": [("000.txt", b"a cat")],
    }
    for case, members in cases.items():
        shard = make_tar(tmp_path / f"{case}.tar", members + [("001.jpg", jpeg), ("001.txt", b"a dog")])
        with pytest.raises(DataError, match=f"{case}.tar:000"):
            items(ImageTextShards(shard, tokenizer))
        with pytest.warns(SkippedSampleWarning, match=f"{case}.tar:000"):
            got = items(ImageTextShards(shard, tokenizer, on_error="skip"))
        assert [item["key"] for item in got] == [f"{case}.tar/001"]
    with pytest.raises(DataError, match="cannot read tar shard"):
        items(ImageTextShards(tmp_path / "missing.tar", tokenizer))


def test_two_workers_read_every_sample_exactly_once(coco_shards, tokenizer):
    shards = ImageTextShards(coco_shards, tokenizer, transform=RESIZE, captions="all",
                             order=StreamOrder(shuffle_buffer=4, seed=0))
    loader = multimodal_loader(shards, 3, train=False, device="cpu", num_workers=2)
    first = [key for batch in loader for key in batch["key"]]
    second = [key for batch in loader for key in batch["key"]]  # persistent workers: the next epoch
    expected = Counter(item["key"] for item in items(ImageTextShards(coco_shards, tokenizer, captions="all")))
    assert Counter(first) == Counter(second) == expected and len(first) == 28
    assert first != second  # a new shard order and shuffle each epoch


def test_more_readers_than_shards_share_the_samples_equally_by_count(coco_shards, tokenizer):
    # two shards of 2 samples among 3 ranks: runs of 1, 1 and 2 samples, none read twice
    everything = [item["key"] for item in items(ImageTextShards(coco_shards, tokenizer))]
    shares = [[item["key"] for item in items(ImageTextShards(coco_shards[:2], tokenizer,
                                                             order=StreamOrder(rank=rank, world_size=3)))]
              for rank in range(3)]
    assert [len(share) for share in shares] == [1, 1, 2]
    assert sum(shares, []) == everything[:4]  # contiguous runs of the epoch's samples, in order
    many = ImageTextShards(coco_shards[:1], tokenizer, order=StreamOrder(rank=1, world_size=2))
    assert [item["key"] for item in items(many)] == everything[1:2]  # one shard, two ranks: one sample each
    two = ImageTextShards(coco_shards[:2], tokenizer, transform=RESIZE)
    assert multimodal_loader(two, 2, device="cuda").num_workers <= 4  # the preset caps workers at the samples
    assert hasattr(multimodal_loader(two, 2, stateful=True, num_workers=0), "state_dict")  # resumable


def test_a_state_saved_when_readers_read_whole_shards_resumes_on_whole_shards(coco_shards, tokenizer):
    # a two-item start [shard in the reader's list, byte offset]: reader 0 of 2 read shards 0 and 2
    everything = [item["key"] for item in items(ImageTextShards(coco_shards, tokenizer))]
    shards = ImageTextShards(coco_shards, tokenizer, order=StreamOrder(rank=0, world_size=2))
    state = {**shards.state_dict(), "epoch": 0, "slots": 2, "position": [0, [1, 0], 0]}
    del state["turns"]  # saved before passes turned, as such states were
    shards.load_state_dict(state)
    assert [item["key"] for item in items(shards)] == everything[4:6]  # the rest of shard 2
    assert [item["key"] for item in items(shards)] == everything[:4]  # the next pass: shares by count, unturned


def test_every_sample_is_trained_on_within_two_epochs_in_shard_order_too(coco_shards, tokenizer):
    # 8 samples, 2 workers of 4, batches of 3: each worker drops one sample an epoch, the end of its
    # share in even epochs and one before its middle in odd ones (recipes.core.sources.streams.turning_point)
    everything = {item["key"] for item in items(ImageTextShards(coco_shards, tokenizer))}
    shards = ImageTextShards(coco_shards, tokenizer, transform=RESIZE, order=StreamOrder(seed=0))
    loader = multimodal_loader(shards, 3, device="cpu", seed=0, num_workers=2, persistent_workers=False)
    epochs = []
    for epoch in range(2):
        shards.set_epoch(epoch)
        epochs.append({key for batch in loader for key in batch["key"]})
    assert len(everything) == 8 and len(epochs[0]) == len(epochs[1]) == 6
    assert epochs[0] != epochs[1] and epochs[0] | epochs[1] == everything  # what one epoch drops, the next reads


def test_shuffle_buffer_is_seeded_and_changes_with_the_epoch(coco_shards, tokenizer):
    def order(seed, epoch, buffer=8):
        shards = ImageTextShards(coco_shards, tokenizer, captions="all",
                                 order=StreamOrder(shuffle_buffer=buffer, seed=seed))
        shards.set_epoch(epoch)
        return [item["key"] for item in shards]

    in_order = order(0, 0, buffer=0)
    assert in_order == sorted(in_order)
    assert order(0, 0) == order(0, 0)
    assert order(0, 0) != order(0, 1) and order(0, 0) != order(1, 0)
    assert Counter(order(0, 1)) == Counter(in_order)
    shards = ImageTextShards(coco_shards, tokenizer, captions="all", order=StreamOrder(shuffle_buffer=8, seed=0))
    assert [i["key"] for i in shards] == order(0, 0) and [i["key"] for i in shards] == order(0, 1)  # auto-advance


def test_random_captions_and_crops_do_not_depend_on_the_worker(coco_shards, tokenizer):
    def by_key(num_workers, epoch=0):
        shards = ImageTextShards(coco_shards, tokenizer, transform=AUGMENT,
                                 order=StreamOrder(shuffle_buffer=3, seed=2))
        shards.set_epoch(epoch)
        loader = DataLoader(shards, batch_size=None, num_workers=num_workers)
        return {item["key"]: (item["image"], item["input_ids"].tolist()) for item in loader}

    alone, split = by_key(0), by_key(2)
    assert alone.keys() == split.keys() and len(alone) == 8
    for key, (image, ids) in alone.items():
        assert torch.equal(image, split[key][0]) and ids == split[key][1]
    later = by_key(0, epoch=1)
    assert any(not torch.equal(alone[k][0], later[k][0]) for k in alone)


def test_expand_shards_accepts_lists_folders_globs_and_brace_ranges(coco_shards):
    folder = coco_shards[0].parent
    names = [str(p) for p in coco_shards]
    assert expand_shards(coco_shards) == names
    assert expand_shards(folder) == names
    assert expand_shards(str(folder / "shard-*.tar")) == names
    assert expand_shards(str(folder / "shard-{000001..000003}.tar")) == names[1:]
    with pytest.raises(ValueError, match="no tar shards"):
        expand_shards(str(folder / "nothing-*.tar"))


def test_a_duplicate_member_or_returning_key_names_the_shard_and_drops_only_that_sample(fixtures, tokenizer, tmp_path):
    jpeg = (fixtures / "multimodal" / "images" / "img_0.jpg").read_bytes()
    shard = make_tar(tmp_path / "dup.tar", [
        ("000.jpg", jpeg), ("000.txt", b"a cat"), ("000.txt", b"a dog"),  # webdataset refuses this one
        ("001.jpg", jpeg), ("001.txt", b"a kite"),
        ("002.jpg", jpeg), ("002.txt", b"a bird"), ("001.txt", b"a second 001"),
    ])
    with pytest.raises(DataError, match="dup.tar: key '000' has two 'txt' members"):
        items(ImageTextShards(shard, tokenizer))
    with pytest.warns(SkippedSampleWarning) as caught:
        got = items(ImageTextShards(shard, tokenizer, on_error="skip"))
    assert [item["key"] for item in got] == ["dup.tar/001", "dup.tar/002"]
    assert [item["input_ids"].tolist() for item in got] == [tokenizer.encode(c).ids for c in ("a kite", "a bird")]
    reasons = [str(warning.message).split("dup.tar: ")[1][:24] for warning in caught]
    assert reasons == ["key '000' has two 'txt' ", "key '001' comes back at "]
