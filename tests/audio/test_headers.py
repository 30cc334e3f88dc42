"""Headers through libsndfile equal TorchCodec's metadata (rate, channels, frame count, codec name)
on every fixture, the hostile ones included, and on each container and codec libsndfile is trusted
with; a header that lies is still named when its clip is decoded."""

from pathlib import Path

import numpy as np
import pytest
import soundfile
from torchcodec.decoders import AudioDecoder

from recipes.audio import decoding
from recipes.audio.decoding import HEADER_CODECS, decode, probe
from recipes.core.contracts.errors import DataError

SUFFIXES = (".wav", ".flac", ".mp3", ".ogg", ".opus")
# (format, subtype) -> the file ending libsndfile's writer takes for it
WRITTEN = sorted(HEADER_CODECS)
ENDINGS = {"WAVEX": "wav", "AIFF": "aiff"}


def _torchcodec(source, name: str) -> tuple | str:
    """(rate, channels, frames, codec) from TorchCodec's own metadata, or the DataError's message."""
    try:
        metadata = decoding._open(source, name).metadata
        info = decoding._checked(decoding._open(source, name), name)
    except DataError as error:
        return str(error)
    return info.sample_rate, info.num_channels, round(metadata.duration_seconds * metadata.sample_rate), info.codec


def _ours(source, name: str) -> tuple | str:
    try:
        info = probe(source, name)
    except DataError as error:
        return str(error)
    return info.sample_rate, info.num_channels, round(info.duration * info.sample_rate), info.codec


def _read_by_soundfile(path: Path) -> bool:
    try:
        return decoding._probe_soundfile(str(path), path.name) is not None
    except DataError:  # read, and out of range as TorchCodec's reading is
        return True


def test_every_fixture_header_reads_as_torchcodec_reads_it(fixtures):
    clips = sorted(p for p in (fixtures / "audio").rglob("*") if p.suffix.lower() in SUFFIXES)
    by_soundfile = 0
    for path in clips:
        for source in (str(path), path.read_bytes()):
            assert _ours(source, path.name) == _torchcodec(source, path.name), path
        by_soundfile += _read_by_soundfile(path)
    assert len(clips) > 20 and by_soundfile >= 12  # WAV, FLAC and Vorbis, the hostile WAVs among them
    assert decoding._probe_soundfile(str(fixtures / "audio/speech/clips/s2.mp3"), "s2.mp3") is None


@pytest.mark.parametrize(("form", "subtype"), WRITTEN, ids=lambda value: str(value).lower())
def test_each_container_libsndfile_is_trusted_with_reads_as_torchcodec_reads_it(tmp_path, form, subtype):
    channels = 2 if subtype != "VORBIS" else 1
    path = tmp_path / f"clip.{ENDINGS.get(form, form.lower())}"
    signal = np.random.default_rng(3).uniform(-0.5, 0.5, (7000, channels))
    soundfile.write(path, signal, 16000, subtype=subtype, format=form)
    assert decoding._probe_soundfile(str(path), path.name) is not None
    assert _ours(str(path), path.name) == _torchcodec(str(path), path.name)


def test_formats_that_count_frames_otherwise_go_to_torchcodec(tmp_path):
    path = tmp_path / "clip.wav"
    soundfile.write(path, np.zeros(4000), 16000, subtype="MS_ADPCM")  # libsndfile counts 4048 frames, FFmpeg 4000
    assert decoding._probe_soundfile(str(path), path.name) is None
    assert _ours(str(path), path.name) == _torchcodec(str(path), path.name)


def _lying_flac(folder: Path) -> Path:
    """A second of 16-bit FLAC whose STREAMINFO claims ten."""
    path = folder / "lies.flac"
    soundfile.write(path, np.zeros(16000, dtype=np.int16), 16000, subtype="PCM_16")
    data = bytearray(path.read_bytes())
    field = int.from_bytes(data[18:26], "big")  # STREAMINFO's last 36 bits of these count the samples
    total = field & (2**36 - 1)
    data[18:26] = (field - total + 10 * total).to_bytes(8, "big")
    path.write_bytes(bytes(data))
    return path


def test_a_header_that_lies_is_named_when_the_clip_is_decoded(tmp_path):
    path = _lying_flac(tmp_path)
    info = probe(str(path), path.name)
    assert info.duration == 10.0 and _ours(str(path), path.name) == _torchcodec(str(path), path.name)
    for fixed_point in (False, True):
        with pytest.raises(DataError, match=r"lies\.flac: decodes to 1\.000 s, its header said 10\.000 s"):
            decode(str(path), path.name, sample_rate=16000, num_channels=1, max_seconds=60, expected=info.duration,
                   fixed_point=fixed_point)
