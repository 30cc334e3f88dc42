"""Audio through TorchCodec's public ``AudioDecoder``: headers at index time, bounded decodes per sample.

    info = probe("clip.flac", "clip.flac")                  # AudioInfo(duration=1.2, sample_rate=44100, ...)
    audio = decode("clip.flac", "clip.flac", sample_rate=16000, num_channels=1, max_seconds=60)

``probe`` reads the container's header only (no sample is decoded), so an index of a million
files costs a header read each. ``decode`` resamples in FFmpeg, mixes to mono as the mean of the
channels (librosa's ``to_mono``; FFmpeg's own downmix sums at -3 dB and can leave [-1, 1]), and
clips to [-1, 1] (float codecs may overshoot). It never decodes more than ``max_seconds`` plus
:data:`DURATION_TOLERANCE`, whatever a header claims: that limit bounds each sample's memory.
Every failure is a :class:`recipes.core.errors.DataError` naming the file and the problem.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import torch
from torchcodec.decoders import AudioDecoder

from recipes.core.errors import DataError

# The per-sample limit: 10 minutes of 48 kHz stereo float32 decode to 230 MB before resampling;
# ASR utterances last seconds, ESC-50 clips 5 s. Raise it with max_seconds= for long recordings.
MAX_SECONDS = 600.0
MAX_SAMPLE_RATE = 768_000  # the highest rate studio converters use; above it a header is broken
MIN_SAMPLE_RATE = 1_000
MAX_CHANNELS = 64  # third-order ambisonics use 16, a 22.2 layout 24
# How far a decoded length may stray from the header's duration: MP3 and Vorbis headers count
# encoder delay and padding (tens of milliseconds), Opus its pre-skip; a VBR MP3 without a Xing
# header has a duration FFmpeg estimates from its first frames' bit rate, hence the relative part.
DURATION_TOLERANCE = 0.25
DURATION_RELATIVE_TOLERANCE = 0.1
_CORE_PREFIX = re.compile(r"^\w+, \S+:\d+, ")  # "SingleStreamDecoder, /path/File.cpp:41, " before the reason


FFMPEG_MISSING = (
    "TorchCodec's audio decoder and encoder need FFmpeg's shared libraries (major versions 4 to 9), which pip "
    "does not install: apt-get install ffmpeg (Debian, Ubuntu), brew install ffmpeg, or conda install -c "
    "conda-forge ffmpeg"
)


@dataclass(frozen=True)
class AudioInfo:
    """What a header says: ``duration`` (seconds), ``sample_rate``, ``num_channels``, ``codec``."""

    duration: float
    sample_rate: int
    num_channels: int
    codec: str


def _reason(error: BaseException) -> str:
    line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return _CORE_PREFIX.sub("", line)


def _open(source: Any, name: str, **options: Any) -> AudioDecoder:
    try:
        return AudioDecoder(source, **options)
    except (RuntimeError, ValueError) as error:
        check_ffmpeg(error)
        raise DataError(f"{name}: cannot read audio ({_reason(error)})") from None


def check_ffmpeg(error: BaseException) -> None:
    """Raise :data:`FFMPEG_MISSING` as an ImportError when ``error`` is TorchCodec failing to load
    FFmpeg's libraries: then no file is at fault, and skipping files would drop them all."""
    if "libtorchcodec" in str(error):
        raise ImportError(FFMPEG_MISSING) from error


def _checked(decoder: AudioDecoder, name: str) -> AudioInfo:
    metadata = decoder.metadata
    rate, channels = metadata.sample_rate, metadata.num_channels
    if rate is None or not MIN_SAMPLE_RATE <= rate <= MAX_SAMPLE_RATE:
        raise DataError(f"{name}: sample rate {rate} is out of range [{MIN_SAMPLE_RATE}, {MAX_SAMPLE_RATE}] Hz")
    if channels is None or not 1 <= channels <= MAX_CHANNELS:
        raise DataError(f"{name}: channel count {channels} is out of range [1, {MAX_CHANNELS}]")
    duration = metadata.duration_seconds
    if duration is None or not duration >= 0:
        raise DataError(f"{name}: the header gives no duration; remux the file (ffmpeg -i in -c copy out)")
    return AudioInfo(float(duration), int(rate), int(channels), str(metadata.codec))


def probe(source: Any, name: str) -> AudioInfo:
    """The header of ``source`` (a path, bytes or a file object), checked; ``name`` is for messages."""
    return _checked(_open(source, name), name)


def decode(
    source: Any,
    name: str,
    *,
    sample_rate: int,
    num_channels: int | None,
    max_seconds: float,
    expected: float | None = None,
) -> torch.Tensor:
    """``source`` decoded to float32 ``[C, N]`` in [-1, 1] at ``sample_rate``.

    Args:
        source: a path, the file's bytes or a file object.
        name: the file, for messages.
        sample_rate: resample to this rate.
        num_channels: 1 mixes to mono (the mean), None keeps the file's channels, another count
            asks FFmpeg to remix.
        max_seconds: refuse a file that decodes to more (at most this much plus
            :data:`DURATION_TOLERANCE` is ever decoded).
        expected: the header's duration from the index; a decode further from it than
            :data:`DURATION_TOLERANCE` seconds or :data:`DURATION_RELATIVE_TOLERANCE` of it, whichever
            is more, is refused (a file changed or broken since).
    """
    remix = None if num_channels in (None, 1) else num_channels
    decoder = _open(source, name, sample_rate=sample_rate, num_channels=remix)
    info = _checked(decoder, name)
    if info.duration > max_seconds + DURATION_TOLERANCE:
        raise DataError(f"{name}: {info.duration:.2f} s is over max_seconds={max_seconds:g}; raise max_seconds")
    try:
        samples = decoder.get_samples_played_in_range(0.0, max_seconds + DURATION_TOLERANCE)
    except (RuntimeError, ValueError) as error:
        raise DataError(f"{name}: cannot decode audio ({_reason(error)})") from None
    audio = samples.data
    seconds = audio.shape[-1] / sample_rate
    if seconds > max_seconds:
        raise DataError(f"{name}: decodes to more than max_seconds={max_seconds:g} "
                        f"({info.duration:.2f} s in its header)")
    if expected is not None and abs(seconds - expected) > max(DURATION_TOLERANCE,
                                                               DURATION_RELATIVE_TOLERANCE * expected):
        raise DataError(f"{name}: decodes to {seconds:.3f} s, its header said {expected:.3f} s when indexed")
    if audio.shape[-1] == 0:
        raise DataError(f"{name}: holds no samples")
    if num_channels == 1 and audio.shape[0] > 1:
        audio = audio.mean(dim=0, keepdim=True)
    return audio.clamp_(-1.0, 1.0)


def crop(audio: torch.Tensor, length: int, *, random: bool) -> torch.Tensor:
    """At most ``length`` samples of ``audio [C, N]``: a window drawn from torch's generator
    (seeded per sample inside a preset loader) when ``random``, else the centre one."""
    extra = audio.shape[-1] - length
    if extra <= 0:
        return audio
    start = int(torch.randint(extra + 1, ())) if random else extra // 2
    return audio[:, start : start + length].clone()  # a view would keep the whole clip alive
