"""recipes.vision.prepare and `recipes prepare vision`: a folder's images re-encoded at a bounded size
into the shards ImageShards reads, byte-identical whatever the workers, resumed after kill -9 with the
same bytes, bad images named or skipped and counted, a destination of other options refused; checked
against the originals resized by torchvision (PSNR) and against ImageFolderDataset's labels."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from torchvision.transforms.v2 import functional as F

from recipes.core import DataError, SkippedSampleWarning
from recipes.vision import ImageFolderDataset, ImageShards
from recipes.core.imaging import psnr
from recipes.vision import prepare
from tests.photos import image_folder

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def photos(tmp_path_factory) -> Path:
    """36 photo-like JPEGs of 120x90 in 3 classes."""
    return image_folder(tmp_path_factory.mktemp("photos"), classes=3, per_class=12, size=(120, 90))


def written(dest: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(dest.iterdir()) if path.is_file()}


def test_the_copy_is_the_folder_at_a_bounded_size_and_the_same_bytes_whatever_the_workers(photos, tmp_path):
    one = prepare(photos, tmp_path / "one", max_side=48, samples_per_shard=10, workers=1, progress=False)
    two = prepare(photos, tmp_path / "two", max_side=48, samples_per_shard=10, workers=2, progress=False)
    assert written(tmp_path / "one") == written(tmp_path / "two")
    assert [path.name for path in one.shards] == [f"shard-{n:06d}.tar" for n in range(4)]
    assert one.samples == two.samples == 36 and one.reencoded == 36 and not one.skipped
    assert one.bytes_out < one.bytes_in and "36 samples in 4 shards" in str(one)
    folder = ImageFolderDataset(photos)
    streamed = list(ImageShards(one.shards, classes=tmp_path / "one" / "classes.txt"))
    assert [label for _, label in streamed] == [label for _, label in folder.samples]
    for (image, _), (original, _) in zip(streamed, (folder[k] for k in range(len(folder)))):
        assert tuple(image.shape) == (3, 36, 48)  # 120x90 -> longer side 48, never enlarged
        assert psnr(image, F.resize(original, [36, 48], antialias=True)) > 30
    assert one.psnr_median == pytest.approx(min(one.psnr), abs=10) and one.psnr_median > 30
    manifest = json.loads((tmp_path / "one" / "manifest.json").read_text())
    assert manifest["samples"] == 36 and manifest["skipped"] == [] and manifest["domain"] == "vision"
    assert (tmp_path / "one" / "classes.txt").read_text().split() == folder.classes
    assert manifest["options"] == {"max_side": 48, "quality": 90, "samples_per_shard": 10}
    assert [shard["samples"] for shard in manifest["shards"]] == [10, 10, 10, 6]
    kept = prepare(photos, tmp_path / "kept", samples_per_shard=40, workers=1, progress=False)
    assert kept.reencoded == 0 and [image for image, _ in ImageShards(kept.shards)][0].shape[-1] == 120


def test_other_options_are_refused_by_name_unless_overwritten(photos, tmp_path):
    prepare(photos, tmp_path, max_side=48, samples_per_shard=10, workers=1, progress=False)
    with pytest.raises(ValueError, match=r"was prepared with other options \(max_side=48\); pass overwrite=True"):
        prepare(photos, tmp_path, max_side=32, samples_per_shard=10, workers=1, progress=False)
    again = prepare(photos, tmp_path, max_side=32, samples_per_shard=20, workers=1, overwrite=True, progress=False)
    assert sorted(path.name for path in tmp_path.glob("shard-*")) == ["shard-000000.tar", "shard-000001.tar"]
    assert again.reused == 0 and again.samples == 36


def test_a_bad_image_stops_the_run_named_or_is_skipped_counted_and_named(photos, tmp_path):
    source = tmp_path / "source"
    image_folder(source, classes=2, per_class=3, size=(60, 40))
    (source / "class_1" / "img_1.jpg").write_bytes(b"\xff\xd8 not a jpeg")
    with pytest.raises(DataError, match=r"class_1/img_1.jpg"):
        prepare(source, tmp_path / "raise", max_side=32, workers=1, progress=False)
    with pytest.warns(SkippedSampleWarning, match=r"class_1/img_1.jpg"):
        summary = prepare(source, tmp_path / "skip", max_side=32, workers=1, on_error="skip", progress=False)
    assert summary.samples == 5 and [where for where, _ in summary.skipped] == [str(source / "class_1" / "img_1.jpg")]
    assert "1 skipped" in str(summary) and "img_1.jpg" in str(summary)
    assert json.loads((tmp_path / "skip" / "manifest.json").read_text())["skipped"][0][0].endswith("img_1.jpg")


@pytest.mark.slow
def test_a_run_killed_at_any_point_and_run_again_gives_the_uninterrupted_bytes(photos, tmp_path):
    arguments = ["-m", "recipes", "prepare", "vision", str(photos), "--max-side", "48", "--samples-per-shard", "3",
                 "--workers", "1"]
    whole = tmp_path / "whole"
    prepare(photos, whole, max_side=48, samples_per_shard=3, workers=1, progress=False)
    for shards in (2, 7):  # kill -9 once this many shards have their record
        dest = tmp_path / f"killed-{shards}"
        run = subprocess.Popen([sys.executable, *arguments, str(dest)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, cwd=ROOT)
        deadline = time.monotonic() + 60
        while len(list((dest / ".prepare").glob("shard-*.json"))) < shards and run.poll() is None:
            assert time.monotonic() < deadline
            time.sleep(0.005)
        os.kill(run.pid, signal.SIGKILL)
        run.wait()
        assert not (dest / "manifest.json").exists()
        again = subprocess.run([sys.executable, *arguments, str(dest)], check=True, capture_output=True, text=True,
                               cwd=ROOT)
        assert written(dest) == written(whole), shards
        reused = int(re.search(r"\((\d+) already written\)", again.stdout).group(1))
        assert shards <= reused < 12, again.stdout


def test_recipes_prepare_prints_the_summary_and_check_catches_a_damaged_shard_by_its_sha256(photos, tmp_path, capsys):
    from recipes.__main__ import main

    dest = tmp_path / "prepared"
    assert main(["prepare", "vision", str(photos), str(dest), "--max-side", "40", "--samples-per-shard", "12",
                 "--workers", "2"]) == 0
    out = capsys.readouterr().out
    assert "36 samples in 3 shards (0 already written), 36 re-encoded, median PSNR" in out and "ImageShards(" in out
    assert main(["check", "vision", str(dest)]) == 0
    assert "3 of 3 shards as manifest.json lists them (sha256)" in capsys.readouterr().out
    shard = dest / "shard-000001.tar"
    data = bytearray(shard.read_bytes())
    data[-1] ^= 0xFF  # in the end-of-archive zeros: every sample still reads, only the checksum can tell
    shard.write_bytes(bytes(data))
    assert main(["check", "vision", str(dest)]) == 1
    assert "shard-000001.tar" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["prepare", "vision", str(photos), str(dest), "--max-side", "41", "--samples-per-shard", "12"])
    assert "was prepared with other options (max_side=40)" in capsys.readouterr().err


def test_a_prepared_folder_is_listed_from_its_manifest_and_verify_shards_refuses_a_damaged_shard(photos, tmp_path):
    from recipes.core import ReadOptions, streams
    from recipes.core.sources.tar_samples import sample_starts
    from tests.servers import FaultyHTTPServer

    dest = tmp_path / "prepared"
    summary = prepare(photos, dest, max_side=40, samples_per_shard=10, workers=2, progress=False)
    manifest = json.loads((dest / "manifest.json").read_text())
    for shard, entry in zip(summary.shards, manifest["shards"]):  # the reader's own header walk is the oracle
        assert entry["starts"] == sample_starts(str(shard), max_member_bytes=2**20).tolist()
    walked = [(image.tolist(), label) for image, label in ImageShards(summary.shards)]
    names = dest / "classes.txt"
    assert [(image.tolist(), label) for image, label in ImageShards(dest, classes=names)] == walked
    verified = ImageShards(dest, classes=names, read_options=ReadOptions(verify_shards=True))
    assert [(image.tolist(), label) for image, label in verified] == walked
    # over HTTP the folder is read from its manifest: no listing, no shard opened to index it
    with FaultyHTTPServer(tmp_path) as server:
        remote = ImageShards(server.url("prepared"), read_options=ReadOptions(verify_shards=True))
        listed = list(server.log)
        assert [(image.tolist(), label) for image, label in remote] == walked
    assert ("LIST", "/prepared") not in listed and ("GET", "/prepared/manifest.json") in listed
    shard = dest / "shard-000001.tar"
    data = bytearray(shard.read_bytes())
    data[-1] ^= 0xFF  # in the end-of-archive zeros: only the checksum can tell
    shard.write_bytes(bytes(data))
    with pytest.raises(DataError, match=r"shard-000001.tar: its bytes are not those manifest.json lists"):
        ImageShards(dest, read_options=ReadOptions(verify_shards=True))
    assert len(list(ImageShards(dest))) == 36  # without verify_shards the same size reads as before
    with pytest.raises(ValueError, match=r"verify_shards needs the folder recipes prepare wrote"):
        ImageShards(summary.shards, read_options=ReadOptions(verify_shards=True))
    (dest / "shard-000003.tar").unlink()  # a shard gone: the folder is listed and walked as any folder
    assert len(streams.listed_shards(dest, max_member_bytes=2**20)[0]) == 3


def test_a_copy_written_to_s3_is_the_local_copy_resumed_there_and_read_from_there(photos, tmp_path):
    import boto3

    from tests.servers import s3_server

    local = tmp_path / "local"
    prepare(photos, local, max_side=40, samples_per_shard=10, workers=1, progress=False)
    with s3_server() as (endpoint, options):
        url = "s3://data/photos-prepared"  # moto's buckets live as long as the process: a prefix of its own
        summary = prepare(photos, url, max_side=40, samples_per_shard=10, workers=2, progress=False,
                          storage_options=options)
        assert [str(shard) for shard in summary.shards] == [f"{url}/shard-00000{k}.tar" for k in range(4)]
        bucket = boto3.resource("s3", endpoint_url=endpoint, aws_access_key_id="testing",
                                aws_secret_access_key="testing", region_name="us-east-1").Bucket("data")

        def objects() -> dict[str, bytes]:
            return {item.key.removeprefix("photos-prepared/"): item.get()["Body"].read()
                    for item in bucket.objects.filter(Prefix="photos-prepared/") if "/.prepare/" not in item.key}

        assert objects() == written(local)  # shards, classes.txt and manifest.json: the bytes of the local copy
        bucket.Object("photos-prepared/shard-000002.tar").delete()  # as a run stopped before that upload leaves it
        bucket.Object("photos-prepared/.prepare/shard-000003.tar.json").delete()  # stopped before that record's
        again = prepare(photos, url, max_side=40, samples_per_shard=10, workers=1, progress=False,
                        storage_options=options)
        assert again.reused == 2 and objects() == written(local)
        read = ImageShards(url, classes=str(local / "classes.txt"), storage_options=options)
        assert [label for _, label in read] == [label for _, label in ImageShards(local, classes=local / "classes.txt")]
        refused = r"s3://data/photos-prepared was prepared with other options \(max_side=40\)"
        with pytest.raises(ValueError, match=refused):
            prepare(photos, url, max_side=41, samples_per_shard=10, workers=1, progress=False, storage_options=options)
