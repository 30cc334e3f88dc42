"""Audio through TorchCodec's public ``AudioDecoder`` and libsndfile: headers at index time, bounded decodes.

    info = probe("clip.flac", "clip.flac")                  # AudioInfo(duration=1.2, sample_rate=44100, ...)
    audio = decode("clip.flac", "clip.flac", sample_rate=16000, num_channels=1, max_seconds=60)

``probe`` reads the container's header only (no sample is decoded): through libsndfile for the
containers and codecs whose header it reads as FFmpeg does (:data:`HEADER_CODECS`: WAV, FLAC, Ogg
Vorbis, AIFF...; a few hundredths of a millisecond), through TorchCodec for the rest (MP3, Opus,
M4A). ``decode`` resamples in FFmpeg, mixes to mono as the mean of the
channels (librosa's ``to_mono``; FFmpeg's own downmix sums at -3 dB and can leave [-1, 1]), and
clips to [-1, 1] (float codecs and resampling may overshoot). It never decodes more than
``max_seconds`` plus :data:`DURATION_TOLERANCE`, whatever a header claims: that limit bounds each
sample's memory. Every failure is a :class:`recipes.core.DataError` naming the file and the problem.

PCM WAV and FLAC at the target rate (no resampling) are read by libsndfile through ``soundfile``
when it is installed (``pip install ".[audio]"``, the ``audio`` extra): the same samples, bit for bit,
in less time (docs/audio.md, "Decoders", has the figures). :func:`decoders` says which decoder reads
what. ``fixed_point=True`` keeps 16-bit samples as stored (:class:`recipes.core.FixedPoint`).
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

from recipes.core import DataError, FixedPoint, checks

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
# Whose header libsndfile reads as FFmpeg does (rate, channels and frame count equal: tests/audio/
# test_decoding.py), as FFmpeg names its codec; ADPCM, GSM, MP3 and Opus count frames otherwise.
_PCM_CODECS = {"PCM_16": "pcm_s16", "PCM_24": "pcm_s24", "PCM_32": "pcm_s32", "FLOAT": "pcm_f32", "DOUBLE": "pcm_f64"}
_BYTE_CODECS = {"PCM_U8": "pcm_u8", "PCM_S8": "pcm_s8", "ULAW": "pcm_mulaw", "ALAW": "pcm_alaw"}
_LITTLE, _BIG = ("WAV", "WAVEX", "W64", "RF64"), ("AIFF", "AU", "CAF")  # their containers' byte order
HEADER_CODECS = {
    **{(form, sub): codec + "le" for form in _LITTLE for sub, codec in _PCM_CODECS.items()},
    **{(form, sub): codec + "be" for form in _BIG for sub, codec in _PCM_CODECS.items()},
    **{(form, sub): _BYTE_CODECS[sub] for form in _LITTLE for sub in ("PCM_U8", "ULAW", "ALAW")},
    **{(form, sub): _BYTE_CODECS[sub] for form in _BIG for sub in ("PCM_S8", "ULAW", "ALAW")},
    ("AIFF", "PCM_U8"): "pcm_u8",
    **{("FLAC", sub): "flac" for sub in ("PCM_S8", "PCM_16", "PCM_24")},
    ("OGG", "VORBIS"): "vorbis",
}
# what is offered to libsndfile's header read: paths by their ending, bytes by their first four
_HEADER_SUFFIXES = (".wav", ".wave", ".flac", ".ogg", ".oga", ".aif", ".aiff", ".aifc", ".au", ".snd", ".w64",
                    ".caf", ".rf64")
_HEADER_SIGNATURES = (b"RIFF", b"RF64", b"fLaC", b"OggS", b"FORM", b".snd", b"riff", b"caff")
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
    rate = checks.check_count("sample_rate", sample_rate, owner=owner, low=MIN_SAMPLE_RATE, high=MAX_SAMPLE_RATE,
                              none=False)
    channels = checks.check_count("num_channels", num_channels, owner=owner, low=1, high=MAX_CHANNELS)
    seconds = checks.check_positive("max_seconds", max_seconds, owner=owner)
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
    """The header of ``source`` (a path, bytes or a file object), checked; ``name`` is for messages.
    libsndfile reads it where :data:`HEADER_CODECS` lists the file's format, TorchCodec otherwise
    (and wherever libsndfile cannot open the file, so that TorchCodec's message names the problem)."""
    info = _probe_soundfile(source, name)
    return info if info is not None else _checked(_open(source, name), name)


def _probe_soundfile(source: Any, name: str) -> AudioInfo | None:
    soundfile = _soundfile()
    if soundfile is None:
        return None
    if isinstance(source, (bytes, bytearray, memoryview)):
        if bytes(source[:4]) not in _HEADER_SIGNATURES:
            return None
        source = io.BytesIO(source)
    elif not isinstance(source, (str, os.PathLike)) or not os.fspath(source).lower().endswith(_HEADER_SUFFIXES):
        return None
    try:
        with soundfile.SoundFile(source) as file:
            rate, channels, frames, endian = file.samplerate, file.channels, file.frames, file.endian
            codec = HEADER_CODECS.get((file.format, file.subtype))
    except (RuntimeError, OSError):  # soundfile.LibsndfileError, a missing file: TorchCodec names it
        return None
    if codec is None or endian != "FILE" or frames <= 0 or rate <= 0:  # FFmpeg reads these otherwise
        return None
    return _header(name, rate, channels, frames / rate, codec)


def decode(
    source: Any,
    name: str,
    *,
    sample_rate: int,
    num_channels: int | None,
    max_seconds: float,
    expected: float | None = None,
    expected_from: str = "its header",
    fixed_point: bool = False,
) -> torch.Tensor:
    """``source`` decoded to float32 ``[C, N]`` in [-1, 1] at ``sample_rate`` (or its 16-bit samples).

    Args:
        source: a path, the file's bytes or a file object.
        name: the file, for messages.
        sample_rate: resample to this rate (a file already at it: read by soundfile where the
            module docstring says).
        num_channels: 1 mixes to mono (the mean), None keeps the file's channels, another count
            asks FFmpeg to remix.
        max_seconds: refuse a file that decodes to more (at most this much plus
            :data:`DURATION_TOLERANCE` is ever decoded).
        expected: the duration the index holds; a decode further from it than
            :data:`DURATION_TOLERANCE` seconds or :data:`DURATION_RELATIVE_TOLERANCE` of it, whichever
            is more, is refused (a file changed or broken since, a header or manifest that lies).
        expected_from: who gave ``expected``, for the message (``"the manifest"``).
        fixed_point: give 16-bit PCM already at ``sample_rate`` (WAV, FLAC), that needs no mixing
            (mono, or ``num_channels=None``), as its int16 samples marked
            :class:`recipes.core.FixedPoint`: the float decode is exactly those over 32768.
    """
    remix = None if num_channels in (None, 1) else num_channels
    # stored samples stay int16 only where nothing is computed from them: no resampling, no mixing
    fixed = _Int16(fixed_point and remix is None, num_channels == 1)
    decoded = None if remix else _decode_pcm(source, name, sample_rate, max_seconds, fixed)
    audio, info, bounded = decoded or _decode_ffmpeg(source, name, sample_rate, remix, max_seconds, fixed)
    seconds = audio.shape[-1] / sample_rate
    if seconds > max_seconds:
        raise DataError(f"{name}: decodes to more than max_seconds={max_seconds:g} "
                        f"({info.duration:.2f} s in its header)")
    if expected is not None and abs(seconds - expected) > duration_tolerance(expected):
        raise DataError(f"{name}: decodes to {seconds:.3f} s, {expected_from} said {expected:.3f} s when indexed")
    if audio.shape[-1] == 0:
        raise DataError(f"{name}: holds no samples")
    if audio.dtype == torch.int16:
        return audio.as_subclass(FixedPoint)
    if num_channels == 1 and audio.shape[0] > 1:
        audio = audio.mean(dim=0, keepdim=True)  # a mean of values in [-1, 1] stays in it
    return audio if bounded else audio.clamp_(-1.0, 1.0)


@dataclass(frozen=True)
class _Int16:
    """Whether a decode of 16-bit samples at the target rate keeps them: asked for, and no mean to take."""

    wanted: bool
    mono: bool

    def keeps(self, channels: int) -> bool:
        return self.wanted and (channels == 1 or not self.mono)


def _over(name: str, info: AudioInfo, max_seconds: float) -> None:
    """Refuse, before any sample is decoded, a file whose header claims more than ``max_seconds``."""
    if info.duration > max_seconds + DURATION_TOLERANCE:
        raise DataError(f"{name}: {info.duration:.2f} s is over max_seconds={max_seconds:g}; raise max_seconds")


def _decode_ffmpeg(source: Any, name: str, sample_rate: int, remix: int | None, max_seconds: float,
                   fixed: _Int16) -> tuple[torch.Tensor, AudioInfo, bool]:
    """TorchCodec's decode, resampled and remixed by FFmpeg: ``(audio [C, N], header, within [-1, 1])``,
    int16 where ``fixed`` keeps the 16-bit samples of a file at ``sample_rate``."""
    decoder = _open(source, name, sample_rate=sample_rate, num_channels=remix)
    info = _checked(decoder, name)
    _over(name, info, max_seconds)
    try:
        samples = decoder.get_samples_played_in_range(0.0, max_seconds + DURATION_TOLERANCE).data
    except (RuntimeError, ValueError) as error:
        raise DataError(f"{name}: cannot decode audio ({_reason(error)})") from None
    bounded = info.codec in _INTEGER_CODECS and info.sample_rate == sample_rate and remix is None
    if bounded and decoder.metadata.sample_format in ("s16", "s16p") and fixed.keeps(info.num_channels):
        return samples.mul_(32768).to(torch.int16), info, True  # FFmpeg's float of k is k / 32768 exactly
    return samples, info, bounded


def _decode_pcm(source: Any, name: str, sample_rate: int, max_seconds: float,
                fixed: _Int16 = _Int16(False, True)) -> tuple[torch.Tensor, AudioInfo, bool] | None:
    """libsndfile's decode of PCM WAV or FLAC already at ``sample_rate``: ``(audio [C, N], header, within [-1, 1])``,
    int16 where ``fixed`` keeps 16-bit samples; None where TorchCodec decodes instead: no soundfile,
    another format or rate, a file libsndfile cannot open (TorchCodec then names the problem)."""
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
            codec = HEADER_CODECS[file.format, file.subtype]
            info = _header(name, file.samplerate, file.channels, file.frames / file.samplerate, codec)
            _over(name, info, max_seconds)
            # at most the bound TorchCodec's path decodes, never what the header claims beyond it
            frames = min(file.frames, int((max_seconds + DURATION_TOLERANCE) * sample_rate))
            int16 = file.subtype == "PCM_16" and fixed.keeps(file.channels)
            data = file.read(frames, dtype="int16" if int16 else "float32", always_2d=True)
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
