"""The domain as the command line runs it: ``recipes demo video`` (the fixture video folder through
the training preset) and the folder or manifest ``recipes bench/show video PATH`` open.

    from recipes.video.demo import build
    dataset, loader = build(fixtures_dir())
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch.utils.data import DataLoader, Dataset

from recipes.core import storage
from recipes.video import VideoDataset, VideoFolderDataset, eval_transform, train_transform, video_loader


def build(fixtures: Path) -> tuple[VideoFolderDataset, DataLoader]:
    """A VideoFolderDataset over ``video/folder/`` (3 classes, 9 videos: H.264, VP9, AV1, MPEG-4 and
    MJPEG, a variable frame rate, a rotated and a short one, a nested folder and an ignored text
    file) with 8-frame clips and random 32-pixel crops, and a seeded CPU loader of batches of 4
    (training drops the last video)."""
    dataset = VideoFolderDataset(fixtures / "video" / "folder", frames_per_clip=8, transform=train_transform(32))
    return dataset, video_loader(dataset, 4, device="cpu", seed=0, num_workers=0)


def open_path(options: Any, *, train: bool) -> Dataset:
    """What ``options.path`` (the CLI's ``DataOptions``) holds, 16-frame clips of ``options.size``
    pixels (a random crop and flip when ``train``, else the centre): a folder of class folders as a
    VideoFolderDataset, or a manifest (.csv / .jsonl / .parquet of ``video`` and ``label``, the
    videos relative to its folder) as a VideoDataset."""
    transform = train_transform(options.size) if train else eval_transform(options.size)
    if options.path.is_dir():
        return VideoFolderDataset(options.path, transform=transform, on_error=options.on_error)
    return VideoDataset(options.path, transform=transform, on_error=options.on_error)


def prepare_path(source: Path, dest: Path, *, short_side: int | None = None, frames_per_clip: int = 16,
                 frame_step: int = 1, keyframe_every: int | None = None, fps: float | None = None, crf: int = 23,
                 **run: Any) -> tuple[Any, str]:
    """``recipes prepare video FOLDER DEST``: :func:`recipes.video.prepare`, and how to read what it wrote."""
    from recipes.video.prepare_videos import prepare

    run.pop("samples_per_shard", None)  # a file a video
    summary = prepare(source, dest, short_side=short_side, frames_per_clip=frames_per_clip, frame_step=frame_step,
                      keyframe_every=keyframe_every, fps=fps, crf=crf, **run)
    videos = str(storage.join(dest, "videos"))
    return summary, f"recipes.video.VideoFolderDataset({videos!r}, frames_per_clip={frames_per_clip})"
