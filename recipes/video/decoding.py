"""A clip's frames through TorchCodec's public ``VideoDecoder``: only those frames, from decoders kept open.

    pixels = decode_clip("a.mp4", "a.mp4", np.array([0, 2, 4]), info, VideoOptions())   # uint8 [3, 3, H, W]

``get_frames_at`` decodes from the keyframe before each requested frame, never the whole file. A
process keeps the decoders it opened (:class:`DecoderCache`, least recently used closed past
``open_decoders``), so the clips of a video met again, as in an evaluation pass over
``clips_per_video`` clips, skip the open. A stream the index found constant is opened with
``seek_mode="approximate"``: it seeks by time (frame ``i`` at ``begin + i / fps``) without the scan
that ``"exact"`` makes at every open; a variable frame rate keeps ``"exact"``. Frames come out as
the decoder writes them, ``[T, 3, H, W]`` views of ``[T, H, W, 3]`` memory, which torch's uint8
resize reads fastest. The decoded size is checked against ``max_clip_bytes`` before decoding, and
the frames' size against the index after: every failure is a DataError naming the file.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torchcodec.decoders import VideoDecoder
from torchcodec.transforms import Resize

from recipes.core import DataError, storage
from recipes.video.probe import VideoInfo, check_ffmpeg, reason

MAX_CLIP_BYTES = 2**30  # a clip's decoded bytes: 64 frames of 4K (3840 x 2160 x 3) fit, with room
OPEN_DECODERS = 128  # files a process keeps open, well under the usual limit of 1024 descriptors
DECODER_MEMORY = 512 * 2**20  # what a process's open decoders may hold, as estimated below
# An open decoder's memory: FFmpeg's context and buffers, and up to 16 reference frames of 1.5 bytes
# a pixel (H.264's limit), measured at 2.6 MB for 320x240 and 6.8 MB for 1280x720 (one reference)
DECODER_OVERHEAD, DECODER_BYTES_PER_PIXEL = 2 * 2**20, 24
DECODE_CHOICES = ("worker", "device", "auto")
AUTO_DEVICE_PIXELS = 1280 * 720  # "auto" decodes on a CUDA device from this frame size up (docs/video.md)


@dataclass(frozen=True)
class VideoOptions:
    """The rarely changed knobs of how a video dataset indexes and decodes its files.

    Args:
        index_dir: a folder for the index of frame counts and rates, keyed by each file's path,
            size and modification time (:mod:`recipes.core.sources.index_cache`): the next build over the
            same files opens none of them. None: every build probes every file.
        max_clip_bytes: the most a clip may decode to, frames x height x width x 3 (default
            :data:`MAX_CLIP_BYTES`, 1 GiB), checked from the index before decoding; a video whose clip
            is larger is a DataError when the dataset is built. Raise it for long or huge clips.
        decoder_size: ``(height, width)`` the decoder resizes every frame to (TorchCodec's
            ``Resize``, inside FFmpeg), before the transform; None (the default) decodes at the
            file's size. benchmarks/README.md measures when it pays.
        open_decoders: decoders each process keeps open at most (:data:`OPEN_DECODERS`, files).
        decoder_memory: and the most their memory may come to, estimated from each video's frame size
            (:data:`DECODER_MEMORY`, 512 MiB: 130 decoders of 320x240, 10 of 1920x1080). A worker
            that meets a video again, in this epoch's clips or the next epoch's, then skips its open.
        threads: FFmpeg threads per decoder; 1, since the loader's workers are the parallelism.
        decode: where a preset's batches are decoded: ``"worker"`` (the DataLoader's workers),
            ``"device"`` (workers ship each clip's file and frame numbers, and ``DevicePrefetcher``
            decodes them on its device: NVDEC on CUDA) or ``"auto"`` (``"device"`` on a CUDA
            device for videos of 1280x720 and more, else ``"worker"``).
    """

    index_dir: str | os.PathLike | None = None
    max_clip_bytes: int = MAX_CLIP_BYTES
    decoder_size: tuple[int, int] | None = None
    open_decoders: int = OPEN_DECODERS
    decoder_memory: int = DECODER_MEMORY
    threads: int = 1
    decode: str = "worker"

    def __post_init__(self) -> None:
        for name in ("max_clip_bytes", "open_decoders", "decoder_memory", "threads"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"VideoOptions.{name} must be an int >= 1, got {value!r}")
        size = self.decoder_size
        if size is not None and (len(size) != 2 or not all(isinstance(side, int) and side > 0 for side in size)):
            raise ValueError(f"VideoOptions.decoder_size must be (height, width) of positive ints, got {size!r}")
        if self.decode not in DECODE_CHOICES:
            raise ValueError(f"VideoOptions.decode must be one of {DECODE_CHOICES}, got {self.decode!r}")
        if self.index_dir is not None:
            # "" or a URL: refused now, not at the build
            storage.cache_folder(self.index_dir, option="VideoOptions.index_dir")

    def frame_size(self, info: VideoInfo) -> tuple[int, int]:
        """``(height, width)`` of the frames the decoder gives for a video of ``info``."""
        return self.decoder_size if self.decoder_size is not None else (info.height, info.width)

    def check_clip(self, name: str, frames: int, info: VideoInfo) -> None:
        """A DataError naming ``name`` if ``frames`` frames of ``info`` decode to more than ``max_clip_bytes``."""
        height, width = self.frame_size(info)
        size = frames * height * width * 3
        if size > self.max_clip_bytes:
            raise DataError(f"{name}: a clip of {frames} frames of {width}x{height} decodes to {size:,} bytes, over "
                            f"max_clip_bytes={self.max_clip_bytes:,}; raise it (VideoOptions) or resize in the decoder")


class DecoderCache:
    """The decoders one process has open, least recently used closed first past a count or a memory bound.

    Keyed by the file and how it is opened. A forked worker inherits its parent's decoders, whose
    file offsets it would share with the parent: a process keeps only the decoders it opened itself.
    """

    def __init__(self) -> None:
        self.pid: int | None = None
        self.decoders: OrderedDict[tuple[Any, ...], tuple[VideoDecoder, int]] = OrderedDict()
        self.held = 0  # the estimated bytes of the decoders open

    def get(self, key: tuple[Any, ...], cost: int, limits: tuple[int, int],
            make: Callable[[], VideoDecoder]) -> VideoDecoder:
        """The decoder under ``key``, made by ``make()`` if this process has none open; ``cost`` is
        its estimated memory, ``limits`` the most decoders and bytes to keep."""
        if self.pid != os.getpid():
            self.pid, self.decoders, self.held = os.getpid(), OrderedDict(), 0
        entry = self.decoders.get(key)
        if entry is None:
            entry = (make(), cost)
            self.decoders[key] = entry
            self.held += cost
            count, memory = limits
            while len(self.decoders) > 1 and (len(self.decoders) > count or self.held > memory):
                self.held -= self.decoders.popitem(last=False)[1][1]
        self.decoders.move_to_end(key)
        return entry[0]

    def clear(self) -> None:
        """Close every decoder this process holds (its files are released)."""
        self.decoders.clear()
        self.held = 0

    def drop(self, key: tuple[Any, ...]) -> None:
        """Close the decoder under ``key`` (one that failed: it is opened afresh next time)."""
        entry = self.decoders.pop(key, None)
        self.held -= 0 if entry is None else entry[1]


DECODERS = DecoderCache()


def _key(path: str, info: VideoInfo, options: VideoOptions, device: Any) -> tuple[Any, ...]:
    return (path, info.constant, options.decoder_size, options.threads, str(device))


def open_decoder(path: str, name: str, info: VideoInfo, options: VideoOptions, device: Any = None) -> VideoDecoder:
    """The decoder of ``path`` (kept in :data:`DECODERS`) for ``device`` (None: the CPU)."""
    transforms = None if options.decoder_size is None else [Resize(options.decoder_size)]

    def make() -> VideoDecoder:
        try:
            decoder = VideoDecoder(path, seek_mode="approximate" if info.constant else "exact", device=device,
                                   num_ffmpeg_threads=options.threads, transforms=transforms)
            if info.constant and decoder.metadata.num_frames != info.frames:  # its own count disagrees: scan
                decoder = VideoDecoder(path, device=device, num_ffmpeg_threads=options.threads, transforms=transforms)
        except (RuntimeError, ValueError) as error:
            check_ffmpeg(error)
            raise DataError(f"{name}: cannot open the video ({reason(error)})") from None
        return decoder

    cost = DECODER_OVERHEAD + DECODER_BYTES_PER_PIXEL * info.height * info.width
    return DECODERS.get(_key(path, info, options, device), cost, (options.open_decoders, options.decoder_memory), make)


def decode_clip(path: str, name: str, frames: np.ndarray, info: VideoInfo, options: VideoOptions,
                device: Any = None) -> torch.Tensor:
    """Frames ``frames`` (int64, any order, repeats allowed) of ``path``: uint8 ``[T, 3, H, W]`` on ``device``.

    Raises:
        DataError: naming ``name``: over ``max_clip_bytes``, a file that does not open or decode now,
            or frames of another size than the index says (the file changed since it was indexed).
    """
    options.check_clip(name, len(frames), info)
    decoder = open_decoder(path, name, info, options, device)
    wanted, inverse = np.unique(frames, return_inverse=True)  # each frame decoded once, in stream order
    try:
        pixels = decoder.get_frames_at(wanted.tolist()).data
    except (RuntimeError, ValueError, IndexError) as error:
        DECODERS.drop(_key(path, info, options, device))
        raise DataError(f"{name}: cannot decode frames {wanted[0]}-{wanted[-1]} of {info.frames} "
                        f"({reason(error)})") from None
    height, width = options.frame_size(info)
    if tuple(pixels.shape) != (len(wanted), 3, height, width):
        raise DataError(f"{name}: decoded {len(pixels)} frames of {pixels.shape[-1]}x{pixels.shape[-2]}, "
                        f"the index says {width}x{height}: the file changed since it was indexed")
    if len(wanted) == len(frames) and np.array_equal(wanted, frames):
        return pixels
    return pixels[torch.from_numpy(inverse.reshape(-1))]
