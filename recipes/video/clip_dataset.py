"""What both video datasets are once their videos are found: clips, hooks and the seams to override.

    class MyVideos(ClipDataset):
        def __init__(self, rows):
            self.options, self.classes, self.transform = VideoOptions(), None, None
            self.clips = ClipTable(paths, paths, labels, ClipSampling(16), self.options, None, on_error="raise")

``VideoFolderDataset`` and ``VideoDataset`` differ only in how they find their videos, labels and
segments (a folder walk, manifest rows); each builds ``self.clips`` (a
:class:`recipes.video.clips.ClipTable`), ``self.options``, ``self.classes`` and ``self.transform``,
and this class gives the rest: items (:meth:`load_clip` and :meth:`load_target` are the seams a
subclass overrides) and the core's hooks (``describe``, ``batch_contract``). ``video_loader``
reads ``clips`` and ``options`` to draw the clips and pick where they decode;
:class:`DeviceClips` is the view for ``decode="device"``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from recipes.core import imaging
from recipes.video.clips import ClipTable, read_item
from recipes.video.decoding import VideoOptions, decode_clip
from recipes.video.device import encoded_item


class ClipDataset(Dataset):
    """Clips of the videos in ``self.clips``; see the module docstring. Not built directly."""

    clips: ClipTable
    options: VideoOptions
    classes: list[str] | None
    transform: Callable[[Any], Any] | None = None  # what each decoded clip goes through

    def __len__(self) -> int:
        return len(self.clips)

    def path(self, video: int) -> str:
        """The file of video ``video`` (item ``i``'s video is ``i // clips_per_video``)."""
        return self.clips.paths[video]

    def describe(self, index: int) -> str:
        """Where item ``index`` comes from, for messages: its file (and manifest line), and its clip
        when a video gives several."""
        return self.clips.describe(index)

    def batch_contract(self) -> dict[str, Any]:
        """What a mixed dataset must share with this one (recipes.core.loading.mixing)."""
        return {"collate": "video_collate", "classes": self.classes,
                "frames_per_clip": self.clips.sampling.frames_per_clip}

    @property
    def targets(self) -> list[int]:
        """The label of every item (each video's, once per clip; built on access)."""
        return np.repeat(self.clips.labels, self.clips.sampling.clips_per_video).tolist()

    def load_clip(self, video: int, frames: np.ndarray) -> torch.Tensor:
        """Frames ``frames`` of video ``video``, uint8 ``[T, 3, H, W]``, before the transform.
        Override it to read clips another way; a DataError it raises follows ``on_error``."""
        return decode_clip(self.path(video), self.clips.names[video], frames, self.clips.info(video), self.options)

    def load_target(self, video: int) -> Any:
        """Video ``video``'s target: its label (a class index). Override it for another target."""
        return int(self.clips.labels[video])

    def __getitem__(self, index: int) -> dict[str, Any] | None:
        return read_item(self, self.clips, index)


class DeviceClips(imaging.DeviceView):
    """``decode="device"``'s view of a :class:`ClipDataset`: each item's ``"video"`` is a
    :class:`recipes.video.device.EncodedClip` (the file, the frames and the transform's seed, drawn as
    ``dataset[i]`` draws them); with ``load_clip`` overridden it is ``dataset[i]`` itself (only a worker runs it).

    Raises:
        ValueError: ``dataset`` is not a ClipDataset (``VideoFolderDataset``, ``VideoDataset``).
    """

    reads = ClipDataset

    def __init__(self, dataset: ClipDataset) -> None:
        super().__init__(dataset)
        self.in_worker = type(dataset).load_clip is not ClipDataset.load_clip

    def __getitem__(self, index: int) -> dict[str, Any] | None:
        dataset = self.dataset
        if self.in_worker:
            return dataset[index]
        return encoded_item(dataset, dataset.clips, index, dataset.path(dataset.clips.locate(index)[0]))
