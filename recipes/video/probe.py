"""What a video file holds, read once at index time without decoding a frame: :func:`probe`.

    info = probe("clips/a.mp4", "clips/a.mp4")   # VideoInfo(frames=300, fps=30.0, height=240, width=320, ...)

TorchCodec's ``Demuxer`` reads the header (codec, frame size with the rotation applied, the frame
count it claims), which is checked against the limits first; then its stream is scanned, packets
only, for the exact frame count and each frame's time. A stream whose frames all sit at
``begin + i / fps`` is *constant*: its decoder can seek by time without scanning the file again
(``seek_mode="approximate"``), which spares a scan at every open. Others (a variable frame rate)
keep their frame times, from which segments in seconds become frame numbers.

Every problem is a :class:`recipes.core.DataError` naming the file: an empty or truncated
file, one that is not a video or has no video stream, a codec FFmpeg cannot decode, a frame size
or frame count in the header past :data:`MAX_FRAME_PIXELS` / :data:`MAX_FRAMES` (refused before
the scan, which would allocate by the claimed count).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np
from torchcodec.decoders import Demuxer, get_container_metadata

from recipes.core import DataError

MAX_FRAME_PIXELS = 8192 * 8192  # above 8K UHD (7680 x 4320); a header past it is broken or hostile
MAX_FRAMES = 2**24  # 77 hours at 60 fps
MAX_FPS = 1000.0  # high-speed cameras aside, a larger rate is a broken header
# A scan may find a few frames fewer than the header counts (edit lists, a dropped last packet);
# past this many (and this share) the file was cut short.
MISSING_FRAMES, MISSING_SHARE = 2, 0.01
CONSTANT_TOLERANCE = 0.25  # of a frame's duration: how far a frame may sit from begin + i / fps
RATE_TOLERANCE = 1e-3  # how far the frames' own rate may be from the header's for a constant stream
FFMPEG_MISSING = (
    "TorchCodec's video decoder needs FFmpeg's shared libraries (major versions 4 to 9), which pip does not "
    "install: apt-get install ffmpeg (Debian, Ubuntu), brew install ffmpeg, or conda install -c conda-forge ffmpeg"
)
# the first bytes of containers, to say what a file that does not open was meant to be
SIGNATURES = ((4, b"ftyp", "an MP4/MOV file"), (0, b"\x1a\x45\xdf\xa3", "a Matroska/WebM file"),
              (0, b"RIFF", "an AVI file"))


@dataclass(frozen=True)
class VideoInfo:
    """One video stream as its file says: ``frames`` (counted from its packets), ``fps`` (the
    average rate), ``height`` and ``width`` of a decoded frame (rotation applied), ``begin`` (the
    first frame's time in seconds), ``constant`` (every frame at ``begin + i / fps``), ``codec``,
    ``rotation`` (degrees, as the container's display matrix says) and ``times`` (each frame's
    seconds, kept only when not ``constant``)."""

    frames: int
    fps: float
    height: int
    width: int
    begin: float
    constant: bool
    codec: str
    rotation: float = 0.0
    times: np.ndarray | None = None

    def frame_times(self) -> np.ndarray:
        """Each frame's time in seconds, float64 [frames]."""
        if self.times is not None:
            return self.times
        return self.begin + np.arange(self.frames, dtype=np.float64) / self.fps


def reason(error: BaseException) -> str:
    """FFmpeg's or TorchCodec's reason, without the C++ source location in front of it."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    parts = text.split(", ")
    if len(parts) > 2 and ":" in parts[1] and "/" in parts[1]:  # "Demuxer, /path/File.cpp:93, why"
        text = ", ".join(parts[2:])
    return text


def check_ffmpeg(error: BaseException) -> None:
    """Raise :data:`FFMPEG_MISSING` as an ImportError when ``error`` is TorchCodec failing to load
    FFmpeg: then no file is at fault, and skipping files would drop them all."""
    if "libtorchcodec" in str(error):
        raise ImportError(FFMPEG_MISSING) from error


def probe(path: str, name: str) -> VideoInfo:
    """The video stream of the local file ``path``, checked; ``name`` is the file as messages show it.

    Raises:
        DataError: naming ``name`` and what is wrong (see the module docstring).
    """
    try:
        size = os.path.getsize(path)
    except OSError as error:
        raise DataError(f"{name}: cannot read the file ({error.strerror})") from None
    if size == 0:
        raise DataError(f"{name}: empty file (0 bytes)")
    try:
        stream = Demuxer(path).streams[0]
    except (RuntimeError, ValueError) as error:
        check_ffmpeg(error)
        raise DataError(f"{name}: {_unopened(path, error)}") from None
    header = stream.metadata
    _check_header(name, header)
    try:
        scan = stream.scan()
    except (RuntimeError, ValueError, MemoryError) as error:
        raise DataError(f"{name}: cannot read its packets ({reason(error)})") from None
    return _from_scan(name, header, scan)


def _unopened(path: str, error: BaseException) -> str:
    """Why a file does not open as a video, in words: no video stream, a cut or damaged container, or not a video."""
    if isinstance(error, ValueError) and "video stream" in str(error):
        try:
            kinds = [f"{stream.media_type} {getattr(stream, 'codec', '')}".strip()
                     for stream in get_container_metadata(path).streams]
        except (RuntimeError, ValueError):
            kinds = []
        return f"no video stream (it holds: {', '.join(kinds) or 'no stream'})"
    why = reason(error).replace(f"Could not open input file: {path} ", "")
    with open(path, "rb") as file:
        head = file.read(16)
    for offset, signature, kind in SIGNATURES:
        if head[offset : offset + len(signature)] == signature:
            return f"{kind} that does not open: truncated or damaged ({why})"
    return f"not a video ({why})"


def _check_header(name: str, header: Any) -> None:
    """The header's claims against the limits, before anything is allocated by them."""
    codec = header.codec
    if not codec or codec == "none":
        raise DataError(f"{name}: unsupported codec: FFmpeg knows no decoder for this video stream "
                        "(re-encode it, e.g. to H.264)")
    height, width = header.height, header.width
    if not height or not width or height < 0 or width < 0:
        raise DataError(f"{name}: the header gives no frame size ({width}x{height})")
    if height * width > MAX_FRAME_PIXELS:
        raise DataError(f"{name}: the header claims {width}x{height} frames, over {MAX_FRAME_PIXELS:,} pixels "
                        "a frame (8192x8192): a broken or hostile header")
    claimed = header.num_frames_from_header
    if claimed is not None and claimed > MAX_FRAMES:
        raise DataError(f"{name}: the header claims {claimed:,} frames, over {MAX_FRAMES:,} "
                        "(77 hours at 60 fps): a broken or hostile header")


def _from_scan(name: str, header: Any, scan: Any) -> VideoInfo:
    """The stream as its packets give it, checked against what its header claimed."""
    frames = int(scan.num_frames_from_content or 0)
    if frames == 0:
        raise DataError(f"{name}: the video stream holds no frame")
    if frames > MAX_FRAMES:
        raise DataError(f"{name}: {frames:,} frames, over {MAX_FRAMES:,}")
    claimed = header.num_frames_from_header
    if claimed is not None and frames < claimed - max(MISSING_FRAMES, MISSING_SHARE * claimed):
        raise DataError(f"{name}: truncated: the header counts {claimed} frames, the file holds {frames}")
    times = np.asarray(scan.pts_seconds.numpy(), dtype=np.float64)
    span = float(times[-1] - times[0])
    spacing = (frames - 1) / span if span > 0 else None  # the rate the frames' times keep, if they keep one
    fps = _rate(header.average_fps_from_header, spacing)
    if fps is None:
        raise DataError(f"{name}: no frame rate in the header or the frames' times")
    begin = float(times[0])
    # seeking by time finds frame i at begin + i / (the header's rate): every frame must sit there
    regular = spacing is None or (abs(spacing - fps) <= RATE_TOLERANCE * fps and
                                  np.abs(times - (begin + np.arange(frames) / fps)).max() <= CONSTANT_TOLERANCE / fps)
    constant = bool(regular and claimed in (None, frames))
    if not constant:  # a header's rate can be any of the rates a variable stream has: the average of its times
        fps = _rate(scan.average_fps_from_content, fps)
    return VideoInfo(frames=frames, fps=fps, height=int(header.height), width=int(header.width), begin=begin,
                     constant=constant, codec=str(header.codec), rotation=float(header.rotation or 0.0),
                     times=None if constant else times)


def _rate(*candidates: Any) -> float | None:
    """The first candidate that is a plausible frame rate."""
    for fps in candidates:
        if fps is not None and 0 < float(fps) <= MAX_FPS:
            return float(fps)
    return None
