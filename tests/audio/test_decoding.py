"""recipes.audio.decoding's two decoders against TorchCodec's own decode of the same file.

PCM WAV and FLAC at the target rate are read by libsndfile (soundfile); every sample must equal
``AudioDecoder(path, sample_rate=...).get_all_samples()`` bit for bit (mono: the mean of the
channels, clipped to [-1, 1]), and every bad-input rule must read as it does through TorchCodec.
"""

import io
from pathlib import Path

import numpy as np
import pytest
import soundfile
import torch
from torchcodec.decoders import AudioDecoder

from recipes.audio import decoding
from recipes.audio.decoding import decode
from recipes.core.contracts.errors import DataError

RATE = 16000
# (extension, soundfile subtype): what the fast path takes
PCM = [("wav", "PCM_16"), ("wav", "PCM_24"), ("wav", "FLOAT"), ("flac", "PCM_16"), ("flac", "PCM_24"),
       ("wavex", "PCM_24"), ("wavex", "FLOAT")]  # wavex: WAV with WAVE_FORMAT_EXTENSIBLE
HOSTILE = ("truncated.flac", "empty.wav", "not_audio.mp3", "hours.wav", "bad_rate.wav", "bad_channels.wav",
           "unsupported.wav")


def _signal(channels: int, subtype: str, seconds: float = 0.7) -> np.ndarray:
    """Noise over the whole range, both extremes included; float files also go past [-1, 1]."""
    rng = np.random.default_rng(channels)
    data = rng.uniform(-1.0, 1.0, (round(seconds * RATE), channels))
    data[:4] = [[-1.0], [1.0], [0.0], [-0.5]]
    if subtype == "FLOAT":
        data[4:8] = [[1.5], [-2.0], [1.0 + 2**-20], [3e-8]]
    return data


def _write(folder: Path, extension: str, subtype: str, channels: int, rate: int = RATE) -> Path:
    path = folder / f"{extension}_{subtype.lower()}_{channels}ch_{rate}.{extension.replace('wavex', 'wav')}"
    soundfile.write(path, _signal(channels, subtype), rate, subtype=subtype, format=extension.upper())
    return path


def _oracle(path: Path, sample_rate: int, mono: bool) -> torch.Tensor:
    samples = AudioDecoder(str(path), sample_rate=sample_rate).get_all_samples().data
    return (samples.mean(0, keepdim=True) if mono else samples).clamp(-1, 1)


def _both(monkeypatch: pytest.MonkeyPatch, call):
    """``call()`` with soundfile, then without it (TorchCodec alone): each result or DataError message."""
    results = []
    for available in (True, False):
        with monkeypatch.context() as patch:
            if not available:
                patch.setattr(decoding, "_soundfile", lambda: None)
            try:
                results.append(call())
            except DataError as error:
                results.append(str(error))
    return results


@pytest.mark.parametrize(("extension", "subtype"), PCM)
@pytest.mark.parametrize("channels", [1, 2])
def test_pcm_wav_and_flac_decode_bit_for_bit_as_torchcodec(tmp_path, extension, subtype, channels):
    path = _write(tmp_path, extension, subtype, channels)
    assert decoding._decode_pcm(str(path), path.name, RATE, 60.0) is not None, "libsndfile did not read it"
    for num_channels in (1, None):
        audio = decode(str(path), path.name, sample_rate=RATE, num_channels=num_channels, max_seconds=60)
        expected = _oracle(path, RATE, mono=num_channels == 1)
        assert audio.dtype == torch.float32 and audio.is_contiguous()
        assert audio.shape == expected.shape and torch.equal(audio, expected), (path.name, num_channels)
        from_bytes = decode(path.read_bytes(), path.name, sample_rate=RATE, num_channels=num_channels, max_seconds=60)
        assert torch.equal(from_bytes, expected)
    assert audio.abs().max() <= 1.0


def test_the_fixtures_decode_as_torchcodec_does_with_or_without_soundfile(fixtures, monkeypatch):
    clips = sorted(p for p in (fixtures / "audio").rglob("*") if p.suffix.lower() in (".wav", ".flac", ".mp3",
                                                                                      ".ogg", ".opus"))
    assert len(clips) > 15
    for path in clips:
        if path.parent.name == "hostile":
            continue
        rate = AudioDecoder(str(path)).metadata.sample_rate  # at its own rate: the fast path where it applies
        for mono in (True, False):
            options = {"sample_rate": rate, "num_channels": 1 if mono else None, "max_seconds": 60}
            with_soundfile, without = _both(monkeypatch, lambda: decode(str(path), path.name, **options))
            assert torch.equal(with_soundfile, without) and torch.equal(without, _oracle(path, rate, mono)), path


