"""``recipes show audio``: each clip of a batch as its waveform over its log-mel spectrogram, with its words.

    picture = render_clips(batch, sample_rate=16000, names=["tone/t0.mp3", ...], captions=[["2 tone"], ...])

One row per clip, all on one time scale (the batch's padded length spans ``WIDTH`` pixels), so
durations compare at a glance and the padding each clip gets (shaded grey, with its seconds)
shows what a duration-grouped batch saves. The waveform is drawn as the min-max envelope of the
samples under each pixel column; the spectrogram is :class:`recipes.audio.LogMel` (64 mel bands,
25 ms windows, 10 ms hops at 16 kHz; scaled with the rate), the batch's loudest bin white-yellow
and everything ``DYNAMIC_RANGE`` below it black. Under each row: the file and its duration, then
the label or the transcript.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from PIL import Image, ImageDraw

from recipes.audio import LogMel
from recipes.cli.drawing import LINE_HEIGHT, fit, text_band, wrap
from recipes.core.contracts.fixed_point import fixed_to_float

WIDTH = 1000  # px: the padded batch length
WAVE_HEIGHT = 80  # px for the waveform, +-1 full scale
N_MELS = 64
MEL_HEIGHT = 2 * N_MELS  # px: two rows a band, low frequencies at the bottom
DYNAMIC_RANGE = 80.0  # dB below the batch's loudest bin that still get a colour
MAX_TEXT_LINES = 3  # transcript lines under a row
ROW_GAP = 6  # px of white between rows
PADDING_SHADE = (225, 225, 225)
# a dark-to-bright colour ramp (black, purple, red, orange, pale yellow), evenly spaced
RAMP = np.array([(0, 0, 4), (87, 16, 110), (188, 55, 84), (249, 142, 9), (252, 255, 164)], dtype=np.float64)


def colour_ramp(values: np.ndarray) -> np.ndarray:
    """``values`` in [0, 1] -> uint8 RGB ``[..., 3]`` along ``RAMP``."""
    position = np.clip(values, 0.0, 1.0) * (len(RAMP) - 1)
    low = np.minimum(position.astype(np.int64), len(RAMP) - 2)
    part = (position - low)[..., None]
    return np.round(RAMP[low] * (1 - part) + RAMP[low + 1] * part).astype(np.uint8)


def waveform_band(clip: torch.Tensor, length: int, total: int) -> Image.Image:
    """The envelope of ``clip[:length]`` (mono float [T]) on a ``WIDTH`` x ``WAVE_HEIGHT`` band where
    ``total`` samples span the width; the columns past ``length`` shaded as padding."""
    band = Image.new("RGB", (WIDTH, WAVE_HEIGHT), "white")
    draw = ImageDraw.Draw(band)
    used = max(1, round(WIDTH * length / total))
    if used < WIDTH:
        draw.rectangle((used, 0, WIDTH - 1, WAVE_HEIGHT - 1), fill=PADDING_SHADE)
    middle = (WAVE_HEIGHT - 1) / 2
    draw.line((0, round(middle), WIDTH - 1, round(middle)), fill=(200, 200, 200))
    samples = clip[:length].numpy()
    edges = np.linspace(0, length, used + 1).astype(np.int64)
    for column in range(used):
        piece = samples[edges[column] : max(edges[column + 1], edges[column] + 1)]
        top, bottom = float(piece.max()), float(piece.min())
        draw.line((column, round(middle - top * middle), column, round(middle - bottom * middle)), fill=(31, 90, 160))
    return band


def spectrogram_band(log_mel: torch.Tensor, frames: int, used: int, floor: float, peak: float) -> Image.Image:
    """``log_mel [N_MELS, F]`` (natural log of power) as a ``WIDTH`` x ``MEL_HEIGHT`` picture: the first
    ``frames`` frames coloured from ``floor`` (black) to ``peak`` (pale yellow) over the first ``used``
    columns (the waveform's, so the two line up), the rest padding."""
    real = log_mel[:, :frames].flip(0).numpy()  # low bands at the bottom
    colours = colour_ramp((real - floor) / max(peak - floor, 1e-6))
    picture = Image.new("RGB", (WIDTH, MEL_HEIGHT), PADDING_SHADE)
    picture.paste(Image.fromarray(colours).resize((used, MEL_HEIGHT), Image.Resampling.NEAREST), (0, 0))
    return picture


def render_clips(batch: dict, *, sample_rate: int, names: Sequence[str], captions: Sequence[Sequence[str]]) -> Image.Image:
    """The picture of an ``audio_collate`` batch (``audio`` [B, T] or [B, C, T] and ``audio_lengths``):
    a row per clip with its waveform, spectrogram, ``names[i]`` and duration, then ``captions[i]``."""
    audio, lengths = fixed_to_float(batch["audio"]), batch["audio_lengths"]  # 16-bit PCM crosses as int16
    if audio.dim() == 3:  # several channels: drawn as their mean, as the mono decode mixes them
        audio = audio.mean(dim=1)
    total = max(1, audio.shape[-1])
    scale = sample_rate / 16000
    features = LogMel(sample_rate, n_fft=round(512 * scale), hop_length=max(1, round(160 * scale)),
                      win_length=round(400 * scale), n_mels=N_MELS)
    with torch.no_grad():
        log_mel = features(audio)
    frames = features.frames(lengths).tolist()
    real = torch.cat([log_mel[row, :, :count].flatten() for row, count in enumerate(frames)])
    peak = float(real.max()) if real.numel() else 0.0
    floor = peak - DYNAMIC_RANGE * np.log(10) / 10  # dB of power, in natural-log units
    lines = max(len(caption) for caption in captions) + 1
    row_height = WAVE_HEIGHT + MEL_HEIGHT + LINE_HEIGHT * lines + ROW_GAP
    canvas = Image.new("RGB", (WIDTH, row_height * len(names)), "white")
    for row, (name, caption) in enumerate(zip(names, captions)):
        length, top = int(lengths[row]), row * row_height
        canvas.paste(waveform_band(audio[row], length, total), (0, top))
        used = max(1, round(WIDTH * length / total))
        canvas.paste(spectrogram_band(log_mel[row], frames[row], used, floor, peak), (0, top + WAVE_HEIGHT))
        padded = (total - length) / sample_rate
        heading = f"{name}   {length / sample_rate:.2f} s" + (f" + {padded:.2f} s padding" if padded else "")
        text = text_band([fit(heading, WIDTH - 4), *caption] + [""] * (lines - 1 - len(caption)), WIDTH)
        canvas.paste(Image.fromarray(text.permute(1, 2, 0).numpy()), (0, top + WAVE_HEIGHT + MEL_HEIGHT))
    return canvas


def transcript_lines(text: str) -> list[str]:
    """A transcript wrapped to the picture's width, at most ``MAX_TEXT_LINES`` lines, quoted."""
    return wrap(f"\u201c{text}\u201d", WIDTH - 4, MAX_TEXT_LINES)
