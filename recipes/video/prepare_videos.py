"""A training-ready copy of a video folder: each video re-encoded once as H.264 in MP4, at the size
training decodes, with a keyframe at the start of every clip span, and a manifest of frame counts.

    summary = prepare("kinetics/train", "prepared/", short_side=128, frames_per_clip=16, workers=16)
    dataset = VideoFolderDataset("prepared/videos", frames_per_clip=16, transform=train_transform(112))

A random clip is decoded from the keyframe before it: with a keyframe every 2 s, a 16-frame clip
costs up to 60 frames more. The copy has one every ``keyframe_every`` frames (default the clip
span), its frames ``short_side`` on their shorter side (never enlarged). The source is a folder of
videos (:data:`VIDEO_EXTENSIONS`), mirrored as ``DEST/videos/<path>.mp4``: a folder of class
folders is read back by ``VideoFolderDataset("DEST/videos")``, the folder of a manifest whose
paths end in ``.mp4`` (Kinetics') by ``VideoDataset(manifest, video_root="DEST/videos")``.

Each video is decoded in order, upright (TorchCodec applies the container's rotation) and resized
in the decoder, its rate kept (``fps``: the frames played at ``k / fps`` s, as TorchCodec's
``get_frames_played_at`` picks them; a variable rate made constant at its average). x264 runs
with fixed options in one thread (``crf``, ``preset="medium"``, ``tune="fastdecode"``, no scene-cut
keyframes, no macroblock tree): the same bytes on every machine, whatever ``workers``. ``manifest.json`` holds
each file's frame count, rate and size as :func:`recipes.video.probe` reads the file written, so
a dataset over ``DEST/videos`` opens no file to index it. The rest is every domain's ``prepare``
(:func:`recipes.core.streams.write_prepared`): resumed after a stop, other options refused unless
``overwrite=True``, each file's sha256 in the manifest.
"""

from __future__ import annotations

import dataclasses
import io
import math
import os
from pathlib import Path
from typing import Any

import torch
from torchcodec.decoders import VideoDecoder
from torchcodec.encoders import Encoder, VideoEncoder
from torchcodec.transforms import Resize

from recipes.core import DataError, storage, streams
from recipes.video.folder import VIDEO_EXTENSIONS
from recipes.video.probe import VideoInfo, check_ffmpeg, probe, reason
from recipes.video.sampling import ClipSampling

__all__ = ["describe_video", "encode_video", "output_size", "prepare"]

CHUNK_FRAMES = 32  # frames decoded and encoded at a time: memory follows the chunk, not the video
CODEC = "libx264"  # FFmpeg's H.264 encoder: GPL builds have it (Debian's, Homebrew's), conda-forge's LGPL one not
PRESET, TUNE = "medium", "fastdecode"  # x264's: fastdecode (no CABAC, no deblocking) decodes a clip in ~60% of the time


def prepare(
    source: str | os.PathLike,
    dest: str | os.PathLike,
    *,
    short_side: int | None = None,
    frames_per_clip: int = 16,
    frame_step: int = 1,
    keyframe_every: int | None = None,
    fps: float | None = None,
    crf: int = 23,
    workers: int | None = None,
    on_error: str = "raise",
    overwrite: bool = False,
    progress: bool = True,
    storage_options: dict[str, Any] | None = None,
) -> streams.PrepareSummary:
    """Write the video folder ``source`` as H.264 MP4s under ``dest`` (see the module docstring).

    Args:
        source: a local folder of videos: class folders, or the folder a manifest's paths are relative to.
        dest: the folder to write (made if missing): ``videos/<class>/<name>.mp4``, ..., ``manifest.json``.
        short_side: the shorter side a video keeps (never enlarged; sides rounded to even, as
            4:2:0 needs); None keeps each video's size.
        frames_per_clip, frame_step: the clips training cuts, whose span is the default ``keyframe_every``.
        keyframe_every: frames between keyframes (a GOP), exact: x264's scene cuts are off.
        fps: the rate every video is resampled to; None keeps each video's own.
        crf: x264's constant rate factor (0-51, lower is better; 23, x264's default).
        workers, on_error, overwrite, progress, storage_options: as :func:`recipes.vision.prepare` takes them; a
            video that does not probe or decode is named (``on_error="skip"``: left out and counted).
    """
    span = ClipSampling(frames_per_clip, frame_step).span
    keyframe_every = span if keyframe_every is None else keyframe_every
    for name, value, low in (("short_side", short_side, 2), ("keyframe_every", keyframe_every, 1)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < low):
            raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    if fps is not None and (isinstance(fps, bool) or not isinstance(fps, (int, float)) or not 0 < fps <= 1000):
        raise ValueError(f"fps must be a number in (0, 1000], got {fps!r}")
    if isinstance(crf, bool) or not isinstance(crf, int) or not 0 <= crf <= 51:
        raise ValueError(f"crf must be an int in 0-51, got {crf!r}")
    streams.local_folder(source, "prepare")
    root = os.path.expanduser(os.fspath(source))
    relative = video_files(root)
    # DEST/videos/<its path>.mp4 (DEST itself holds .prepare/, which a folder dataset would take for a class)
    rows = [("videos/" + Path(os.path.splitext(name)[0]).as_posix(), os.path.join(root, name), os.path.join(root, name))
            for name in relative]
    options = {"short_side": short_side, "keyframe_every": keyframe_every, "fps": fps, "crf": crf,
               "codec": CODEC, "preset": PRESET, "tune": TUNE}
    check_encoder(CODEC)
    return streams.write_prepared(
        dest, rows, encode_video, domain="video", options=options, source=root,
        run=streams.PrepareRun(1, workers, on_error, overwrite, progress, storage_options=storage_options,
                               shards=streams.FileShards(".mp4", describe=describe_video)),
    )


