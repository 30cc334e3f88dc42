"""16-bit PCM at the target rate crosses from the workers as its int16 samples (FixedPoint) and
becomes, on the device or in the main process, exactly the float batch; anything resampled, mixed
or decoded to float stays float32; items read alone stay float32; LogMel takes either."""

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile
import torch
from torchcodec.decoders import AudioDecoder

from recipes.audio import AudioCollate, AudioFolderDataset, LogMel, SpeechDataset, audio_loader, decode
from recipes.audio import decoding
from recipes.core import MixedDataset
from recipes.core.loading.device import DevicePrefetcher
from recipes.core.contracts.fixed_point import FixedPoint, fixed_to_float

RATE = 16000


def _write(path: Path, seconds: float, *, rate: int = RATE, channels: int = 1, subtype: str = "PCM_16") -> Path:
    rng = np.random.default_rng(len(path.name) + round(seconds * 100))
    samples = rng.integers(-(2**15), 2**15, (round(seconds * rate), channels), dtype=np.int16)
    samples[:2] = [[-(2**15)] * channels, [2**15 - 1] * channels]  # both extremes
    path.parent.mkdir(parents=True, exist_ok=True)
    soundfile.write(path, samples if subtype == "PCM_16" else samples / 2**15, rate, subtype=subtype)
    return path


def _oracle(path: Path, mono: bool = True) -> torch.Tensor:
    samples = AudioDecoder(str(path), sample_rate=RATE).get_all_samples().data
    return (samples.mean(0, keepdim=True) if mono else samples).clamp(-1, 1)


@pytest.mark.parametrize("suffix", ["wav", "flac"])
@pytest.mark.parametrize(("channels", "num_channels"), [(1, 1), (1, None), (2, None)])
def test_16_bit_pcm_at_the_rate_decodes_to_its_samples_with_or_without_soundfile(
        tmp_path, monkeypatch, suffix, channels, num_channels):
    path = _write(tmp_path / f"clip.{suffix}", 0.4, channels=channels)
    options = {"sample_rate": RATE, "num_channels": num_channels, "max_seconds": 60}
    stored = torch.from_numpy(soundfile.read(path, dtype="int16", always_2d=True)[0].T.copy())
    for available in (True, False):
        with monkeypatch.context() as patch:
            if not available:
                patch.setattr(decoding, "_soundfile", lambda: None)
            fixed = decode(str(path), path.name, **options, fixed_point=True)
            assert isinstance(fixed, FixedPoint) and fixed.dtype == torch.int16
            assert torch.equal(fixed.as_subclass(torch.Tensor), stored)
            floats = decode(str(path), path.name, **options)
            assert type(floats) is torch.Tensor and torch.equal(fixed_to_float(fixed), floats)
            assert torch.equal(floats, _oracle(path, mono=num_channels == 1))


@pytest.mark.parametrize(("rate", "channels", "subtype"), [(8000, 1, "PCM_16"), (RATE, 2, "PCM_16"),
                                                           (RATE, 1, "PCM_24"), (RATE, 1, "FLOAT")],
                         ids=["resampled", "mixed-to-one", "24-bit", "float"])
def test_anything_computed_or_not_16_bit_stays_float32(tmp_path, rate, channels, subtype):
    path = _write(tmp_path / "clip.wav", 0.3, rate=rate, channels=channels, subtype=subtype)
    audio = decode(str(path), path.name, sample_rate=RATE, num_channels=1, max_seconds=60, fixed_point=True)
    assert type(audio) is torch.Tensor and audio.dtype == torch.float32
    assert torch.equal(audio, _oracle(path))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """Ten 16-bit clips at 16 kHz (WAV and FLAC), a manifest of them, and one of them plus an 8 kHz clip."""
    root = tmp_path_factory.mktemp("pcm")
    rows = []
    for k in range(10):
        name = f"clips/{k}.{'wav' if k % 2 else 'flac'}"
        _write(root / name, 0.2 + 0.05 * k)
        rows.append({"audio": name, "text": f"clip {k}"})
    (root / "manifest.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    _write(root / "clips/slow.wav", 0.3, rate=8000)
    mixed_rows = [rows[0], {"audio": "clips/slow.wav", "text": "resampled"}]
    (root / "mixed.jsonl").write_text("".join(json.dumps(row) + "\n" for row in mixed_rows), encoding="utf-8")
    return root


def test_int16_batches_from_workers_equal_the_float_batches_after_scaling(corpus):
    dataset = SpeechDataset(corpus / "manifest.jsonl")
    options = {"batch_size": 4, "train": False, "device": "cpu", "num_workers": 1}
    fixed = list(audio_loader(dataset, **options))
    floats = list(audio_loader(dataset, **options, collate_fn=AudioCollate(float_audio=True)))
    prefetched = list(DevicePrefetcher(audio_loader(dataset, **options), "cpu"))
    assert len(fixed) == len(floats) == len(prefetched) == 3
    for raw, float_batch, made in zip(fixed, floats, prefetched):
        assert isinstance(raw["audio"], FixedPoint) and raw["audio"].dtype == torch.int16
        assert type(float_batch["audio"]) is torch.Tensor and float_batch["audio"].dtype == torch.float32
        assert type(made["audio"]) is torch.Tensor and torch.equal(made["audio"], float_batch["audio"])
        assert torch.equal(fixed_to_float(raw["audio"]), float_batch["audio"])
        assert torch.equal(LogMel(RATE, 400, 160, 40)(raw["audio"]), LogMel(RATE, 400, 160, 40)(made["audio"]))
        for row, index in enumerate(raw["index"].tolist()):
            length = int(raw["audio_lengths"][row])
            assert torch.equal(made["audio"][row, :length], _oracle(corpus / dataset.source(index))[0])
    assert dataset[0]["audio"].dtype == torch.float32 and not dataset.fixed_point  # the loader read a copy


def test_a_batch_with_a_resampled_clip_stays_float32_and_mixtures_keep_the_int16_path(corpus):
    mixed = SpeechDataset(corpus / "mixed.jsonl")
    (batch,) = audio_loader(mixed, batch_size=2, train=False, device="cpu", num_workers=0)
    assert type(batch["audio"]) is torch.Tensor and batch["audio"].dtype == torch.float32
    alone = [mixed[i]["audio"] for i in range(2)]
    for row, clip in enumerate(alone):
        assert torch.equal(batch["audio"][row, : clip.shape[-1]], clip[0])
    pcm = SpeechDataset(corpus / "manifest.jsonl")
    mixture = MixedDataset([pcm, pcm], weights=[1, 1])
    batches = list(audio_loader(mixture, batch_size=4, train=False, device="cpu", num_workers=0))
    assert all(isinstance(batch["audio"], FixedPoint) for batch in batches) and len(batches) == 5


def test_a_clip_folder_of_16_bit_pcm_crosses_as_int16_under_spawn(corpus, tmp_path):
    for k in range(4):
        _write(tmp_path / "folder" / f"class{k % 2}" / f"{k}.wav", 0.25)
    dataset = AudioFolderDataset(tmp_path / "folder", clip_seconds=0.2)
    loader = audio_loader(dataset, batch_size=2, train=True, seed=1, device="cpu", num_workers=1,
                          multiprocessing_context="spawn")
    batches = list(loader)
    assert len(batches) == 2 and all(isinstance(batch["audio"], FixedPoint) for batch in batches)
    assert all(batch["audio"].shape == (2, round(0.2 * RATE)) for batch in batches)
