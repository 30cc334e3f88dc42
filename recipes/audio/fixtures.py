"""The audio fixtures: tones, chirps and noise bursts in every container the audio recipe reads.

    write_audio(Path("fixtures/audio"))      # called by recipes.fixtures.generate (recipes/domains.py names it)

Clips are written with TorchCodec's public ``AudioEncoder`` (WAV PCM16, FLAC, MP3, Ogg Vorbis,
Ogg Opus); float32 WAV, which that encoder does not write, and the hostile files are built byte by
byte here. Ogg streams carry a random serial number, so each Ogg page gets a fixed one (and its
CRC again): the same FFmpeg build then gives the same bytes. The layout is in ``AUDIO_README``;
``LAYOUT`` is what ``fixtures/README.md`` says of it. TorchCodec is imported on first use.
"""

import csv
import io
import json
import struct
import tarfile
from pathlib import Path

import numpy as np

from recipes.fixtures_files import write

LAYOUT = "    audio/             clips in WAV, FLAC, MP3, Ogg; manifests, a shard, bad clips; see audio/README.md\n"

OGG_SERIAL = 0x5EC1A1ED  # the serial number every generated Ogg stream carries
MP3_BIT_RATE = 32_000  # small files; the tests compare with TorchCodec's decode of the same file
OGG_BIT_RATE = 24_000  # Opus, and Vorbis mono (libvorbis refuses it for 44.1 kHz stereo: its default there)
# root-relative path -> (signal, sample rate, seconds, channels); the suffix picks the container
FOLDER_CLIPS = {
    "chirp/c0_16k.wav": ("chirp", 16000, 0.6, 1),
    "chirp/c1_8k.flac": ("chirp", 8000, 0.4, 1),
    "chirp/c2_44k_stereo.mp3": ("chirp", 44100, 0.5, 2),
    "chirp/nested/c3_16k_float.wav": ("chirp", 16000, 0.3, 1),
    "noise/n0_8k.wav": ("noise", 8000, 0.5, 1),
    "noise/n1_48k_stereo.opus": ("noise", 48000, 0.5, 2),
    "noise/n2_16k.ogg": ("noise", 16000, 0.7, 1),
    "tone/t0_16k.mp3": ("tone", 16000, 1.0, 1),
    "tone/t1_44k_stereo.ogg": ("tone", 44100, 0.8, 2),
    "tone/t2_48k_stereo.flac": ("tone", 48000, 0.1, 2),
    "tone/T3_8K.WAV": ("tone", 8000, 0.25, 1),
}
# speech-like clips (voiced harmonics, syllable envelope): name -> (seconds, sample rate, words)
SPEECH_CLIPS = {
    "clips/s0.flac": (0.9, 16000, "the cat sat by the window"),
    "clips/s1.wav": (0.4, 16000, "hot water"),
    "clips/s2.mp3": (1.5, 16000, "a river runs to the sea in the morning"),
    "clips/s3.opus": (0.7, 16000, "café au lait"),
    "clips/s4.flac": (1.2, 8000, "read the book again and again"),
    "clips/s5.ogg": (0.5, 16000, "five"),
    "clips/s6.flac": (0.3, 16000, "yes"),
    "clips/s7.wav": (1.0, 8000, "the dog said nothing at all"),
}


def write_audio(root: Path) -> str:
    """Write ``folder/``, ``speech/`` (clips, manifests, tar shards), ``hostile/`` and README.md under
    ``root``; returns ``LAYOUT``."""
    for name, (kind, rate, seconds, channels) in FOLDER_CLIPS.items():
        write(root / "folder" / name, encode(_signal(kind, rate, seconds, channels, seed=len(name)), rate, name))
    write(root / "folder/noise/notes.txt", "Not audio: AudioFolderDataset skips other extensions.\n")
    speech = root / "speech"
    rows = []
    for k, (name, (seconds, rate, text)) in enumerate(SPEECH_CLIPS.items()):
        data = encode(_speech(rate, seconds, seed=k), rate, name)
        write(speech / name, data)
        rows.append((name, round(seconds, 3), text, data))
    nemo = [{"audio_filepath": name, "duration": seconds, "text": text} for name, seconds, text, _ in rows]
    write(speech / "manifest.jsonl", _jsonl(nemo))
    write(speech / "plain.jsonl", _jsonl([{"audio": name, "text": text} for name, _, text, _ in rows]))
    table = io.StringIO()
    csv.writer(table, lineterminator="\n").writerows([["audio", "text"]] + [[n, t] for n, _, t, _ in rows])
    write(speech / "manifest.csv", table.getvalue())
    for shard in range(2):
        members = {}
        for k in range(4 * shard, 4 * shard + 4):
            name, seconds, text, data = rows[k]
            key = f"{k:06d}"
            members[f"{key}{Path(name).suffix}"] = data
            members[f"{key}.txt"] = text.encode()
            members[f"{key}.json"] = json.dumps({"duration": seconds, "text": text}, sort_keys=True).encode()
        write(speech / f"shards/speech-{shard:06d}.tar", _tar(members))
    for name, data in hostile_audio(root / "speech/clips/s6.flac").items():
        write(root / "hostile" / name, data)
    write(root / "README.md", AUDIO_README)
    return LAYOUT


