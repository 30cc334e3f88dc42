"""LogMel against librosa (the oracle): log(melspectrogram(power=2) + 1e-6) within 1e-3 on
speech-like clips, Slaney and HTK scales, several FFT sizes and rates, batched as one by one."""

from pathlib import Path

import numpy as np
import pytest
import torch

from recipes.audio import LogMel, SpeechDataset, audio_collate

librosa = pytest.importorskip("librosa")


@pytest.fixture(scope="module")
def clips(fixtures: Path):
    dataset = SpeechDataset(fixtures / "audio" / "speech" / "manifest.jsonl")
    return [dataset[i]["audio"][0] for i in range(len(dataset))]


@pytest.mark.parametrize("htk", [False, True], ids=["slaney", "htk"])
@pytest.mark.parametrize(("rate", "n_fft", "hop", "mels"),
                         [(16000, 400, 160, 80), (16000, 512, 128, 64), (8000, 256, 80, 40)])
def test_log_mel_equals_the_log_of_librosas_mel_power(clips, htk, rate, n_fft, hop, mels):
    log_mel = LogMel(rate, n_fft, hop, mels, htk=htk)
    for clip in clips:
        expected = np.log(librosa.feature.melspectrogram(
            y=clip.numpy(), sr=rate, n_fft=n_fft, hop_length=hop, n_mels=mels, power=2.0, htk=htk) + 1e-6)
        got = log_mel(clip[None])[0]
        assert got.shape == expected.shape
        assert np.abs(got.numpy() - expected).max() < 1e-3


def test_filters_equal_librosas(clips):
    for htk in (False, True):
        ours = LogMel(22050, 1024, 256, 96, htk=htk, f_min=30.0, f_max=8000.0).filters.numpy()
        theirs = librosa.filters.mel(sr=22050, n_fft=1024, n_mels=96, fmin=30.0, fmax=8000.0, htk=htk)
        assert np.abs(ours - theirs).max() < 1e-6


def test_a_padded_batch_gives_each_clips_own_frames(clips):
    log_mel = LogMel(16000, 400, 160, 80)
    batch = audio_collate([{"audio": clip[None]} for clip in clips])
    features = log_mel(batch["audio"])
    frames = log_mel.frames(batch["audio_lengths"])
    assert features.shape[:2] == (len(clips), 80)
    for row, clip in enumerate(clips):
        alone = log_mel(clip[None])[0]
        assert alone.shape[-1] == int(frames[row])
        inner = alone.shape[-1] - 3  # the last centred frames see the padding instead of the zero pad
        assert torch.allclose(features[row, :, :inner], alone[:, :inner], atol=1e-4)


@pytest.mark.gpu
def test_log_mel_on_the_gpu_equals_the_cpu_result(clips):
    log_mel = LogMel(16000, 400, 160, 80)
    batch = audio_collate([{"audio": clip[None]} for clip in clips])["audio"]
    on_cpu = log_mel(batch)
    on_gpu = log_mel.to("cuda")(batch.to("cuda")).cpu()
    assert on_gpu.shape == on_cpu.shape and torch.allclose(on_gpu, on_cpu, atol=1e-3)
