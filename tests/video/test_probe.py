"""probe reads each fixture's stream from its packets (nothing decoded) as a full decode finds it, and
names every hostile file with its fault; the fixtures are what their README says."""

import struct
from pathlib import Path

import numpy as np
import pytest
from torchcodec.decoders import VideoDecoder

from recipes.core.contracts.errors import DataError
from recipes.video import probe
from recipes.video.fixtures import FOLDER_CLIPS, HEIGHT, WIDTH


@pytest.fixture(scope="module")
def folder(fixtures: Path) -> Path:
    return fixtures / "video" / "folder"


@pytest.mark.parametrize("name", sorted(FOLDER_CLIPS))
def test_frame_counts_rates_and_sizes_match_a_full_decode(folder, name):
    _, frames, fps, _, special = FOLDER_CLIPS[name]
    info = probe(str(folder / name), name)
    decoded = VideoDecoder(str(folder / name)).get_frames_in_range(0, info.frames)
    assert info.frames == frames == len(decoded.data)
    assert info.fps == pytest.approx(fps) and (info.height, info.width) == tuple(decoded.data.shape[-2:])
    assert info.constant == (special != "vfr")
    np.testing.assert_allclose(info.frame_times(), decoded.pts_seconds.numpy(), atol=1e-6)


def test_a_rotated_clip_decodes_upright_with_its_marker_turned_to_the_top_right(folder):
    info = probe(str(folder / "still/s0_rotated.mp4"), "s0")
    assert info.rotation == -90 and (info.height, info.width) == (WIDTH, HEIGHT)
    frame = VideoDecoder(str(folder / "still/s0_rotated.mp4")).get_frame_at(0).data
    assert frame.shape == (3, WIDTH, HEIGHT)
    assert frame[0, :6, -6:].float().mean() > 200 and frame[1:, :6, -6:].float().mean() < 60  # red, top-right
    assert frame[0, :6, :6].float().mean() < 200


def test_a_variable_frame_rate_keeps_its_times_and_no_constant_rate(folder):
    info = probe(str(folder / "right/r2_vfr.mp4"), "r2")
    steps = np.diff(info.times)
    np.testing.assert_allclose(steps[:19], 0.02, atol=1e-6)
    np.testing.assert_allclose(steps[20:], 0.06, atol=1e-6)
    assert not info.constant and info.fps == pytest.approx(25)


HOSTILE = {
    "empty.mp4": "empty file (0 bytes)",
    "not_a_video.mp4": "not a video",
    "sound_only.mp4": "no video stream (it holds: audio aac)",
    "truncated.mp4": "an MP4/MOV file that does not open: truncated or damaged",
    "truncated.avi": "truncated: the header counts 9 frames",
    "huge_frames.avi": "the header claims 16000x16000 frames",
    "many_frames.avi": "the header claims 2,147,483,647 frames",
    "unknown_codec.avi": "unsupported codec",
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_each_hostile_file_is_refused_with_its_name_and_fault(fixtures, name):
    path = fixtures / "video" / "hostile" / name
    with pytest.raises(DataError) as caught:
        probe(str(path), str(path))
    assert str(caught.value).startswith(f"{path}: {HOSTILE[name]}")


def test_a_missing_file_is_named():
    with pytest.raises(DataError, match=r"^nowhere.mp4: cannot read the file \(No such file"):
        probe("/nonexistent/nowhere.mp4", "nowhere.mp4")


def test_the_hostile_headers_claim_what_the_readme_says(fixtures):
    hostile = fixtures / "video" / "hostile"
    huge = (hostile / "huge_frames.avi").read_bytes()
    at = huge.index(b"strf") + 12
    assert struct.unpack("<ii", huge[at : at + 8]) == (16000, 16000) and len(huge) < 10_000
    many = (hostile / "many_frames.avi").read_bytes()
    assert struct.unpack("<I", many[many.index(b"avih") + 24 : many.index(b"avih") + 28]) == (2**31 - 1,)
    unknown = (hostile / "unknown_codec.avi").read_bytes()
    assert unknown[unknown.index(b"strh") + 12 : unknown.index(b"strh") + 16] == b"ZZZZ"
    assert (hostile / "empty.mp4").stat().st_size == 0


def test_the_fixtures_stay_small(fixtures):
    files = [path for path in (fixtures / "video").rglob("*") if path.is_file()]
    assert sum(path.stat().st_size for path in files) < 300_000


def test_the_kinetics_csv_cuts_segments_out_of_whole_videos(fixtures):
    root = fixtures / "video" / "kinetics"
    rows = (root / "train.csv").read_text().splitlines()
    assert rows[0] == "label,youtube_id,time_start,time_end,split" and len(rows) == 5
    for row in rows[1:]:
        label, video, start, end, _ = row.split(",")
        whole = probe(str(root / "full" / f"{video}.mp4"), video)
        cut = probe(str(root / "trimmed" / label / f"{video}_{int(start):06d}_{int(end):06d}.mp4"), video)
        assert cut.frames == (int(end) - int(start)) * 25 <= whole.frames
