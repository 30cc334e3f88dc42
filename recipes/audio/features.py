"""Log-mel spectrograms on the device, per batch: ``torch.stft`` and a mel filter bank.

    log_mel = LogMel(16000, n_fft=400, hop_length=160, n_mels=80).to("cuda")
    for batch in loader:   # audio: float32, or int16 FixedPoint (16-bit PCM as stored); either is read
        features = log_mel(batch["audio"].to("cuda", non_blocking=True))   # [B, 80, frames]
        frames = log_mel.frames(batch["audio_lengths"])                   # real frames per clip

The result is ``log(librosa.feature.melspectrogram(y, sr=..., n_fft=..., hop_length=...,
n_mels=..., power=2.0) + eps)`` (tests/audio/test_features.py holds librosa as the oracle, within
1e-3): periodic Hann window, frames centred with zero padding of ``n_fft // 2`` on each side
(librosa's ``center=True``, ``pad_mode="constant"``), the Slaney or HTK mel scale, Slaney area
normalisation. Doing it per batch on the GPU keeps workers decoding instead of transforming, as
image normalisation is left to ``DevicePrefetcher``; torchaudio's transform would do the same,
but torchaudio does not install beside this torch.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from recipes.core import FixedPoint, checks, fixed_to_float

_SLANEY_STEP = 200.0 / 3  # Hz per mel below 1 kHz
_SLANEY_LOG_STEP = math.log(6.4) / 27.0  # mels above 1 kHz are logarithmic


def hz_to_mel(hz: np.ndarray, *, htk: bool) -> np.ndarray:
    """Frequencies to mels, on librosa's HTK or Slaney (linear below 1 kHz, log above) scale."""
    hz = np.asarray(hz, dtype=np.float64)
    if htk:
        return 2595.0 * np.log10(1.0 + hz / 700.0)
    mels = hz / _SLANEY_STEP
    high = hz >= 1000.0
    return np.where(high, 1000.0 / _SLANEY_STEP + np.log(np.maximum(hz, 1e-10) / 1000.0) / _SLANEY_LOG_STEP, mels)


def mel_to_hz(mels: np.ndarray, *, htk: bool) -> np.ndarray:
    """The inverse of :func:`hz_to_mel`."""
    mels = np.asarray(mels, dtype=np.float64)
    if htk:
        return 700.0 * (10.0 ** (mels / 2595.0) - 1.0)
    low_top = 1000.0 / _SLANEY_STEP
    return np.where(mels >= low_top, 1000.0 * np.exp(_SLANEY_LOG_STEP * (mels - low_top)), _SLANEY_STEP * mels)


def mel_filters(sample_rate: int, n_fft: int, n_mels: int, *, f_min: float = 0.0, f_max: float | None = None,
                htk: bool = False, norm: str | None = "slaney") -> torch.Tensor:
    """Triangular mel filters, float32 ``[n_mels, n_fft // 2 + 1]``, as ``librosa.filters.mel`` builds them."""
    if norm not in ("slaney", None):
        raise ValueError(f"norm must be 'slaney' or None, got {norm!r}")
    f_max = sample_rate / 2.0 if f_max is None else float(f_max)
    bins = np.linspace(0.0, sample_rate / 2.0, 1 + n_fft // 2)
    edges = mel_to_hz(np.linspace(hz_to_mel(f_min, htk=htk), hz_to_mel(f_max, htk=htk), n_mels + 2), htk=htk)
    widths = np.diff(edges)
    ramps = edges[:, None] - bins[None, :]
    rising = -ramps[:-2] / widths[:-1, None]
    falling = ramps[2:] / widths[1:, None]
    weights = np.maximum(0.0, np.minimum(rising, falling))
    if norm == "slaney":  # each filter's area is equal: a wide high band does not dominate
        weights *= (2.0 / (edges[2 : n_mels + 2] - edges[:n_mels]))[:, None]
    return torch.from_numpy(weights.astype(np.float32))


class LogMel(nn.Module):
    """``audio [..., T]`` -> ``log(mel power + eps)`` ``[..., n_mels, frames]``, frames = ``1 + T // hop_length``.

    ``audio`` is float, or integer samples standing for ``x / 2**(bits - 1)`` (an int16
    ``FixedPoint`` batch of 16-bit PCM), which give the features of their float decode.

    Args:
        sample_rate: of the audio.
        n_fft: FFT size (and the window's length unless ``win_length``).
        hop_length: samples between frames (160 = 10 ms at 16 kHz).
        n_mels: mel bands.
        win_length: the Hann window's length, zero-padded to ``n_fft`` (default ``n_fft``).
        f_min, f_max: the band the filters cover (default 0 to the Nyquist frequency).
        htk: the HTK mel scale instead of Slaney's (librosa's ``htk=True``).
        norm: ``"slaney"`` (equal-area filters, librosa's default) or None (peak 1).
        eps: added before the log, so silence (and padding) stays finite: ``log(eps)``.

    Buffers (window, filters) follow ``.to(device)``; the input's dtype is computed in float32.
    """

    def __init__(self, sample_rate: int, n_fft: int, hop_length: int, n_mels: int, *, win_length: int | None = None,
                 f_min: float = 0.0, f_max: float | None = None, htk: bool = False, norm: str | None = "slaney",
                 eps: float = 1e-6) -> None:
        super().__init__()
        for name, value in (("sample_rate", sample_rate), ("n_fft", n_fft), ("hop_length", hop_length), ("n_mels", n_mels)):
            checks.check_count(name, value, owner="LogMel", none=False)
        self.sample_rate, self.n_fft, self.hop_length, self.n_mels = sample_rate, n_fft, hop_length, n_mels
        self.win_length = n_fft if win_length is None else win_length
        if not 0 < self.win_length <= n_fft:
            raise ValueError(f"win_length must be in [1, n_fft={n_fft}], got {win_length}")
        self.eps = float(eps)
        self.register_buffer("window", torch.hann_window(self.win_length, periodic=True), persistent=False)
        filters = mel_filters(sample_rate, n_fft, n_mels, f_min=f_min, f_max=f_max, htk=htk, norm=norm)
        self.register_buffer("filters", filters, persistent=False)

    def forward(self, audio: torch.Tensor) -> torch.Tensor:
        if not audio.is_floating_point():  # full-scale integers: what a FixedPoint batch stands for
            audio = fixed_to_float(audio.as_subclass(FixedPoint))
        shape = audio.shape
        flat = audio.reshape(-1, shape[-1]).to(torch.float32)
        spectrum = torch.stft(flat, self.n_fft, self.hop_length, self.win_length, window=self.window, center=True,
                              pad_mode="constant", return_complex=True)
        power = spectrum.real.square() + spectrum.imag.square()
        mel = torch.matmul(self.filters, power)
        return torch.log(mel + self.eps).reshape(*shape[:-1], self.n_mels, mel.shape[-1])

    def frames(self, lengths: torch.Tensor) -> torch.Tensor:
        """Frames that hold real audio for clips of ``lengths`` samples (``audio_lengths``), centred frames counted."""
        return 1 + torch.div(lengths, self.hop_length, rounding_mode="floor")

    def extra_repr(self) -> str:
        return f"sample_rate={self.sample_rate}, n_fft={self.n_fft}, hop_length={self.hop_length}, n_mels={self.n_mels}"