def check_encoder(codec: str) -> None:
    """Refuse, before any video is read, an FFmpeg without the ``codec`` encoder, saying so: else
    every video would fail alike, each named as if it were at fault."""
    try:
        VideoEncoder(torch.zeros(2, 3, 16, 16, dtype=torch.uint8), frame_rate=2).to_tensor("mp4", codec=codec)
    except (RuntimeError, ValueError) as error:
        check_ffmpeg(error)
        raise RuntimeError(f"prepare video encodes H.264 with FFmpeg's {codec}, which the FFmpeg TorchCodec loads here "
                           f"lacks ({reason(error)}): install an FFmpeg built with it (apt-get install ffmpeg, brew "
                           "install ffmpeg; conda-forge's LGPL build has no libx264)") from None


def video_files(root: str) -> list[str]:
    """Every video under ``root`` (:data:`VIDEO_EXTENSIONS`, any case, links followed), relative to it,
    in ImageFolder's order: the folders of a class folder dataset, or those a manifest names."""
    if not os.path.isdir(root):
        raise ValueError(f"{storage.shown(root)}: prepare video reads a folder of videos (class folders, or the "
                         "folder a manifest's paths are relative to), and this is not one")
    found = [os.path.relpath(os.path.join(folder, name), root)
             for folder, _, files in sorted(os.walk(root, followlinks=True)) for name in sorted(files)
             if name.lower().endswith(VIDEO_EXTENSIONS)]
    if not found:
        raise FileNotFoundError(f"{root}: no video file under it (extensions: {', '.join(VIDEO_EXTENSIONS)})")
    return found


def encode_video(path: str, where: str, options: dict[str, Any]) -> tuple[list[tuple[str, bytes]], None, int]:
    """A video's one member (its MP4 as the module docstring says), no PSNR, and bytes read."""
    info = probe(path, where)
    height, width = output_size(info.height, info.width, options["short_side"])
    rate = info.fps if options["fps"] is None else float(options["fps"])
    # x264 with fixed options in one thread gives the same bytes on every machine (mbtree varies on tiny frames)
    params = f"keyint={options['keyframe_every']}:min-keyint={options['keyframe_every']}:scenecut=0:mbtree=0"
    encoder = Encoder()
    stream = encoder.add_video(height=height, width=width, frame_rate=rate, codec=options["codec"],
                               pixel_format="yuv420p", crf=options["crf"], preset=options["preset"],
                               extra_options={"threads": "1", "tune": options["tune"], "x264-params": params,
                                              "fflags": "+bitexact"})
    encoded = io.BytesIO()
    try:
        decoder = VideoDecoder(path, seek_mode="exact", num_ffmpeg_threads=1,
                               transforms=None if (height, width) == (info.height, info.width) else
                               [Resize((height, width))])
        with encoder.open_file_like(encoded, format="mp4"):
            for frames in _chunks(decoder, info, options["fps"], in_order=options["fps"] is None and info.constant):
                stream.add_frames(frames)
    except (RuntimeError, ValueError, IndexError) as error:
        check_ffmpeg(error)
        raise DataError(f"{where}: cannot re-encode it ({reason(error)})") from None
    return [("mp4", encoded.getvalue())], None, os.path.getsize(path)


def output_size(height: int, width: int, short_side: int | None) -> tuple[int, int]:
    """``(height, width)`` with the shorter side ``short_side`` (never enlarged), both even."""
    scale = 1.0 if short_side is None else min(1.0, short_side / min(height, width))
    return tuple(max(2, 2 * round(side * scale / 2)) for side in (height, width))


def describe_video(path: Path) -> dict[str, Any]:
    """What the manifest keeps of a written video: :func:`recipes.video.probe`'s fields, its frame
    times only where they are not constant."""
    info = dataclasses.asdict(probe(str(path), str(path)))
    times = info.pop("times")
    return info | ({} if times is None else {"times": times.tolist()})


def _chunks(decoder: VideoDecoder, info: VideoInfo, rate: float | None, *, in_order: bool) -> Any:
    """The frames to encode, ``CHUNK_FRAMES`` at a time: every frame in order (``in_order``), or
    those played at ``k / rate`` seconds from the first frame's time to the last's end."""
    if in_order:
        for start in range(0, info.frames, CHUNK_FRAMES):
            yield decoder.get_frames_in_range(start, min(start + CHUNK_FRAMES, info.frames)).data
        return
    rate = info.fps if rate is None else rate
    times = info.frame_times()
    end = float(times[-1]) + 1 / info.fps
    count = max(1, math.floor((end - float(times[0])) * rate + 1e-6))
    for start in range(0, count, CHUNK_FRAMES):
        seconds = [float(times[0]) + k / rate for k in range(start, min(start + CHUNK_FRAMES, count))]
        yield decoder.get_frames_played_at(seconds).data
