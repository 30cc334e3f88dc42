"""recipes.video.prepare and `recipes prepare video`: each video of a class folder re-encoded as H.264
MP4 at a bounded short side with a keyframe every clip span, byte-identical whatever the workers; the
copy read by VideoFolderDataset and indexed from its manifest, no file opened; a bad video named or
skipped and counted. The oracles are TorchCodec's decode of the originals (resized by torchvision,
at the times a frame rate picks) and its demuxer's keyframe flags on the files written."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from torchcodec.decoders import Demuxer, VideoDecoder
from torchvision.transforms.v2 import functional as F

from recipes.__main__ import main
from recipes.core import DataError, SkippedSampleWarning
from recipes.core.imaging import psnr
from recipes.video import VideoFolderDataset, prepare, video_loader
from recipes.video import index as video_index

VIDEOS = ["left/l0_h264.mp4", "left/l1_vp9.webm", "left/nested/l2_mpeg4.avi", "right/r0_av1.webm",
          "right/r1_mjpeg.avi", "right/r2_vfr.mp4", "still/S2_UPPER.MP4", "still/s0_rotated.mp4", "still/s1_short.mp4"]


@pytest.fixture(scope="module")
def folder(fixtures: Path) -> Path:
    return fixtures / "video" / "folder"


@pytest.fixture(scope="module")
def prepared(folder, tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("prepared")
    prepare(folder, dest, short_side=32, frames_per_clip=3, frame_step=2, workers=2, progress=False)
    return dest


def copy_of(name: str, dest: Path) -> Path:
    return dest / "videos" / Path(name).with_suffix(".mp4")


def written(dest: Path) -> dict[str, bytes]:
    return {path.relative_to(dest).as_posix(): path.read_bytes() for path in sorted(dest.rglob("*"))
            if path.is_file() and ".prepare" not in path.parts}


def test_each_video_is_h264_at_the_short_side_with_a_keyframe_every_clip_span_whatever_the_workers(
        folder, prepared, tmp_path):
    prepare(folder, tmp_path, short_side=32, frames_per_clip=3, frame_step=2, workers=1, progress=False)
    assert written(tmp_path) == written(prepared)
    for name in VIDEOS:
        original, copy = VideoDecoder(str(folder / name)), VideoDecoder(str(copy_of(name, prepared)))
        assert copy.metadata.codec == "h264", name
        frames = copy.metadata.num_frames
        # the span of 3 frames 2 apart is 5: a keyframe every 5 frames, exactly (x264's scene cuts are off)
        keyframes = Demuxer(str(copy_of(name, prepared))).streams[0].scan().key_frame_indices.tolist()
        assert keyframes == list(range(0, frames, 5)), name
        height, width = copy.metadata.height, copy.metadata.width
        tall = original.metadata.height > original.metadata.width if "rotated" not in name else True
        assert min(height, width) == 32 and (height > width) == tall, name  # upright: the rotation applied
        assert height % 2 == width % 2 == 0
        if "vfr" in name:  # made constant at its average rate: the frame shown at each k / rate seconds
            times = [k / copy.metadata.average_fps for k in range(frames)]
            expected = original.get_frames_played_at(times).data
        else:
            assert frames == original.metadata.num_frames, name
            expected = original.get_frames_in_range(0, frames).data
        expected = F.resize(expected, [height, width], antialias=True)
        got = copy.get_frames_in_range(0, frames).data
        assert np.median([psnr(expected[k], got[k]) for k in range(frames)]) > 27, name


def test_the_copy_is_read_by_the_folder_dataset_and_indexed_from_its_manifest_opening_no_file(
        folder, prepared, monkeypatch):
    source = VideoFolderDataset(folder, frames_per_clip=3, frame_step=2)

    def opened(path, name):
        raise AssertionError(f"{name} was probed")

    monkeypatch.setattr(video_index, "probe", opened)
    copy = VideoFolderDataset(prepared / "videos", frames_per_clip=3, frame_step=2)
    assert copy.classes == source.classes and [label for _, label in copy.samples] == [
        label for _, label in source.samples]
    for video in range(len(VIDEOS)):
        listed, original = copy.clips.index.info(video), source.clips.index.info(video)
        if "vfr" not in VIDEOS[video]:
            assert listed.frames == original.frames and listed.fps == original.fps
        assert listed.codec == "h264" and listed.constant
    batch = next(iter(video_loader(copy, 3, train=False, device="cpu", num_workers=0)))
    assert tuple(batch["video"].shape[:3]) == (3, 3, 3)


def test_a_changed_copy_is_probed_again_and_a_resampled_rate_counts_its_frames(folder, fixtures, tmp_path,
                                                                                 monkeypatch):
    dest = tmp_path / "out"
    prepare(folder, dest, fps=10.0, frames_per_clip=4, workers=1, progress=False)
    short = VideoDecoder(str(copy_of("still/s1_short.mp4", dest)))
    # 10 frames at 25 fps last 0.4 s: 4 frames at 10 fps, the sizes kept (no short_side)
    assert (short.metadata.num_frames, short.metadata.average_fps) == (4, 10.0)
    assert (short.metadata.height, short.metadata.width) == (48, 64)
    target = copy_of("left/l0_h264.mp4", dest)
    shutil.copyfile(fixtures / "video/folder/still/s1_short.mp4", target)  # another file under the listed name
    probed = []
    real = video_index.probe
    monkeypatch.setattr(video_index, "probe", lambda path, name: probed.append(name) or real(path, name))
    dataset = VideoFolderDataset(dest / "videos", frames_per_clip=4)
    assert probed == [str(target)] and dataset.clips.index.info(0).frames == 10


def test_a_bad_video_stops_the_run_named_or_is_skipped_counted_and_leaves_no_file(folder, fixtures, tmp_path):
    source = tmp_path / "source"
    shutil.copytree(folder, source)
    shutil.copyfile(fixtures / "video/hostile/truncated.mp4", source / "left" / "cut.mp4")
    with pytest.raises(DataError, match=r"left/cut.mp4"):
        prepare(source, tmp_path / "raised", workers=1, progress=False)
    with pytest.warns(SkippedSampleWarning, match=r"cut.mp4"):
        summary = prepare(source, tmp_path / "skipped", on_error="skip", workers=2, progress=False)
    assert summary.samples == len(VIDEOS) and len(summary.skipped) == 1
    assert not (tmp_path / "skipped/videos/left/cut.mp4").exists()
    listed = json.loads((tmp_path / "skipped/manifest.json").read_text())
    assert len(listed["shards"]) == len(VIDEOS) and len(listed["skipped"]) == 1
    with pytest.warns(SkippedSampleWarning, match=r"cut.mp4"):  # a rerun finds every file written, and says so again
        again = prepare(source, tmp_path / "skipped", on_error="skip", workers=1, progress=False)
    assert again.reused == len(VIDEOS) + 1 and again.samples == len(VIDEOS)


def test_recipes_prepare_video_prints_how_to_read_it_and_check_reads_the_sha256s(folder, tmp_path, capsys):
    dest = tmp_path / "prepared"
    assert main(["prepare", "video", str(folder), str(dest), "--short-side", "24", "--frames-per-clip", "4",
                 "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert "9 samples in 9 files" in out and f"VideoFolderDataset({str(dest / 'videos')!r}" in out
    assert main(["check", "video", str(dest / "videos")]) == 0
    assert "9 of 9 files as manifest.json lists them (sha256)" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["prepare", "video", str(folder), str(tmp_path / "other"), "--sample-rate", "8000"])
    assert "takes no --sample-rate" in capsys.readouterr().err


def test_a_copy_written_to_s3_holds_the_bytes_of_the_local_copy(folder, prepared):
    import boto3

    from tests.servers import s3_server

    with s3_server() as (endpoint, options):
        prepare(folder, "s3://data/footage-prepared", short_side=32, frames_per_clip=3, frame_step=2, workers=2,
                progress=False, storage_options=options)
        bucket = boto3.resource("s3", endpoint_url=endpoint, aws_access_key_id="testing",
                                aws_secret_access_key="testing", region_name="us-east-1").Bucket("data")
        objects = {item.key.removeprefix("footage-prepared/"): item.get()["Body"].read()
                   for item in bucket.objects.filter(Prefix="footage-prepared/") if "/.prepare/" not in item.key}
    assert objects == written(prepared)  # the videos under their folders, and the same manifest


def test_the_folder_of_a_manifest_is_read_by_the_manifest_dataset_unchanged(fixtures, tmp_path, monkeypatch):
    from recipes.video import VideoDataset

    kinetics = fixtures / "video" / "kinetics"
    prepare(kinetics / "full", tmp_path, short_side=24, frames_per_clip=4, workers=1, progress=False)
    assert sorted(path.name for path in (tmp_path / "videos").iterdir()) == ["vid_aaa.mp4", "vid_bbb.mp4",
                                                                            "vid_ccc.mp4"]
    source = VideoDataset.kinetics(kinetics / "train.csv", kinetics / "full", trimmed=False, frames_per_clip=4)
    monkeypatch.setattr(video_index, "probe", lambda path, name: pytest.fail(f"{name} was probed"))
    copy = VideoDataset.kinetics(kinetics / "train.csv", tmp_path / "videos", trimmed=False, frames_per_clip=4)
    assert copy.classes == source.classes and len(copy) == len(source)
    for index in range(len(copy)):  # each segment in seconds cuts the same frames of the copy as of the original
        assert copy[index]["frames"].tolist() == source[index]["frames"].tolist()
        assert min(copy[index]["video"].shape[-2:]) == 24


def test_an_ffmpeg_without_the_encoder_is_refused_before_any_video_is_read(folder, tmp_path, monkeypatch):
    from recipes.video import prepare_videos

    monkeypatch.setattr(prepare_videos, "CODEC", "libx264_absent")  # as an FFmpeg built without libx264 has it
    with pytest.raises(RuntimeError, match="encodes H.264 with FFmpeg's libx264_absent, which the FFmpeg"):
        prepare(folder, tmp_path / "out", workers=1, progress=False)
    assert not (tmp_path / "out").exists()
