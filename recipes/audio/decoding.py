"""Audio through TorchCodec's public ``AudioDecoder``: headers at index time, bounded decodes per sample.

    info = probe("clip.flac", "clip.flac")                  # AudioInfo(duration=1.2, sample_rate=44100, ...)
    audio = decode("clip.flac", "clip.flac", sample_rate=16000, num_channels=1, max_seconds=60)

``probe`` reads the container's header only (no sample is decoded), so an index of a million
files costs a header read each. ``decode`` resamples in FFmpeg, mixes to mono as the mean of the
channels (librosa's ``to_mono``; FFmpeg's own downmix sums at -3 dB and can leave [-1, 1]), and
clips to [-1, 1] (float codecs and resampling may overshoot). It never decodes more than
``max_seconds`` plus :data:`DURATION_TOLERANCE`, whatever a header claims: that limit bounds each
sample's memory. Every failure is a :class:`recipes.core.contracts.errors.DataError` naming the file and the problem.

PCM WAV and FLAC at the target rate (no resampling) are read by libsndfile through ``soundfile``
when it is installed (``pip install ".[audio]"``, the ``audio`` extra): the same samples, bit for bit, in about
two thirds of the time (benchmarks/README.md, audio). :func:`decoders` says which decoder reads what.
"""

from __future__ import annotations

import functools
import io
import os
import re
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np
import torch
from torchcodec.decoders import AudioDecoder

from recipes.core.contracts.errors import DataError
from recipes.core.contracts.parameters import check_count, check_positive

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
# What libsndfile reads here, bit for bit as FFmpeg does (tests/audio/test_decoding.py); the rest goes to TorchCodec
PCM_SUBTYPES = {"WAV": ("PCM_16", "PCM_24", "FLOAT"), "WAVEX": ("PCM_16", "PCM_24", "FLOAT"),
                "FLAC": ("PCM_16", "PCM_24")}
_PCM_SUFFIXES = (".wav", ".flac")  # a path with another ending is not offered to libsndfile
_PCM_SIGNATURES = (b"RIFF", b"fLaC")  # nor are bytes that start otherwise
_BYTES = {"PCM_16": 2, "PCM_24": 3, "FLOAT": 4}  # a sample's bytes in a WAV
_HEAD_BYTES = 4096  # read to find a WAV's data chunk; one further in goes to TorchCodec
# Integer PCM decodes to k / 2^(bits-1), inside [-1, 1): no clamp needed unless resampled or remixed
_INTEGER_CODECS = frozenset({"flac", "pcm_s16le", "pcm_s24le", "pcm_s32le", "pcm_s16be", "pcm_s24be", "pcm_s32be"})
_CORE_PREFIX = re.compile(r"^\w+, \S+:\d+, ")  # "SingleStreamDecoder, /path/File.cpp:41, " before the reason


FFMPEG_MISSING = (
    "TorchCodec's audio decoder and encoder need FFmpeg's shared libraries (major versions 4 to 9), which pip "
    "does not install: apt-get install ffmpeg (Debian, Ubuntu), brew install ffmpeg, or conda install -c "
    "conda-forge ffmpeg"
)


def audio_options(owner: str, *, sample_rate: Any, num_channels: Any, max_seconds: Any) -> tuple[int, int | None, float]:
    """``(sample_rate, num_channels, max_seconds)`` checked when a dataset is built, ``max_seconds``
    defaulted to :data:`MAX_SECONDS`; a ValueError names the parameter (``sample_rate=10**9`` would
    resample half a second into 500 M samples, ``num_channels=0`` pass for mono)."""
    rate = check_count("sample_rate", sample_rate, owner=owner, low=MIN_SAMPLE_RATE, high=MAX_SAMPLE_RATE, none=False)
    channels = check_count("num_channels", num_channels, owner=owner, low=1, high=MAX_CHANNELS)
    seconds = check_positive("max_seconds", max_seconds, owner=owner)
    return int(rate), channels, MAX_SECONDS if seconds is None else seconds


