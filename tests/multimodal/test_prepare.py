"""recipes.multimodal.prepare and `recipes prepare multimodal`: a caption manifest's images re-encoded at a
bounded size beside their captions, in the shards ImageTextShards reads; byte-identical whatever the
workers, the same members as write_shards(max_side=...), bad images named or skipped and counted. The
oracles are the manifest itself, the shards read with tarfile, and the originals resized by torchvision."""

import io
import json
import tarfile
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from torchvision.transforms import v2
from torchvision.transforms.v2 import functional as F

from recipes.core import DataError, ReadOptions, SkippedSampleWarning
from recipes.core.imaging import psnr
from recipes.multimodal import ImageTextShards, multimodal_loader, prepare, write_shards
from tests.photos import image_folder


@pytest.fixture(scope="module")
def manifest(tmp_path_factory) -> Path:
    """captions.jsonl over 14 photo-like JPEGs of 120x90 under images/, every third row with two captions."""
    root = tmp_path_factory.mktemp("pairs")
    image_folder(root / "images", classes=2, per_class=7, size=(120, 90))
    images = sorted(path.relative_to(root).as_posix() for path in (root / "images").rglob("*.jpg"))
    rows = [{"image": name, "captions": [f"photo {k}"] + ([f"another view of {k}"] if k % 3 == 0 else [])}
            for k, name in enumerate(images)]
    (root / "captions.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return root / "captions.jsonl"


def pixels(data: bytes) -> torch.Tensor:
    """uint8 [3, H, W], decoded by PIL."""
    return torch.from_numpy(np.array(Image.open(io.BytesIO(data)).convert("RGB"))).permute(2, 0, 1).contiguous()


def rows_of(manifest: Path) -> list[dict]:
    return [json.loads(line) for line in manifest.read_text(encoding="utf-8").splitlines()]


def members(shards) -> dict[str, bytes]:
    """Every member of the shards, by name, read with tarfile."""
    found = {}
    for shard in shards:
        with tarfile.open(shard) as tar:
            found |= {member.name: tar.extractfile(member).read() for member in tar.getmembers()}
    return found


def written(dest: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(dest.iterdir()) if path.is_file()}


def test_each_image_is_written_at_a_bounded_size_beside_its_captions_the_same_bytes_whatever_the_workers(
        manifest, tmp_path):
    one = prepare(manifest, tmp_path / "one", max_side=48, samples_per_shard=5, workers=1, progress=False)
    prepare(manifest, tmp_path / "two", max_side=48, samples_per_shard=5, workers=2, progress=False)
    assert written(tmp_path / "one") == written(tmp_path / "two")
    assert one.samples == 14 and one.reencoded == 14 and not one.skipped and len(one.shards) == 3
    assert json.loads((tmp_path / "one" / "manifest.json").read_text())["domain"] == "multimodal"
    found = members(one.shards)
    for k, row in enumerate(rows_of(manifest)):
        captions = row["captions"]
        if len(captions) == 1:
            assert found[f"{k:09d}.txt"].decode() == captions[0]
        else:
            assert json.loads(found[f"{k:09d}.json"]) == {"captions": captions}
        image = pixels(found[f"{k:09d}.jpg"])
        assert tuple(image.shape) == (3, 36, 48)  # 120x90 -> longer side 48
        original = pixels((manifest.parent / row["image"]).read_bytes())
        assert psnr(image, F.resize(original, [36, 48], antialias=True)) > 30
    # write_shards(max_side=...) writes the same members in one process
    assert members(write_shards(manifest, tmp_path / "written", 5, max_side=48)) == found


def test_the_loader_reads_every_prepared_pair(manifest, tokenizer, tmp_path):
    summary = prepare(manifest, tmp_path, max_side=40, samples_per_shard=4, workers=2, progress=False)
    shards = ImageTextShards(tmp_path, tokenizer, captions="first")
    items = list(shards)
    keys = [item["key"].rpartition("/")[2] for item in items]  # shard-000000.tar/000000000
    assert sorted(keys) == [f"{k:09d}" for k in range(14)]
    assert all(max(item["image"].shape[-2:]) == 40 for item in items)
    first = {int(key): item["input_ids"].tolist() for key, item in zip(keys, items)}
    for k, row in enumerate(rows_of(manifest)):
        assert first[k] == tokenizer.encode(row["captions"][0]).ids[: len(first[k])]
    loader = multimodal_loader(ImageTextShards(tmp_path, tokenizer, transform=v2.CenterCrop(32)), 4, train=False,
                               device="cpu", seed=0, num_workers=2)
    batches = list(loader)
    assert sum(len(batch["pixel_values"]) for batch in batches) == summary.samples == 14
    assert all(batch["pixel_values"].shape[1:] == (3, 32, 32) for batch in batches)


def test_a_bad_image_stops_the_run_named_or_is_skipped_counted_and_named(manifest, tmp_path):
    source = tmp_path / "source"
    source.mkdir()
    rows = rows_of(manifest)[:4] + [{"image": "missing.jpg", "caption": "gone"}, {"image": "bad.jpg", "caption": "x"}]
    for row in rows[:4]:
        (source / row["image"]).parent.mkdir(parents=True, exist_ok=True)
        (source / row["image"]).write_bytes((manifest.parent / row["image"]).read_bytes())
    (source / "bad.jpg").write_bytes(b"\xff\xd8 not a jpeg")
    (source / "pairs.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    with pytest.raises(DataError, match=r"pairs.jsonl line 5: missing.jpg"):
        prepare(source / "pairs.jsonl", tmp_path / "raise", max_side=32, workers=1, progress=False)
    with pytest.warns(SkippedSampleWarning) as caught:
        summary = prepare(source / "pairs.jsonl", tmp_path / "skip", max_side=32, workers=1, on_error="skip",
                          progress=False)
    assert ["missing.jpg" in str(w.message) or "bad.jpg" in str(w.message) for w in caught] == [True, True]
    assert summary.samples == 4 and [where.rsplit(": ", 1)[-1] for where, _ in summary.skipped] == ["missing.jpg",
                                                                                                     "bad.jpg"]
    assert "2 skipped" in str(summary)
    # an image name that leaves the image root is refused, not read
    (source / "escape.jsonl").write_text(json.dumps({"image": "../../etc/passwd", "caption": "x"}) + "\n")
    with pytest.raises(DataError, match=r"escape.jsonl line 1"):
        prepare(source / "escape.jsonl", tmp_path / "escape", workers=1, progress=False)


def test_recipes_prepare_multimodal_and_check_catches_a_damaged_shard(manifest, fixtures, tmp_path, capsys):
    from recipes.__main__ import main

    dest = tmp_path / "prepared"
    assert main(["prepare", "multimodal", str(manifest), str(dest), "--max-side", "40", "--samples-per-shard", "7",
                 "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert "14 samples in 2 shards (0 already written), 14 re-encoded, median PSNR" in out and "ImageTextShards(" in out
    tokenizer = str(fixtures / "text" / "tokenizer.json")
    assert main(["check", "multimodal", str(dest), "--tokenizer", tokenizer]) == 0
    assert "2 of 2 shards as manifest.json lists them (sha256)" in capsys.readouterr().out
    shard = dest / "shard-000001.tar"
    data = bytearray(shard.read_bytes())
    data[-1] ^= 0xFF  # in the end-of-archive zeros: every sample still reads, only the checksum can tell
    shard.write_bytes(bytes(data))
    assert main(["check", "multimodal", str(dest), "--tokenizer", tokenizer]) == 1
    assert "shard-000001.tar" in capsys.readouterr().out
    with pytest.raises(DataError, match=r"shard-000001.tar: its bytes are not those manifest.json lists"):
        ImageTextShards(dest, tokenizer, read_options=ReadOptions(verify_shards=True))


def test_sources_prepare_does_not_read_are_refused_by_name(manifest, tmp_path):
    with pytest.raises(ValueError, match=r"prepare reads a caption manifest .* for Parquet, write_shards"):
        prepare(tmp_path / "pairs.parquet", tmp_path / "out", progress=False)
    with pytest.raises(ValueError, match=r"not s3://bucket/pairs.jsonl"):
        prepare("s3://bucket/pairs.jsonl", tmp_path / "out", progress=False)
    with pytest.raises(ValueError, match=r"max_side must be an int >= 0"):
        prepare(manifest, tmp_path / "out", max_side=-1, progress=False)
    with pytest.raises(ValueError, match=r"max_side must be an int >= 0"):
        write_shards(manifest, tmp_path / "out", max_side=-1)
