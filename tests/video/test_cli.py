"""`recipes demo|check|show|copy|bench video`: the command line on a video folder or manifest.

- check: every video indexed as TorchCodec reads it, decoded at three places, bad files named.
- show: a strip of each clip's frames with its label, file and frame numbers.
- demo, bench and copy run through the registry as for every domain.
"""

import contextlib
import io
import json
import shutil
from pathlib import Path

import torch
from PIL import Image
from torchcodec.decoders import VideoDecoder

from recipes.__main__ import main
from recipes.cli.check import check
from recipes.cli.datasets import DataOptions
from recipes.video import VideoDataset, VideoFolderDataset, video_loader
from recipes.video.demo import build, open_path
from recipes.video.fixtures import FOLDER_CLIPS
from recipes.video.show import GAP, MIN_SIDE, strip, strips


def _run(*argv: str) -> tuple[int, str]:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        status = main(list(argv))
    return status, printed.getvalue()


def test_a_clean_folder_is_summarised_from_what_torchcodec_reads(fixtures):
    root = fixtures / "video" / "folder"
    report = check(DataOptions("video", root))
    assert report.clean, report.render()
    assert report.summary["videos"] == len(FOLDER_CLIPS) and report.summary["classes"] == 3
    assert report.summary["variable frame rate"] == 1 and report.summary["rotated"] == 1
    assert report.summary["codecs"] == {"h264": 5, "vp9": 1, "mpeg4": 1, "av1": 1, "mjpeg": 1}
    for row in report.files:
        metadata = VideoDecoder(row["path"]).metadata
        assert (row["frames"], row["width"], row["height"]) == (metadata.num_frames, metadata.width, metadata.height)


def test_every_bad_file_is_named_with_its_reason(fixtures, tmp_path):
    shutil.copytree(fixtures / "video" / "hostile", tmp_path / "root" / "bad")
    status, printed = _run("check", "video", str(tmp_path / "root"), "--json")
    report = json.loads(printed)
    named = {Path(problem["path"]).name: problem["reason"] for problem in report["problems"]}
    assert status == 1 and len(named) == 8 and named["empty.mp4"] == "empty file (0 bytes)"
    assert named["sound_only.mp4"].startswith("no video stream") and "16000x16000" in named["huge_frames.avi"]


def test_show_draws_a_strip_of_each_clips_frames_under_its_label_and_file(fixtures, tmp_path):
    status, printed = _run("show", "video", str(fixtures / "video" / "folder"), "-o", str(tmp_path / "b.png"),
                           "--size", "32", "--batch-size", "3")
    assert status == 0 and "video: the first evaluation batch" in printed
    with Image.open(tmp_path / "b.png") as picture:
        assert picture.width >= 8 * MIN_SIDE and picture.height > 3 * MIN_SIDE
    options = DataOptions("video", fixtures / "video" / "folder", size=32)
    dataset = open_path(options, train=False)
    batch = next(iter(video_loader(dataset, 2, train=False, device="cpu", num_workers=0)))
    images, captions = strips(batch, dataset)
    assert images[0].shape == (3, MIN_SIDE, 8 * MIN_SIDE + 7 * GAP)
    assert captions[0] == ["0 left", "left/l0_h264.mp4", "frames 0, 2, 4, 6, 9, 11, 13, 15"]  # 8 of its 16
    row = strip(torch.full((2, 3, 4, 4), 7, dtype=torch.uint8))
    assert row.shape == (3, MIN_SIDE, 2 * MIN_SIDE + GAP) and (row[:, :, MIN_SIDE] == 255).all()


def test_open_path_reads_a_folder_or_a_manifest(fixtures):
    folder = open_path(DataOptions("video", fixtures / "video" / "folder", size=32), train=True)
    manifest = open_path(DataOptions("video", fixtures / "video" / "manifest.csv", size=32), train=False)
    assert isinstance(folder, VideoFolderDataset) and isinstance(manifest, VideoDataset)
    assert len(folder) == len(manifest) == len(FOLDER_CLIPS)


def test_the_demo_loader_gives_batches_of_four_clips(fixtures):
    dataset, loader = build(fixtures)
    batches = list(loader)
    assert len(dataset) == 9 and len(batches) == 2
    assert all(batch["video"].shape == (4, 8, 3, 32, 32) for batch in batches)
    status, printed = _run("demo", "video")
    assert status == 0 and "['video']: Video [4, 8, 3, 32, 32] uint8" in printed


def test_bench_measures_the_preset_on_the_folder(fixtures):
    status, printed = _run("bench", "video", str(fixtures / "video" / "folder"), "--batch-size", "2", "--size", "32",
                           "--seconds", "2", "--max-workers", "1", "--device", "cpu", "--step-ms", "0")
    assert status == 0 and "video_loader(dataset, 2" in printed and "loader_kwargs = {" in printed
