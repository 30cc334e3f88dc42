"""ImageTextDataset and ImageTextShards where every kind of thing is wrong at once.

Under ``on_error="skip"`` an epoch yields exactly the good pairs and one warning names each bad
manifest line (or shard member); under ``"raise"`` each is a DataError naming it, from worker
processes too; 16-bit PNGs decode; a bomb is refused before its pixels are allocated.
"""

import io
import json
import os
import re
import shutil
import tarfile

import numpy as np
import pytest
import torch
from PIL import Image
from tokenizers import Tokenizer
from torchvision.transforms import v2

import recipes.multimodal.tar_shards as tar_shards
from recipes.core import DevicePrefetcher
from recipes.core.contracts.errors import DataError, SkippedSampleWarning
from recipes.multimodal import ImageTextDataset, ImageTextShards, multimodal_loader
from recipes.core.contracts.read_options import ReadOptions
from tests.core.hostile import (
    BAD_IMAGES,
    assert_one_warning_each,
    peak_rss_growth_mb,
    recording,
    sixteen_bit_rgb,
    top_byte_chw,
    worker_error,
    write_png16,
)
from tests.photos import jpeg_bytes, overwrite_scan_data, photo
from tests.special_tokens import truncated

HEIGHT, WIDTH = 10, 12
LONG_CAPTION = " ".join(["a very long caption"] * 20_000)
SMALL_LIMIT = 1_000_000  # bytes per tar member, for the shard tests


@pytest.fixture(scope="module")
def tokenizer(fixtures):
    return Tokenizer.from_file(str(fixtures / "text" / "tokenizer.json"))


