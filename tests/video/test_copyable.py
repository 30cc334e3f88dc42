"""The video folder is the unit to copy: `recipes copy` makes a package that runs on its own files."""

from pathlib import Path

import recipes
from tests.harness import assert_domain_imports, copy_and_run

FOLDER = Path(recipes.__file__).resolve().parent / "video"


def test_every_file_imports_only_the_core_and_its_own_folder():
    paths = sorted(FOLDER.glob("*.py"))
    assert len(paths) >= 10
    for path in paths:
        assert_domain_imports(path)


def test_the_copied_folder_builds_the_datasets_and_collates_from_its_own_files(tmp_path, fixtures):
    script = f"""
from pathlib import Path
import torch
from torchcodec.decoders import VideoDecoder
from video import VideoDataset, VideoFolderDataset, video_collate, video_loader
from video.demo import build

F = Path({str(fixtures)!r}) / "video"
folder = VideoFolderDataset(F / "folder", frames_per_clip=4, clips_per_video=2)
item = folder[1]
assert torch.equal(item["video"], VideoDecoder(folder.path(0)).get_frames_at(item["frames"].tolist()).data)
segments = VideoDataset(F / "segments.jsonl", start_field="start", end_field="end", frames_per_clip=4)
batch = video_collate([segments[0], segments[2]])
assert batch["video"].shape == (2, 4, 3, 48, 64) and batch["label"].tolist() == [0, 2], batch["label"]
_, loader = build(F.parent)
batch = next(iter(loader))
assert batch["video"].shape == (4, 8, 3, 32, 32) and batch["label"].shape == (4,), batch["video"].shape
"""
    report = copy_and_run("video", tmp_path, script)
    assert f"-> {tmp_path / 'video'}" in report["printed"] and "it needs recipes.core: " in report["printed"]
    print(f"copy: {report['files']} files, {report['lines']} lines; "
          f"recipes.core imported: {report['core_modules']} modules, {report['core_lines']} lines")
