"""``decode="device"`` for clips: workers ship each clip's file and frame numbers, the device decodes them.

    dataset = VideoFolderDataset(root, transform=eval_transform(112), options=VideoOptions(decode="device"))
    for batch in DevicePrefetcher(video_loader(dataset, 16, device="cuda", seed=0), "cuda"):
        ...                                        # decoded by NVDEC, transformed and normalised on the GPU

A worker of a ``decode="device"`` loader decodes nothing: per clip it draws the frames and the
transform's seed as the worker path does and ships an :class:`EncodedClip` (the file, the frame
numbers, what the index knows of the stream, the transform). ``video_collate`` packs them into a
:class:`recipes.video.collate.ClipBatch`, which ``DevicePrefetcher`` decodes where the batch goes
(:class:`recipes.core.contracts.protocols.DecodesOnDevice`): TorchCodec's ``VideoDecoder`` on that device
(NVDEC on CUDA), kept open per process as the workers keep theirs, the transform run on the
decoded clip under the shipped seed. On the CPU the batches equal ``decode="worker"``'s bit for
bit. The main process reads the files: local files, whose index the workers' checks already
passed; a clip that still fails there is a DataError naming its file, whatever ``on_error`` says.
``"auto"`` picks ``"device"`` on CUDA from a median frame of 1280x720 up (docs/video.md, the crossover).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from recipes.core import DataError, resolve_device, skip_or_raise
from recipes.video.clips import ClipTable, transform_seed, transformed
from recipes.video.decoding import AUTO_DEVICE_PIXELS, VideoOptions, decode_clip
from recipes.video.probe import VideoInfo


@dataclass(frozen=True, eq=False)
class EncodedClip:
    """One clip still to decode: ``frames`` (int64) of the file ``path`` (``name`` in messages),
    decoded as ``options`` say, then ``transform`` under ``seed``."""

    path: str
    name: str
    frames: np.ndarray
    info: VideoInfo
    options: VideoOptions
    transform: Callable[[Any], Any] | None
    seed: int | None

    def decode(self, device: Any) -> torch.Tensor:
        """The clip, uint8 ``[T, 3, H, W]`` on ``device`` (a ``tv_tensors.Video``), transformed."""
        pixels = decode_clip(self.path, self.name, self.frames, self.info, self.options, device)
        return transformed(pixels, self.transform, self.seed, lambda: self.name)


def encoded_item(dataset: Any, table: ClipTable, index: int, path: str) -> dict[str, Any] | None:
    """``dataset[index]`` (its clips in ``table``, its video's file ``path``) with ``"video"`` an
    :class:`EncodedClip`: the frames and the transform's seed drawn as ``dataset[index]`` draws them."""
    video, clip = table.locate(index)
    try:
        frames = table.frames(video, clip)
        label = dataset.load_target(video)
    except DataError as error:
        return skip_or_raise(error, table.on_error)
    encoded = EncodedClip(path, table.describe(index), frames, table.info(video), table.options, dataset.transform,
                          transform_seed(dataset.transform))
    return {"video": encoded, "label": label, "index": int(index), "clip": clip, "frames": torch.from_numpy(frames)}


def decode_path(decode: str, device: Any, table: ClipTable) -> str:
    """``"worker"`` or ``"device"``: ``decode`` (``VideoOptions.decode``) for a loader on ``device``,
    ``"auto"`` settled by the table's median frame size."""
    if decode != "auto":
        return decode
    if device == "debug" or resolve_device(device).type != "cuda" or not table.videos:
        return "worker"
    pixels = float(np.median(table.index.height * table.index.width))
    return "device" if pixels >= AUTO_DEVICE_PIXELS else "worker"