@pytest.fixture()
def folder(fixtures, tmp_path):
    """images/: good.png (8-bit), deep.png (16-bit), the hostile image files, and link.png,
    a symlink to a picture outside the folder."""
    images = tmp_path / "data" / "images"
    images.mkdir(parents=True)
    pixels = np.random.default_rng(0).integers(0, 256, (HEIGHT, WIDTH, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(images / "good.png")
    write_png16(images / "deep.png", sixteen_bit_rgb(HEIGHT, WIDTH))
    for name in BAD_IMAGES:
        shutil.copy(fixtures / "hostile" / "images" / name, images / name)
    shutil.copy(images / "good.png", tmp_path / "outside.png")
    os.symlink(tmp_path / "outside.png", images / "link.png")
    return tmp_path / "data"


def row(image, caption="a picture"):
    return json.dumps({"image": image, "caption": caption}).encode()


# manifest line -> (its bytes, what the warning / error must say), in file order; None = good
LINES = [
    (row("images/good.png", "a cat on a mat"), None),
    (row("images/truncated.jpg"), BAD_IMAGES["truncated.jpg"]),
    (b"", None),  # a blank line is not a sample (and not an error)
    (row("images/empty.jpg"), BAD_IMAGES["empty.jpg"]),
    (row("images/not_an_image.jpg"), BAD_IMAGES["not_an_image.jpg"]),
    (row("images/bomb.png"), BAD_IMAGES["bomb.png"]),
    (row("images/missing.png"), "cannot read file"),
    (row("../outside.png"), "escapes the dataset root"),
    (row("/etc/hostname"), "is absolute"),
    (row("images/link.png"), "outside the root"),
    (b'{"image": "images/good.png", "caption": "bad \xff\xfe bytes"}', "not valid UTF-8"),
    (json.dumps({"image": "images/good.png"}).encode(), "no 'caption' or 'captions' key"),
    (row("images/good.png", "   "), "empty caption"),
    (row("images/deep.png", "deep colours"), None),
    (row("images/good.png", LONG_CAPTION), None),
    (b'{"image": "images/good.png", "caption": ', "not a JSON object"),
]
GOOD_LINES = [n for n, (raw, reason) in enumerate(LINES, start=1) if reason is None and raw]
BAD_LINES = {n: reason for n, (_, reason) in enumerate(LINES, start=1) if reason is not None}


def write_manifest(folder, lines):
    path = folder / "m.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def test_skip_yields_exactly_the_good_pairs_and_a_warning_names_each_bad_line(folder, tokenizer):
    manifest = write_manifest(folder, [raw for raw, _ in LINES])
    with recording() as caught:
        dataset = ImageTextDataset(manifest, tokenizer, on_error="skip", max_length=77)
        batches = list(multimodal_loader(dataset, 4, train=False, device="cpu", num_workers=0))
    assert [dataset.index.where(i) for i in range(len(dataset))] == [f"{manifest} line {n}" for n in [1, 2, 4, 5, 6, 7, 10, 14, 15]]
    index = [i for batch in batches for i in batch["index"].tolist()]
    assert [dataset.index.where(i) for i in index] == [f"{manifest} line {n}" for n in GOOD_LINES]
    pixels = np.concatenate([batch["pixel_values"].numpy() for batch in batches])
    with Image.open(folder / "images" / "good.png") as good:
        expected_good = np.asarray(good).transpose(2, 0, 1)
    assert np.array_equal(pixels, np.stack([expected_good, top_byte_chw(sixteen_bit_rgb(HEIGHT, WIDTH)), expected_good]))
    ids = [ids[mask.bool()].tolist() for batch in batches for ids, mask in zip(batch["input_ids"], batch["attention_mask"])]
    captions = ["a cat on a mat", "deep colours", LONG_CAPTION]
    assert ids == [truncated(tokenizer, caption, 77) for caption in captions]
    assert_one_warning_each(caught, {f"{manifest} line {n}: ": reason for n, reason in BAD_LINES.items()})


@pytest.mark.parametrize("number", list(BAD_LINES), ids=[f"line{n}" for n in BAD_LINES])
def test_raise_names_the_manifest_line_and_the_problem(folder, tokenizer, number):
    manifest = write_manifest(folder, [LINES[0][0], LINES[number - 1][0]])
    pattern = rf"m\.jsonl line 2: .*{BAD_LINES[number]}"
    with pytest.raises(DataError, match=pattern):
        dataset = ImageTextDataset(manifest, tokenizer)  # bad rows fail here, bad images below
        dataset[1]


def test_a_manifest_whose_every_row_was_skipped_is_an_error_saying_how_many_and_why(folder, tokenizer):
    bad = [raw for raw, reason in LINES if reason in ("no 'caption' or 'captions' key", "empty caption")]
    manifest = write_manifest(folder, bad)
    with pytest.warns(SkippedSampleWarning), pytest.raises(DataError) as caught:
        ImageTextDataset(manifest, tokenizer, on_error="skip")
    assert f"{manifest}: every row was skipped (2 read, on_error='skip'); the first: " in str(caught.value)
    assert "m.jsonl line 1: no 'caption' or 'captions' key" in str(caught.value)


def test_an_invalid_utf8_csv_row_is_named_not_the_whole_file(folder, tokenizer):
    manifest = folder / "m.csv"
    manifest.write_bytes(b'image,caption\nimages/good.png,fine\nimages/good.png,"bad \xff bytes"\nimages/deep.png,ok\n')
    with pytest.raises(DataError, match=r"m\.csv line 3: caption .* is not valid UTF-8"):
        ImageTextDataset(manifest, tokenizer)
    with pytest.warns(SkippedSampleWarning, match=r"m\.csv line 3"):
        dataset = ImageTextDataset(manifest, tokenizer, on_error="skip")
    assert [dataset.index.where(i) for i in range(len(dataset))] == [f"{manifest} line 2", f"{manifest} line 4"]


def test_an_error_in_a_worker_names_the_manifest_line_and_file(folder, tokenizer):
    manifest = write_manifest(folder, [row("images/good.png")] * 5 + [row("images/truncated.jpg")])
    loader = multimodal_loader(ImageTextDataset(manifest, tokenizer), 2, train=False, device="cpu", num_workers=2)
    message = worker_error(loader, r"m\.jsonl line 6: .*truncated\.jpg: cannot decode")
    assert "DataLoader worker process" in message


# -- tar shards --------------------------------------------------------------------------------


def member(name, data, kind=tarfile.REGTYPE, link=""):
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    return info, io.BytesIO(data) if kind == tarfile.REGTYPE else None


def hostile_members(images):
    """key -> (members, what the error must say); None = good."""
    good, deep = (images / "good.png").read_bytes(), (images / "deep.png").read_bytes()
    caption = member("x.txt", b"a picture")
    cases = {
        "000": ([member("000.png", good), member("000.txt", b"a cat on a mat")], None),
        "001": ([member("001.jpg", b""), caption], BAD_IMAGES["empty.jpg"]),
        "002": ([member("002.jpg", (images / "not_an_image.jpg").read_bytes()), caption], BAD_IMAGES["not_an_image.jpg"]),
        "003": ([member("003.png", (images / "bomb.png").read_bytes()), caption], BAD_IMAGES["bomb.png"]),
        "004": ([member("004.png", deep), member("004.txt", b"deep colours")], None),
        "005": ([member("005.png", good), member("005.txt", b"bad \xff\xfe bytes")], "unreadable caption"),
        "006": ([member("006.png", good), member("006.json", b'{"captions": ["\\ud800"]}')], "not valid UTF-8"),
        "007": ([member("007.png", b"", tarfile.SYMTYPE, "/etc/passwd"), caption], "no image file"),
        "008": ([member("008.png", b"", tarfile.LNKTYPE, "000.png"), caption], "no image file"),
        "009": ([member("009.png", good + bytes(SMALL_LIMIT)), caption], "over the limit"),
        "010": ([member("010.png", (images / "truncated.jpg").read_bytes()), caption], BAD_IMAGES["truncated.jpg"]),
        "011": ([member("011.png", good), member("011.txt", LONG_CAPTION.encode())], None),
    }
    for key, (members, reason) in cases.items():  # the shared caption member takes each key
        cases[key] = ([(m[0] if m is not caption else _renamed(m[0], f"{key}.txt"), m[1]) for m in members], reason)
    return cases


def _renamed(info, name):
    copy = tarfile.TarInfo(name)
    copy.size, copy.type = info.size, info.type
    return copy


def write_shard(path, cases):
    with tarfile.open(path, "w") as tar:
        for members, _ in cases:
            for info, data in members:
                tar.addfile(info, io.BytesIO(data.getvalue()) if data is not None else None)
    return path


@pytest.fixture()
def small_members(monkeypatch):
    # 009's member is over this limit, which the others (the long caption too) stay under
    monkeypatch.setattr(tar_shards, "MAX_MEMBER_BYTES", SMALL_LIMIT)


def test_shards_skip_yields_exactly_the_good_samples_and_names_each_bad_one(folder, tokenizer, small_members):
    cases = hostile_members(folder / "images")
    shard = write_shard(folder / "s.tar", cases.values())
    with recording() as caught:
        items = list(ImageTextShards(shard, tokenizer, on_error="skip"))
    good = [key for key, (_, reason) in cases.items() if reason is None]
    assert [item["key"] for item in items] == [f"s.tar/{key}" for key in good]
    assert np.array_equal(items[1]["image"].numpy(), top_byte_chw(sixteen_bit_rgb(HEIGHT, WIDTH)))
    assert items[2]["input_ids"].tolist() == truncated(tokenizer, LONG_CAPTION, 77)
    expected = {f"s.tar:{key}": reason for key, (_, reason) in cases.items() if reason is not None}
    # the oversized member is refused on its own, and its sample then has no image
    expected["s.tar: member '009.png'"], expected["s.tar:009"] = expected["s.tar:009"], "no image file"
    assert_one_warning_each(caught, expected)


@pytest.mark.parametrize("key", ["001", "002", "003", "005", "006", "007", "009", "010"])
def test_shards_raise_names_the_shard_and_key(folder, tokenizer, small_members, key):
    cases = hostile_members(folder / "images")
    shard = write_shard(folder / "s.tar", [cases["000"], cases[key]])
    with pytest.raises(DataError, match=rf"s\.tar(:{key}|: member '{key}\.).*{cases[key][1]}"):
        list(ImageTextShards(shard, tokenizer))


def test_shards_error_in_a_worker_names_the_shard_and_key(folder, tokenizer):
    cases = hostile_members(folder / "images")
    write_shard(folder / "a.tar", [cases["000"], cases["004"]])
    write_shard(folder / "b.tar", [cases["011"], cases["010"]])
    dataset = ImageTextShards([folder / "a.tar", folder / "b.tar"], tokenizer)
    loader = multimodal_loader(dataset, 1, train=False, device="cpu", num_workers=2)
    message = worker_error(loader, r"b\.tar:010\.png: cannot decode")
    assert "DataLoader worker process" in message


def test_a_bomb_is_refused_by_both_datasets_before_its_pixels_are_allocated(folder, fixtures):
    manifest = write_manifest(folder, [row("images/bomb.png")])
    shard = write_shard(folder / "bomb.tar", [hostile_members(folder / "images")["003"]])
    setup = (
        "from recipes.core.contracts.errors import DataError\n"
        "from recipes.multimodal import ImageTextDataset, ImageTextShards\n"
        f"tokenizer = {str(fixtures / 'text' / 'tokenizer.json')!r}\n"
        f"pairs = ImageTextDataset({str(manifest)!r}, tokenizer)\n"
        f"shards = ImageTextShards({str(shard)!r}, tokenizer)"
    )
    action = (
        "for load in (lambda: pairs[0], lambda: list(shards)):\n"
        "    try:\n        load()\n    except DataError as error:\n        print('refused:', error)"
    )
    growth, out = peak_rss_growth_mb(setup, action)
    assert out.count("refused as a decompression bomb") == 2, out
    assert "m.jsonl line 1: " in out and "bomb.tar:003.png" in out
    assert growth < 32  # decoding the 16000x16000 header's image would take 256-768 MB


def test_write_shards_never_packs_a_file_from_outside_the_root(folder):
    from recipes.multimodal import write_shards

    lines = [row("images/good.png"), row("../outside.png"), row("images/link.png"), row("images/deep.png")]
    manifest = write_manifest(folder, lines)
    with pytest.raises(DataError, match=r"m\.jsonl line 2: path '\.\./outside\.png' escapes"):
        write_shards(manifest, folder / "out")
    with pytest.warns(SkippedSampleWarning) as caught:
        (shard,) = write_shards(manifest, folder / "out", on_error="skip")
    assert sorted(re.search(r"m\.jsonl line (\d+): ", str(w.message))[1] for w in caught) == ["2", "3"]
    with tarfile.open(shard) as tar:
        packed = {name: tar.extractfile(name).read() for name in tar.getnames()}
    images = folder / "images"
    assert {name: data for name, data in packed.items() if name.endswith(".png")} == {
        "000000000.png": (images / "good.png").read_bytes(),
        "000000002.png": (images / "deep.png").read_bytes(),
    }


# -- JPEG scan data overwritten ----------------------------------------------------------------


def _clean_and_damaged():
    data = jpeg_bytes(photo(320, 240, 0), quality=90)
    return data, overwrite_scan_data(data, 0.5, seed=1)


@pytest.mark.parametrize("decode", ["worker", "device"])
def test_strict_decode_raises_or_skips_a_pair_with_overwritten_scan_data(tmp_path, tokenizer, decode):
    clean, damaged = _clean_and_damaged()
    (tmp_path / "clean.jpg").write_bytes(clean)
    (tmp_path / "damaged.jpg").write_bytes(damaged)
    manifest = write_manifest(tmp_path, [row("clean.jpg"), row("damaged.jpg")])
    crop = v2.Compose([v2.Resize(24), v2.CenterCrop(24)])

    def batches(mode=decode, **options):
        dataset = ImageTextDataset(manifest, tokenizer, transform=crop, **options)
        loader = multimodal_loader(dataset, 2, train=False, device="cpu", num_workers=0, decode=mode)
        return list(DevicePrefetcher(loader, "cpu"))

    assert len(batches()[0]["index"]) == 2  # the default decodes it, damaged blocks and all
    reason = r"m\.jsonl line 2: .*damaged\.jpg: cannot decode image \(Corrupt JPEG data"
    with pytest.raises(DataError, match=reason):
        batches(read_options=ReadOptions(strict_decode=True))
    with pytest.warns(SkippedSampleWarning, match=reason) as caught:
        (batch,) = batches(read_options=ReadOptions(strict_decode=True), on_error="skip")
    assert len(caught) == 1 and batch["index"].tolist() == [0]
    assert torch.equal(batch["pixel_values"], batches("worker")[0]["pixel_values"][:1])


def test_strict_decode_raises_or_skips_a_shard_sample_with_overwritten_scan_data(tmp_path, tokenizer):
    clean, damaged = _clean_and_damaged()
    cases = [([member("000.jpg", clean), member("000.txt", b"a cat")], None),
             ([member("001.jpg", damaged), member("001.txt", b"a dog")], None)]
    shard = write_shard(tmp_path / "s.tar", cases)
    assert len(list(ImageTextShards(shard, tokenizer))) == 2  # the default decodes it
    reason = r"s\.tar:001\.jpg: cannot decode image \(Corrupt JPEG data"
    with pytest.raises(DataError, match=reason):
        list(ImageTextShards(shard, tokenizer, read_options=ReadOptions(strict_decode=True)))
    with pytest.warns(SkippedSampleWarning, match=reason) as caught:
        items = list(ImageTextShards(shard, tokenizer, on_error="skip", read_options=ReadOptions(strict_decode=True)))
    assert len(caught) == 1 and [item["key"] for item in items] == ["s.tar/000"]