def encode(samples: np.ndarray, sample_rate: int, name: str) -> bytes:
    """``samples`` (float ``[C, N]`` in [-1, 1]) in the container and codec ``name``'s suffix picks."""
    suffix = Path(name).suffix.lower()
    if "float" in name:
        return _float_wav(samples, sample_rate)
    from torchcodec.encoders import AudioEncoder
    import torch

    from recipes.audio.decoding import check_ffmpeg

    encoder = AudioEncoder(torch.from_numpy(samples.astype(np.float32)), sample_rate=sample_rate)
    bit_rate = {".mp3": MP3_BIT_RATE, ".ogg": OGG_BIT_RATE, ".opus": OGG_BIT_RATE}.get(suffix)
    if suffix == ".ogg" and samples.shape[0] > 1:
        bit_rate = None
    try:
        data = encoder.to_tensor(suffix[1:], bit_rate=bit_rate).numpy().tobytes()
    except RuntimeError as error:
        check_ffmpeg(error)  # FFmpeg's libraries missing: an ImportError that says how to install them
        raise
    return _fixed_ogg_serial(data) if suffix in (".ogg", ".opus") else data


def _signal(kind: str, rate: int, seconds: float, channels: int, *, seed: int) -> np.ndarray:
    t = np.arange(round(rate * seconds)) / rate
    if kind == "tone":
        waves = [0.5 * np.sin(2 * np.pi * f * t) for f in (440.0, 660.0)[:channels]]
    elif kind == "chirp":  # a linear sweep from 200 Hz to a third of the sample rate
        f1 = rate / 3
        waves = [0.5 * np.sin(2 * np.pi * (200 * t + (f1 - 200) * t**2 / (2 * seconds + c))) for c in range(channels)]
    else:  # a burst of white noise in the middle half
        rng = np.random.default_rng(seed)
        envelope = (np.abs(t - seconds / 2) < seconds / 4).astype(np.float64)
        waves = [0.3 * envelope * rng.uniform(-1, 1, len(t)) for _ in range(channels)]
    return np.stack(waves)


def _speech(rate: int, seconds: float, *, seed: int) -> np.ndarray:
    """Voiced harmonics of a gliding pitch under a syllable-rate envelope: spectra like speech's."""
    rng = np.random.default_rng(100 + seed)
    t = np.arange(round(rate * seconds)) / rate
    pitch = 110 + 40 * rng.random() + 20 * np.sin(2 * np.pi * 3 * t)
    phase = 2 * np.pi * np.cumsum(pitch) / rate
    voice = sum(np.sin(k * phase) / k for k in range(1, 12) if k * 160 < rate / 2)
    syllables = 0.5 - 0.5 * np.cos(2 * np.pi * 4 * t)
    return (0.25 * syllables * voice)[None].clip(-1, 1)


def _float_wav(samples: np.ndarray, rate: int) -> bytes:
    """A WAVE_FORMAT_IEEE_FLOAT (3) file, 32-bit, interleaved."""
    channels = samples.shape[0]
    data = samples.T.astype("<f4").tobytes()
    fmt = struct.pack("<HHIIHH", 3, channels, rate, rate * 4 * channels, 4 * channels, 32)
    return _riff(fmt, data)


def _riff(fmt: bytes, data: bytes, *, data_size: int | None = None) -> bytes:
    size = len(data) if data_size is None else data_size
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", size) + data
    return b"RIFF" + struct.pack("<I", min(4 + len(body) - len(data) + size, 0xFFFFFFFF)) + body


def _pcm16_wav(samples: np.ndarray, rate: int, *, channels: int | None = None, data_size: int | None = None,
               format_tag: int = 1) -> bytes:
    """A PCM16 WAV whose header may lie: ``channels``, ``data_size`` and ``format_tag`` as given."""
    count = samples.shape[0] if channels is None else channels
    data = (samples.T * 32767).round().astype("<i2").tobytes()
    fmt = struct.pack("<HHIIHH", format_tag, count, rate, rate * 2 * count, 2 * count, 16)
    return _riff(fmt, data, data_size=data_size)


