"""The clips of a video dataset: which files are kept, which frames an item decodes, and the item itself.

    table = ClipTable(paths, names, labels, ClipSampling(16), VideoOptions(), None, on_error="raise")
    len(table)                       # videos x clips_per_video
    table.frames(*table.locate(12))  # int64 [16]: the frames item 12 decodes

Both datasets (``VideoFolderDataset``, ``VideoDataset``) keep one. Building it builds the index
(:class:`recipes.video.index.VideoIndex`) and applies the bad-input rules file by file, raising or
(``on_error="skip"``) leaving out with a warning: a file that cannot be used, a segment that holds
no frame, a video shorter than a clip under ``short="raise"`` (``"skip"`` leaves it out whatever
``on_error`` says), a clip that would decode past ``max_clip_bytes``. Item ``i`` is clip
``i % clips_per_video`` of video ``i // clips_per_video``: the clips of a video are neighbours,
so an evaluation pass meets each video's clips one after another and decodes them with one
decoder. A segment ``[start, end)`` in seconds becomes the frames whose times fall in it.

An item's transform runs under a seed drawn from torch's generator right after the clip's start:
``decode="device"`` ships that seed, so the device applies the transform's same draws.
"""

from __future__ import annotations

import copy
import warnings
from contextlib import nullcontext
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torchvision import tv_tensors

from recipes.core import (
    DataError,
    SkippedSampleWarning,
    UserCode,
    arrays,
    checks,
    describe_sample,
    seeded,
    skip_or_raise,
)
from recipes.video.decoding import VideoOptions
from recipes.video.index import VideoIndex, listed_videos
from recipes.video.probe import VideoInfo
from recipes.video.sampling import ClipSampling

TIME_TOLERANCE = 1e-6  # seconds: a frame at exactly a segment's start belongs to it despite rounding
SEED_RANGE = 2**62  # a transform's seed is drawn below this


class ClipTable:
    """The kept videos (paths, names, labels, frame ranges, index) and their clips; see the module docstring.

    Args:
        paths: each video's local file.
        names: each video as messages name it (its path, or a manifest line and path).
        labels: each video's label, int64.
        sampling: how clips are cut.
        options: how files are indexed and decoded.
        segments: float64 ``[N, 2]`` of ``[start, end)`` seconds per video, NaN for the whole
            video; None: whole videos.
        on_error: ``"raise"`` or ``"skip"``.
        root: the folder the videos are under: where ``recipes prepare video`` wrote them, its
            ``manifest.json`` gives their frame counts (:func:`recipes.video.index.listed_videos`).
    """

    def __init__(self, paths: Sequence[str], names: Sequence[str], labels: np.ndarray, sampling: ClipSampling,
                 options: VideoOptions, segments: np.ndarray | None, *, on_error: str, root: str | None = None) -> None:
        self.sampling, self.options, self.on_error = sampling, options, on_error
        self.random = False  # evenly spaced clips; the presets' training loaders draw them (with_random)
        index = VideoIndex.build(paths, names, options.index_dir, listed_videos(root))
        kept, ranges = [], []
        for row, name in enumerate(names):
            try:
                first, count = self._frame_range(index, row, name, None if segments is None else segments[row])
            except DataError as error:
                skip_or_raise(error, on_error)
                continue
            if count < sampling.span and sampling.short == "skip":
                warnings.warn(f"skipped: {name}: {count} frames, shorter than a clip of {sampling.span} (short='skip')",
                              SkippedSampleWarning, stacklevel=3)
                continue
            kept.append(row)
            ranges.append((first, count))
        rows = np.asarray(kept, dtype=np.int64)
        self.rows = rows  # which of the caller's videos are kept, in order
        self.index = index.subset(rows)
        self.paths = arrays.StringArray([paths[row] for row in kept])
        self.names = self.paths if names is paths else arrays.StringArray([names[row] for row in kept])  # held once
        self.labels = np.asarray(labels, dtype=np.int64)[rows]
        bounds = np.asarray(ranges, dtype=np.int64).reshape(-1, 2)
        self.first, self.count = bounds[:, 0].copy(), bounds[:, 1].copy()

    def _frame_range(self, index: VideoIndex, row: int, name: str, segment: np.ndarray | None) -> tuple[int, int]:
        """``(first frame, frames)`` of video ``row``'s segment (the whole video without one), checked."""
        if row in index.errors:
            raise DataError(index.errors[row])
        info = index.info(row)
        first, count = 0, info.frames
        if segment is not None and not np.isnan(segment).all():
            start = -np.inf if np.isnan(segment[0]) else segment[0]
            end = np.inf if np.isnan(segment[1]) else segment[1]
            times = info.frame_times()
            first, stop = np.searchsorted(times, [start - TIME_TOLERANCE, end - TIME_TOLERANCE]).tolist()
            count = stop - first
            if count <= 0:
                last = times[-1]
                raise DataError(f"{name}: the segment [{start:g}, {end:g}) s holds no frame (frames at "
                                f"{times[0]:.3f}-{last:.3f} s)")
        if count < self.sampling.span and self.sampling.short == "raise":
            raise DataError(f"{name}: {count} frames, shorter than a clip of {self.sampling.span} (short='raise'); "
                            "pass short='repeat_last', 'wrap' or 'skip'")
        self.options.check_clip(name, self.sampling.frames_per_clip, info)
        return int(first), int(count)

    def __len__(self) -> int:
        return len(self.labels) * self.sampling.clips_per_video

    @property
    def videos(self) -> int:
        """Videos kept."""
        return len(self.labels)

    def with_random(self, random: bool) -> ClipTable:
        """This table, drawing clips at random (training) or taking them evenly spaced; shares the arrays."""
        if random == self.random:
            return self
        table = copy.copy(self)
        table.random = random
        return table

    def locate(self, index: int) -> tuple[int, int]:
        """``(video, clip)`` of item ``index``."""
        if not 0 <= index < len(self):
            raise IndexError(f"index {index} is out of range for {len(self)} clips")
        return divmod(int(index), self.sampling.clips_per_video)

    def info(self, video: int) -> VideoInfo:
        """What the index knows of video ``video``."""
        return self.index.info(video)

    def frames(self, video: int, clip: int) -> np.ndarray:
        """The frame numbers, int64 ``[T]``, that clip ``clip`` of video ``video`` decodes: drawn
        from torch's generator when ``random``, else evenly spaced."""
        positions = self.sampling.positions(int(self.count[video]), clip, self.random)
        return positions + self.first[video]

    def describe(self, index: int) -> str:
        """Item ``index`` for messages: its video's name, and which clip when a video gives several."""
        video, clip = self.locate(index)
        clips = self.sampling.clips_per_video
        return self.names[video] + (f", clip {clip} of {clips}" if clips > 1 else "")

    def state_words(self) -> str:
        """What a loader state names as these clips: counts and digests of the names and frame counts."""
        return (f"{len(self)} clips of {self.videos} videos, names {checks.sampled_digest(self.names)}, "
                f"frames {checks.sampled_digest(self.count)}, {self.sampling}")