def duration_tolerance(seconds: float) -> float:
    """How far a length may stray from a header's ``seconds``: :data:`DURATION_TOLERANCE` or
    :data:`DURATION_RELATIVE_TOLERANCE` of it, whichever is more."""
    return max(DURATION_TOLERANCE, DURATION_RELATIVE_TOLERANCE * seconds)


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
    return _header(name, metadata.sample_rate, metadata.num_channels, metadata.duration_seconds, metadata.codec)


def _header(name: str, rate: Any, channels: Any, duration: Any, codec: Any) -> AudioInfo:
    """A header's fields checked against the limits, whichever library read them."""
    if rate is None or not MIN_SAMPLE_RATE <= rate <= MAX_SAMPLE_RATE:
        raise DataError(f"{name}: sample rate {rate} is out of range [{MIN_SAMPLE_RATE}, {MAX_SAMPLE_RATE}] Hz")
    if channels is None or not 1 <= channels <= MAX_CHANNELS:
        raise DataError(f"{name}: channel count {channels} is out of range [1, {MAX_CHANNELS}]")
    if duration is None or not duration >= 0:
        raise DataError(f"{name}: the header gives no duration; remux the file (ffmpeg -i in -c copy out)")
    return AudioInfo(float(duration), int(rate), int(channels), str(codec))


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
        sample_rate: resample to this rate (a file already at it: read by soundfile where the
            module docstring says).
        num_channels: 1 mixes to mono (the mean), None keeps the file's channels, another count
            asks FFmpeg to remix.
        max_seconds: refuse a file that decodes to more (at most this much plus
            :data:`DURATION_TOLERANCE` is ever decoded).
        expected: the header's duration from the index; a decode further from it than
            :data:`DURATION_TOLERANCE` seconds or :data:`DURATION_RELATIVE_TOLERANCE` of it, whichever
            is more, is refused (a file changed or broken since).
    """
    remix = None if num_channels in (None, 1) else num_channels
    decoded = None if remix else _decode_pcm(source, name, sample_rate, max_seconds)
    audio, info, bounded = decoded or _decode_ffmpeg(source, name, sample_rate, remix, max_seconds)
    seconds = audio.shape[-1] / sample_rate
    if seconds > max_seconds:
        raise DataError(f"{name}: decodes to more than max_seconds={max_seconds:g} "
                        f"({info.duration:.2f} s in its header)")
    if expected is not None and abs(seconds - expected) > duration_tolerance(expected):
        raise DataError(f"{name}: decodes to {seconds:.3f} s, its header said {expected:.3f} s when indexed")
    if audio.shape[-1] == 0:
        raise DataError(f"{name}: holds no samples")
    if num_channels == 1 and audio.shape[0] > 1:
        audio = audio.mean(dim=0, keepdim=True)  # a mean of values in [-1, 1] stays in it
    return audio if bounded else audio.clamp_(-1.0, 1.0)


def _over(name: str, info: AudioInfo, max_seconds: float) -> None:
    """Refuse, before any sample is decoded, a file whose header claims more than ``max_seconds``."""
    if info.duration > max_seconds + DURATION_TOLERANCE:
        raise DataError(f"{name}: {info.duration:.2f} s is over max_seconds={max_seconds:g}; raise max_seconds")


def _decode_ffmpeg(source: Any, name: str, sample_rate: int, remix: int | None,
                   max_seconds: float) -> tuple[torch.Tensor, AudioInfo, bool]:
    """TorchCodec's decode, resampled and remixed by FFmpeg: ``(audio [C, N], header, within [-1, 1])``."""
    decoder = _open(source, name, sample_rate=sample_rate, num_channels=remix)
    info = _checked(decoder, name)
    _over(name, info, max_seconds)
    try:
        samples = decoder.get_samples_played_in_range(0.0, max_seconds + DURATION_TOLERANCE)
    except (RuntimeError, ValueError) as error:
        raise DataError(f"{name}: cannot decode audio ({_reason(error)})") from None
    bounded = info.codec in _INTEGER_CODECS and info.sample_rate == sample_rate and remix is None
    return samples.data, info, bounded


