"""VideoDataset: CSV, JSONL and Parquet manifests give the folder's clips; segments in seconds become the
frames whose times fall in them (variable rates too); Kinetics' CSV, trimmed or whole; rows named when bad."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from recipes.core.contracts.errors import DataError
from recipes.video import KINETICS_TRIMMED, VideoDataset, VideoFolderDataset, probe
from tests.harness import assert_same_batches, with_skip_warnings


@pytest.fixture(scope="module")
def root(fixtures: Path) -> Path:
    return fixtures / "video"


def _rows(root: Path) -> list[dict]:
    lines = (root / "manifest.csv").read_text().splitlines()
    return [{"video": line.split(",")[0], "label": int(line.split(",")[1])} for line in lines[1:]]


@pytest.mark.parametrize("form", ["csv", "jsonl", "parquet"])
def test_each_manifest_form_gives_the_clips_of_the_same_videos(root, tmp_path, form):
    pytest.importorskip("pyarrow")
    import pyarrow as pa
    import pyarrow.parquet as pq

    source = root / "manifest.csv"
    if form == "jsonl":
        source = tmp_path / "manifest.jsonl"
        source.write_text("".join(json.dumps(row) + "\n" for row in _rows(root)))
    elif form == "parquet":
        source = tmp_path / "manifest.parquet"
        pq.write_table(pa.Table.from_pylist(_rows(root)), source)
    dataset = VideoDataset(source, video_root=root, frames_per_clip=4, clips_per_video=2)
    by_path = {row["video"]: row["label"] for row in _rows(root)}
    assert len(dataset) == 2 * len(by_path) and dataset.classes is None
    folder = VideoFolderDataset(root / "folder", frames_per_clip=4, clips_per_video=2)
    for index in range(len(dataset)):
        item = dataset[index]
        relative = Path(dataset.path(index // 2)).relative_to(root).as_posix()
        same = folder[2 * [p for p, _ in folder.samples].index(dataset.path(index // 2)) + index % 2]
        assert item["label"] == by_path[relative] and torch.equal(item["video"], same["video"])
    place = {"csv": "line 3", "jsonl": "line 2", "parquet": "row 1"}[form]  # a CSV's header is its line 1
    assert dataset.describe(3) == f"{dataset.name} {place} ({dataset.path(1)}), clip 1 of 2"


def test_segments_in_seconds_give_the_frames_whose_times_fall_in_them(root):
    dataset = VideoDataset(root / "segments.jsonl", start_field="start", end_field="end", frames_per_clip=4,
                           clips_per_video=3)
    assert dataset.classes == ["left", "right", "still"] and [dataset.clips.labels.tolist()] == [[0, 1, 2]]
    rows = [json.loads(line) for line in (root / "segments.jsonl").read_text().splitlines()]
    for video, row in enumerate(rows):
        times = probe(dataset.path(video), "x").frame_times()
        inside = np.flatnonzero((times >= row["start"] - 1e-9) & (times < row["end"] - 1e-9))
        clips = [dataset[3 * video + clip]["frames"].numpy() for clip in range(3)]
        assert clips[0][0] == inside[0] and clips[-1][-1] == min(inside[-1], clips[-1][-1])
        assert all(frame in inside for clip in clips for frame in clip)
    vfr = probe(dataset.path(1), "vfr").frame_times()[dataset[3]["frames"].numpy()]
    assert 0.3 - 1e-9 <= vfr.min() and vfr.max() < 1.5  # the variable-rate row, cut by its times


def test_kinetics_trimmed_files_and_whole_videos_cut_by_segment_give_the_same_frames(root):
    trimmed = VideoDataset.kinetics(root / "kinetics/train.csv", root / "kinetics/trimmed", frames_per_clip=8,
                                    clips_per_video=2)
    whole = VideoDataset.kinetics(root / "kinetics/train.csv", root / "kinetics/full", trimmed=False,
                                  frames_per_clip=8, clips_per_video=2)
    assert trimmed.classes == whole.classes == ["left", "right", "still"] and len(trimmed) == len(whole) == 8
    starts = [0, 2, 1, 1]
    for index in range(8):
        cut, full = trimmed[index], whole[index]
        assert torch.equal(full["frames"], cut["frames"] + 25 * starts[index // 2])
        assert cut["label"] == full["label"] and (cut["video"].float() - full["video"].float()).abs().mean() < 12
    assert Path(trimmed.path(0)).name == "vid_aaa_000000_000002.mp4" and KINETICS_TRIMMED.startswith("{label}/")


def test_bad_rows_are_named_by_line_and_skipped_with_a_warning(root, tmp_path):
    manifest = tmp_path / "bad.csv"
    manifest.write_text("video,label,start,end\n"
                        "folder/left/l0_h264.mp4,left,0.2,0.6\n"
                        "../../escape.mp4,left,,\n"
                        "folder/missing.mp4,right,,\n"
                        "folder/left/l0_h264.mp4,left,5,6\n"
                        "folder/left/l0_h264.mp4,,,\n"
                        "folder/left/l0_h264.mp4,left,soon,\n")
    common = {"video_root": root, "start_field": "start", "end_field": "end", "frames_per_clip": 2}
    with pytest.raises(DataError, match=r"bad.csv line 3: path '../../escape.mp4' escapes the dataset root"):
        VideoDataset(manifest, **common)
    dataset, warned = with_skip_warnings(lambda: VideoDataset(manifest, on_error="skip", **common))
    assert len(dataset) == 1 and dataset.places.tolist() == [2]
    expected = ["line 3: path '../../escape.mp4' escapes", "line 6: the label 'label' is missing",
                "line 7: 'start' is not a number of seconds ('soon')", "line 4 (", "line 5 ("]
    for message, words in zip(warned, expected):
        assert f"bad.csv {words}" in message, (message, words)
    assert "cannot read the file" in warned[3] and "the segment [5, 6) s holds no frame" in warned[4]


def test_a_file_name_rule_names_its_missing_column(root, tmp_path):
    manifest = tmp_path / "rule.csv"
    manifest.write_text("id,label\nl0_h264,0\n")
    with pytest.raises(DataError, match=r"rule.csv line 2: cannot fill '\{label\}/\{youtube_id\}.mp4' \(KeyError"):
        VideoDataset(manifest, video_root=root, video_field="{label}/{youtube_id}.mp4")
    dataset = VideoDataset(manifest, video_root=root / "folder", video_field="left/{id}.mp4", label_field=None)
    assert dataset[0]["label"] == -1


def test_names_and_numbers_together_or_an_unknown_suffix_are_refused(root, tmp_path):
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text('{"video": "folder/left/l0_h264.mp4", "label": "left"}\n'
                     '{"video": "folder/left/l1_vp9.webm", "label": 3}\n')
    with pytest.raises(ValueError, match="the labels mix class names and numbers"):
        VideoDataset(mixed, video_root=root)
    with pytest.raises(ValueError, match=r"reads .csv, .jsonl, .parquet manifests, not .txt"):
        VideoDataset(tmp_path / "rows.txt")


def test_workers_give_the_batches_of_the_main_process(root):
    from recipes.video import video_loader

    dataset = VideoDataset(root / "segments.jsonl", start_field="start", end_field="end", frames_per_clip=4,
                           clips_per_video=2)
    alone = list(video_loader(dataset, 2, seed=1, device="cpu", num_workers=0))
    assert_same_batches(list(video_loader(dataset, 2, seed=1, device="cpu", num_workers=2)), alone)
