"""``recipes check video PATH``: every video of a folder or a manifest indexed, and decoded at three places.

    report = check_videos(Path("ucf101/train"), Report("video", "ucf101/train"))   # the CLI's Report

The dataset is built as the loaders build it, with ``on_error="skip"``: what its index refuses (a
missing or empty file, one that is not a video, has no video stream or a codec FFmpeg cannot
decode, a truncated file, a header claiming absurd sizes or frame counts, a row that does not
parse, a path that leaves the root) becomes a problem named by file and line. Each video it keeps
is then decoded at its first, middle and last frames through the loaders' own
:func:`recipes.video.decoding.decode_clip` (a seek to each): a file that passes here loads in
training. The summary gives the video count, hours, codecs, frame sizes and rates, and how many
have a variable frame rate, a rotation, or fewer frames than a 16-frame clip; ``--json`` lists
each video's index entry. ``report`` is the CLI's ``Report`` (its ``summary``, ``files`` and
``add_error`` are what is used here).
"""

from __future__ import annotations

import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from recipes.core import DataError, SkippedSampleWarning
from recipes.video.decoding import decode_clip
from recipes.video.folder import VideoFolderDataset
from recipes.video.manifest import VideoDataset

CLIP_FRAMES = 16  # what "short" counts against: the presets' usual clip
SHOWN = 5  # the most common frame sizes and rates listed in the summary


def check_videos(path: Path, report: Any) -> Any:
    """Fill ``report`` with what is wrong with the videos at ``path`` (a folder of class folders or
    a manifest) and a summary of the rest; returns ``report``."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if path.is_dir():
            dataset: Any = VideoFolderDataset(path, frames_per_clip=1, on_error="skip")
        else:
            dataset = VideoDataset(path, frames_per_clip=1, on_error="skip")
    def add(message: str) -> None:  # a manifest's problems are its lines; a folder's its files
        report.add_error(message, dataset.name if isinstance(dataset, VideoDataset) else message.partition(": ")[0])

    for warning in caught:
        if issubclass(warning.category, SkippedSampleWarning):
            add(str(warning.message).removeprefix("skipped: "))
        else:
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    clips = dataset.clips
    for video in range(clips.videos):
        info = clips.info(video)
        frames = np.unique(np.array([0, info.frames // 2, info.frames - 1], dtype=np.int64))
        try:
            decode_clip(clips.paths[video], clips.names[video], frames, info, dataset.options)
        except DataError as error:
            add(str(error))
        report.files.append({"path": clips.paths[video], "frames": info.frames, "fps": round(info.fps, 3),
                             "width": info.width, "height": info.height, "codec": info.codec,
                             "constant_rate": info.constant, "rotation": info.rotation})
    index = clips.index
    seconds = float(sum(frames / fps for frames, fps in zip(index.frames.tolist(), index.fps.tolist())))
    sizes = Counter(f"{width}x{height}" for width, height in zip(index.width.tolist(), index.height.tolist()))
    rates = Counter(f"{fps:g}" for fps in np.round(index.fps, 3).tolist())
    report.summary.update({
        "videos": clips.videos,
        "classes": len(dataset.classes) if dataset.classes else None,
        "hours": round(seconds / 3600, 3),
        "codecs": dict(Counter(clips.index.codecs).most_common()),
        "frame sizes": dict(sizes.most_common(SHOWN)),
        "frame rates": dict(rates.most_common(SHOWN)),
        "variable frame rate": int((~index.constant).sum()),
        "rotated": int((index.rotation != 0).sum()),
        f"shorter than {CLIP_FRAMES} frames": int((index.frames < CLIP_FRAMES).sum()),
    })
    return report
