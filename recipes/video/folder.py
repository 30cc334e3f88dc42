"""Action recognition from a folder per class (UCF-101, HMDB-51, Kinetics as folders): clips of each video.

    dataset = VideoFolderDataset("ucf101/train", frames_per_clip=16, transform=train_transform(112))
    loader = video_loader(dataset, batch_size=32, device="cuda", seed=0, stateful=True)
    for batch in DevicePrefetcher(loader, "cuda"):      # batch["video"]: float [B, T, 3, 112, 112]
        loss = criterion(model(batch["video"]), batch["label"])

``root/<class>/**/<file>`` gives the classes, their order and the videos' order of
``torchvision.datasets.ImageFolder`` (same walk, case-insensitive extensions, nested folders),
with video extensions. Each file is probed once at construction (header and packets, no frame
decoded; :mod:`recipes.video.index`), and each item decodes only its clip's frames.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from recipes.core import check_on_error, storage
from recipes.video.clip_dataset import ClipDataset
from recipes.video.clips import ClipTable
from recipes.video.decoding import VideoOptions
from recipes.video.sampling import ClipSampling

VIDEO_EXTENSIONS = (".mp4", ".m4v", ".mov", ".mkv", ".webm", ".avi")


class VideoFolderDataset(ClipDataset):
    """``root/<class>/**/<video>`` -> ``{"video": Video uint8 [T, 3, H, W], "label", "index", "clip", "frames"}``.

    Args:
        root: the folder holding one sub-folder per class (``~`` is expanded).
        frames_per_clip, frame_step, clips_per_video, short: how clips are cut
            (:class:`recipes.video.sampling.ClipSampling`); ``len(dataset)`` is videos x ``clips_per_video``.
        transform: applied to the whole clip, a ``tv_tensors.Video`` (v2 transforms draw one set of
            parameters for all its frames); it must keep the clip uint8 (normalise on the device).
        on_error: ``"raise"`` (a DataError naming the file) or ``"skip"`` (warn, drop). A file that
            cannot be used is found at construction and left out there under ``"skip"``.
        options: :class:`recipes.video.decoding.VideoOptions` (index cache, clip size limit,
            decoder-side resize, open decoders, ``decode="device"``).
        extensions: file endings to include, case-insensitive (default :data:`VIDEO_EXTENSIONS`).
        allow_empty: accept class folders without any video.

    Item ``i`` is clip ``i % clips_per_video`` of video ``i // clips_per_video``: evenly spaced
    clips, or, in a training loader of :func:`recipes.video.video_loader`, a clip drawn per
    ``(seed, epoch, index)``. ``frames`` holds the decoded frames' numbers in the file.
    """

    def __init__(
        self,
        root: str | os.PathLike,
        *,
        frames_per_clip: int = 16,
        frame_step: int = 1,
        clips_per_video: int = 1,
        transform: Callable[[Any], Any] | None = None,
        on_error: str = "raise",
        short: str = "repeat_last",
        options: VideoOptions | None = None,
        extensions: str | Sequence[str] | None = None,
        allow_empty: bool = False,
    ) -> None:
        self.root = os.path.expanduser(os.fspath(root))
        self.on_error = check_on_error(on_error)
        self.options = VideoOptions() if options is None else options
        self.extensions = VIDEO_EXTENSIONS if extensions is None else extensions
        self.classes, relative, labels = storage.class_folder_files(self.root, self.extensions, allow_empty,
                                                                    kind="video", example="archery/v_001.mp4")
        self.class_to_idx = {name: index for index, name in enumerate(self.classes)}
        prefix = os.path.join(self.root, "")
        paths = [prefix + name for name in relative]
        sampling = ClipSampling(frames_per_clip, frame_step, clips_per_video, short)
        self.transform = transform
        self.clips = ClipTable(paths, paths, np.asarray(labels, dtype=np.int64), sampling, self.options, None,
                               on_error=self.on_error, root=self.root)

    def state_source(self) -> str:
        """What a loader state names as this data: counts and digests, not the root (a moved folder resumes)."""
        return f"{len(self.classes)} classes, {self.clips.state_words()}"

    @property
    def samples(self) -> list[tuple[str, int]]:
        """ImageFolder's ``samples``: ``(path, class_index)`` per video, in order (built on access)."""
        return list(zip(self.clips.paths, self.clips.labels.tolist()))

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.root!r}, {self.clips.videos} videos, {len(self.classes)} classes, "
                f"{self.clips.sampling}, transform={self.transform!r})")