def _ogg_crc(data: bytes) -> int:
    crc = 0
    for byte in data:
        crc ^= byte << 24
        for _ in range(8):
            crc = ((crc << 1) ^ 0x04C11DB7 if crc & 0x80000000 else crc << 1) & 0xFFFFFFFF
    return crc


def _fixed_ogg_serial(data: bytes) -> bytes:
    """Every page of a one-stream Ogg file with serial :data:`OGG_SERIAL` and its CRC recomputed."""
    out = bytearray(data)
    start = 0
    while start < len(out):
        if out[start : start + 4] != b"OggS":
            raise ValueError(f"not an Ogg page at byte {start}")
        segments = out[start + 26]
        end = start + 27 + segments + sum(out[start + 27 : start + 27 + segments])
        out[start + 14 : start + 18] = struct.pack("<I", OGG_SERIAL)
        out[start + 22 : start + 26] = b"\0\0\0\0"
        out[start + 22 : start + 26] = struct.pack("<I", _ogg_crc(bytes(out[start:end])))
        start = end
    return bytes(out)


def _tar(members: dict[str, bytes]) -> bytes:
    """A tar of ``members`` in order, with fixed times and owners: the same bytes every run."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def hostile_audio(good_flac: Path) -> dict[str, bytes | str]:
    """The broken audio files by their path under ``audio/hostile/``; ``good_flac`` is cut short."""
    flac = good_flac.read_bytes()
    tenth = _signal("tone", 8000, 0.1, 1, seed=0)
    clips = {
        "truncated.flac": flac[: len(flac) * 4 // 10],
        "empty.wav": b"",
        "not_audio.mp3": "This is plain text with an .mp3 name.\n",
        # the data chunk claims 2^31 bytes, 37 hours of 8 kHz PCM16; 0.1 s follows
        "hours.wav": _pcm16_wav(tenth, 8000, data_size=2**31),
        "bad_rate.wav": _pcm16_wav(tenth, 2_000_000),
        "bad_channels.wav": _pcm16_wav(tenth, 8000, channels=200),
        "unsupported.wav": _pcm16_wav(tenth, 8000, format_tag=0x7A7A),
    }
    # paths relative to the audio fixtures' root (audio_root=fixtures/audio)
    good_row = _jsonl([{"audio": "speech/clips/s1.wav", "text": "hot water"}]).encode()
    bad_text = good_row + b'{"audio": "speech/clips/s6.flac", "text": "y\xffes"}\n'
    return {**clips, "bad_transcript.jsonl": bad_text, "README.md": HOSTILE_AUDIO_README}


def _jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps(row, sort_keys=True, ensure_ascii=False) + "\n" for row in rows)


HOSTILE_AUDIO_README = """# Hostile audio

Each file is bad in one way. `on_error="raise"`: a DataError naming the file and the problem;
`on_error="skip"`: the sample is dropped with a warning naming both.

| file | problem |
|---|---|
| truncated.flac | a FLAC file cut to 40% of its bytes |
| empty.wav | zero bytes |
| not_audio.mp3 | a text file with an audio name |
| hours.wav | the header claims 2^31 data bytes (37 hours); 0.1 s follows |
| bad_rate.wav | the header says 2,000,000 samples per second |
| bad_channels.wav | the header says 200 channels |
| unsupported.wav | WAV format tag 0x7a7a, a codec nobody knows |
| bad_transcript.jsonl | line 2's transcript holds byte ff (invalid UTF-8) |
"""

AUDIO_README = """# Audio fixtures

Written by `recipes/audio/fixtures.py` with TorchCodec's `AudioEncoder` (float WAV and the
hostile files byte by byte). Signals: tones (440 Hz, 660 Hz on a second channel), linear chirps,
noise bursts, and speech-like voiced harmonics under a 4 Hz syllable envelope.

    folder/            class folders (the SpeechCommands / ESC-50 layout): chirp, noise, tone
      chirp/c0_16k.wav (PCM16)  c1_8k.flac  c2_44k_stereo.mp3  nested/c3_16k_float.wav (float32)
      noise/n0_8k.wav  n1_48k_stereo.opus (Ogg Opus)  n2_16k.ogg (Ogg Vorbis)  notes.txt (ignored)
      tone/t0_16k.mp3  t1_44k_stereo.ogg  t2_48k_stereo.flac  T3_8K.WAV (uppercase extension)
    speech/
      clips/s0..s7     0.3-1.5 s, 8 and 16 kHz, mono; FLAC, WAV, MP3, Opus, Vorbis
      manifest.jsonl   NeMo style: {"audio_filepath", "duration", "text"}, paths relative to speech/
      plain.jsonl      {"audio", "text"}
      manifest.csv     audio,text
      shards/speech-000000.tar, speech-000001.tar   WebDataset style: 000000.flac + .txt + .json
    hostile/           bad input; see hostile/README.md
"""