def transform_seed(transform: Callable[[Any], Any] | None) -> int | None:
    """The seed an item's ``transform`` runs under, drawn from torch's generator (None without one)."""
    return None if transform is None else int(torch.randint(0, SEED_RANGE, ()))


def transformed(pixels: torch.Tensor, transform: Callable[[Any], Any] | None, seed: int | None,
                where: Callable[[], str]) -> torch.Tensor:
    """``pixels`` as a ``tv_tensors.Video``, through ``transform`` under ``seed``: v2 transforms then
    draw one set of parameters for the whole clip. A failing transform is a SampleError naming ``where()``."""
    video = pixels.as_subclass(tv_tensors.Video)  # what tv_tensors.Video() does, minus its checks
    if transform is None:
        return video
    with UserCode(where), (nullcontext() if seed is None else seeded(seed)):
        out = transform(video)
    return out if isinstance(out, tv_tensors.Video) or not isinstance(out, torch.Tensor) else tv_tensors.Video(out)


def read_item(dataset: Any, table: ClipTable, index: int) -> dict[str, Any] | None:
    """Item ``index`` of ``dataset`` (whose clips ``table`` holds): the clip's frames from the
    dataset's ``load_clip(video, frames)``, its target from ``load_target(video)``, then its
    ``transform`` (an error in it names the item); None for a sample skipped under ``on_error="skip"``."""
    video, clip = table.locate(index)
    try:
        frames = table.frames(video, clip)
        pixels = dataset.load_clip(video, frames)
        label = dataset.load_target(video)
    except DataError as error:
        return skip_or_raise(error, table.on_error)
    video_clip = transformed(pixels, dataset.transform, transform_seed(dataset.transform),
                             lambda: describe_sample(dataset, index))
    return {"video": video_clip, "label": label, "index": int(index), "clip": int(clip),
            "frames": torch.from_numpy(frames)}


def copy_with(dataset: Any, clips: ClipTable) -> Any:
    """A shallow copy of ``dataset`` whose clip table is ``clips`` (the rest shared)."""
    copied = copy.copy(dataset)
    copied.clips = clips
    return copied