def _decode_pcm(source: Any, name: str, sample_rate: int,
                max_seconds: float) -> tuple[torch.Tensor, AudioInfo, bool] | None:
    """libsndfile's decode of PCM WAV or FLAC already at ``sample_rate``: ``(audio [C, N], header, within [-1, 1])``;
    None where TorchCodec decodes instead: no soundfile, another format or rate, a file libsndfile
    cannot open (TorchCodec then names the problem as it does for every other file)."""
    soundfile = _soundfile()
    if soundfile is None:
        return None
    if isinstance(source, (bytes, bytearray, memoryview)):
        head, size = bytes(source[:_HEAD_BYTES]), len(source)
        source = io.BytesIO(source)
    elif isinstance(source, (str, os.PathLike)) and os.fspath(source).lower().endswith(_PCM_SUFFIXES):
        try:
            with open(source, "rb") as stream:
                head, size = stream.read(_HEAD_BYTES), os.fstat(stream.fileno()).st_size
        except OSError:
            return None
    else:
        return None
    if head[:4] not in _PCM_SIGNATURES:
        return None
    try:
        with soundfile.SoundFile(source) as file:
            if file.samplerate != sample_rate or file.subtype not in PCM_SUBTYPES.get(file.format, ()):
                return None
            if file.frames <= 0:  # empty, or a length the header does not give: TorchCodec's messages
                return None
            if file.format != "FLAC" and _cut_mid_frame(head, size, file.channels * _BYTES[file.subtype]):
                return None  # FFmpeg refuses a WAV cut inside a sample frame, libsndfile drops the piece
            info = _header(name, file.samplerate, file.channels, file.frames / file.samplerate, file.format)
            _over(name, info, max_seconds)
            # at most the bound TorchCodec's path decodes, never what the header claims beyond it
            frames = min(file.frames, int((max_seconds + DURATION_TOLERANCE) * sample_rate))
            data = file.read(frames, dtype="float32", always_2d=True)
    except RuntimeError:  # soundfile.LibsndfileError: FLAC out of sync, a header it cannot parse
        return None
    # [N, C] interleaved -> [C, N]; a mono clip is a view (its transpose is contiguous). view() gives
    # it the strides torch computes for [C, N]: numpy's transpose leaves (1, 1) on a mono clip, and
    # torch copies such a tensor into a batch row five times slower (audio_collate: 7.5 -> 1.4 ms a batch)
    audio = torch.from_numpy(np.ascontiguousarray(data.T))
    return audio.view(audio.shape), info, file.subtype != "FLOAT"


def _cut_mid_frame(head: bytes, size: int, frame_bytes: int) -> bool:
    """Whether a WAV's data chunk ends inside a sample frame (True too where the first bytes do not
    reach the data chunk): RIFF chunks walked from ``head``, the file's first bytes, ``size`` its length."""
    offset = 12  # "RIFF", its size, "WAVE"
    while offset + 8 <= len(head):
        chunk, length = head[offset : offset + 4], int.from_bytes(head[offset + 4 : offset + 8], "little")
        if chunk == b"data":
            return min(length, size - offset - 8) % frame_bytes != 0
        offset += 8 + length + (length & 1)  # chunks are padded to an even length
    return True


@functools.cache
def _soundfile() -> ModuleType | None:
    try:
        import soundfile  # the optional extra "audio": libsndfile's PCM decode
    except (ImportError, OSError):  # not installed, or its libsndfile missing
        return None
    return soundfile


def decoders() -> str:
    """Which library decodes which files here, with versions: for logs and ``recipes check audio``."""
    import torchcodec

    ffmpeg = f"TorchCodec {torchcodec.__version__}"
    soundfile = _soundfile()
    if soundfile is None:
        return f"{ffmpeg} for every file (soundfile is not installed: the audio extra, pip install \".[audio]\")"
    return (f"soundfile {soundfile.__version__} (libsndfile {soundfile.__libsndfile_version__}) for PCM WAV "
            f"and FLAC at the target rate, {ffmpeg} for the rest")


def crop(audio: torch.Tensor, length: int, *, random: bool) -> torch.Tensor:
    """At most ``length`` samples of ``audio [C, N]``: a window drawn from torch's generator
    (seeded per sample inside a preset loader) when ``random``, else the centre one."""
    extra = audio.shape[-1] - length
    if extra <= 0:
        return audio
    start = int(torch.randint(extra + 1, ())) if random else extra // 2
    return audio[:, start : start + length].clone()  # a view would keep the whole clip alive