@pytest.mark.parametrize("name", HOSTILE)
@pytest.mark.parametrize("rate", [8000, 16000])
def test_bad_files_read_the_same_with_or_without_soundfile(fixtures, monkeypatch, name, rate):
    path = fixtures / "audio" / "hostile" / name
    results = _both(monkeypatch, lambda: decode(str(path), str(path), sample_rate=rate, num_channels=1,
                                                max_seconds=60))
    if name != "hours.wav":
        assert isinstance(results[0], str) and str(path) in results[0], results[0]
        assert results[0] == results[1]
    else:  # 0.1 s of audio under a header that claims 37 hours: what the file holds, from either decoder
        assert [len(r[0]) for r in results] == [rate // 10, rate // 10]
        assert torch.equal(results[0], results[1])


def test_bad_channel_count_is_refused_by_the_fast_path_with_the_same_reason(fixtures):
    path = str(fixtures / "audio" / "hostile" / "bad_channels.wav")
    with pytest.raises(DataError, match="bad_channels.wav: channel count 200 is out of range"):
        decoding._decode_pcm(path, path, 8000, 60.0)


def test_max_seconds_refuses_a_long_file_before_decoding_and_bounds_the_read(tmp_path, monkeypatch):
    path = _write(tmp_path, "flac", "PCM_16", 1)  # 0.7 s
    results = _both(monkeypatch, lambda: decode(str(path), "clip.flac", sample_rate=RATE, num_channels=1,
                                                max_seconds=0.3))
    assert results == ["clip.flac: 0.70 s is over max_seconds=0.3; raise max_seconds"] * 2
    results = _both(monkeypatch, lambda: decode(str(path), "clip.flac", sample_rate=RATE, num_channels=1,
                                                max_seconds=0.5))
    assert results == ["clip.flac: decodes to more than max_seconds=0.5 (0.70 s in its header)"] * 2
    reads = []

    class Counting(soundfile.SoundFile):
        def read(self, frames=-1, *args, **kwargs):
            reads.append(frames)
            return super().read(frames, *args, **kwargs)

    monkeypatch.setattr(soundfile, "SoundFile", Counting)
    with pytest.raises(DataError, match="over max_seconds=0.2"):
        decode(str(path), "clip.flac", sample_rate=RATE, num_channels=1, max_seconds=0.2)
    assert reads == []  # refused from the header
    with pytest.raises(DataError, match=r"clip.flac: decodes to more than max_seconds=0.5 \(0.70 s in its header\)"):
        decode(str(path), "clip.flac", sample_rate=RATE, num_channels=1, max_seconds=0.5)
    assert reads == [round(0.7 * RATE)]  # what the file holds, under the bound of 0.75 s
    decode(str(path), "clip.flac", sample_rate=RATE, num_channels=1, max_seconds=0.7)
    assert reads == [round(0.7 * RATE)] * 2


@pytest.mark.parametrize(("extension", "subtype"), PCM)
def test_a_file_cut_anywhere_reads_as_torchcodec_reads_it(tmp_path, monkeypatch, extension, subtype):
    data = _write(tmp_path, extension, subtype, 2).read_bytes()
    frame = 2 * {"PCM_16": 2, "PCM_24": 3, "FLOAT": 4}[subtype]
    cuts = sorted({*range(len(data) // 3, len(data), 997), len(data) - 2 * frame, len(data) - 2 * frame + 1})
    refused = 0
    for cut in cuts:
        clip = data[:cut]
        with_soundfile, without = _both(monkeypatch, lambda: decode(clip, "cut", sample_rate=RATE,
                                                                    num_channels=None, max_seconds=60))
        if isinstance(without, str):
            refused += 1
            assert with_soundfile == without, cut
        else:
            assert torch.equal(with_soundfile, without), cut
    assert 0 < refused  # FFmpeg refuses a frame cut in two; libsndfile must not read it instead
    if extension != "flac":  # a cut between frames is read, by libsndfile
        assert decoding._decode_pcm(data[: len(data) - 2 * frame], "cut", RATE, 60.0) is not None


def test_other_rates_formats_and_sources_go_to_torchcodec(tmp_path):
    wav = _write(tmp_path, "wav", "PCM_16", 1)
    assert decoding._decode_pcm(str(wav), "a.wav", 8000, 60.0) is None  # resampled by FFmpeg
    assert decoding._decode_pcm(io.BytesIO(wav.read_bytes()), "a.wav", RATE, 60.0) is None  # a file object
    pcm32 = _write(tmp_path, "wav", "PCM_32", 1)
    assert decoding._decode_pcm(str(pcm32), "b.wav", RATE, 60.0) is None
    renamed = tmp_path / "c.mp3"
    renamed.write_bytes(wav.read_bytes())
    assert decoding._decode_pcm(str(renamed), "c.mp3", RATE, 60.0) is None
    audio = decode(str(pcm32), "b.wav", sample_rate=RATE, num_channels=1, max_seconds=60)
    assert torch.equal(audio, _oracle(pcm32, RATE, mono=True))


def test_decoders_names_the_libraries_in_use(monkeypatch):
    assert "soundfile" in decoding.decoders() and "TorchCodec" in decoding.decoders()
    monkeypatch.setattr(decoding, "_soundfile", lambda: None)
    assert decoding.decoders().startswith("TorchCodec") and '.[audio]' in decoding.decoders()
