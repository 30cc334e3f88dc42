"""Which frames make a clip: its length and step, where each clip of a video starts, what a short video gives.

    sampling = ClipSampling(frames_per_clip=16, frame_step=2, clips_per_video=5)
    sampling.positions(count=300, clip=2, random=False)   # int64 [16]: the middle one of 5 evenly spaced clips
    sampling.positions(count=300, clip=0, random=True)    # a start drawn from torch's generator

A clip covers ``span = (frames_per_clip - 1) * frame_step + 1`` frames of its video (or of the
video's segment). In evaluation, clip ``k`` of ``K`` starts at ``linspace(0, count - span, K)[k]``,
truncated: the first at the start, the last at the end, the rest evenly between, as TorchCodec's
``clips_at_regular_indices`` places them (one clip: the first), so per-video predictions average
over the whole video. In training the start is drawn uniformly from ``[0, count - span]`` with
torch's generator, which the presets seed per sample by ``(seed, epoch, index)``.

A video shorter than a clip (``short=``): ``"repeat_last"`` repeats its last frame (the policy of
TorchCodec's samplers), ``"wrap"`` starts its frames again from the first, ``"skip"`` leaves it out
of the index with a warning and ``"raise"`` makes it a DataError when the dataset is built.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np
import torch

SHORT_CHOICES = ("repeat_last", "wrap", "skip", "raise")


@dataclass(frozen=True)
class ClipSampling:
    """How clips are cut from a video (see the module docstring).

    Args:
        frames_per_clip: frames in a clip, T.
        frame_step: take every ``frame_step``-th frame (2 halves the frame rate a clip sees).
        clips_per_video: clips each video gives; a dataset has ``videos x clips_per_video`` items.
        short: what a video shorter than a clip gives: one of :data:`SHORT_CHOICES`.
    """

    frames_per_clip: int = 16
    frame_step: int = 1
    clips_per_video: int = 1
    short: str = "repeat_last"

    def __post_init__(self) -> None:
        for name in ("frames_per_clip", "frame_step", "clips_per_video"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        if self.short not in SHORT_CHOICES:
            raise ValueError(f"short must be one of {SHORT_CHOICES}, got {self.short!r}")

    @property
    def span(self) -> int:
        """Frames of the video one clip covers, from its first frame to its last."""
        return (self.frames_per_clip - 1) * self.frame_step + 1

    def start(self, count: int, clip: int, random: bool) -> int:
        """Where clip ``clip`` of a ``count``-frame video starts: drawn (``random``) or evenly spaced."""
        room = max(count - self.span, 0)
        if random:
            return int(torch.randint(0, room + 1, ()))  # torch's generator: what the presets seed per sample
        return int(torch.linspace(0, room, steps=self.clips_per_video, dtype=torch.int)[clip])

    def positions(self, count: int, clip: int, random: bool) -> np.ndarray:
        """The clip's frames as positions in ``[0, count)``, int64 ``[frames_per_clip]``; a video
        shorter than a clip is filled by ``short`` (``"repeat_last"`` or ``"wrap"``)."""
        start = self.start(count, clip, random)
        wanted = start + np.arange(self.frames_per_clip, dtype=np.int64) * self.frame_step
        valid = wanted[wanted < count]
        if len(valid) == len(wanted):
            return wanted
        if self.short == "wrap":
            return np.resize(valid, self.frames_per_clip)  # repeats the valid frames from the first
        return np.concatenate([valid, np.full(len(wanted) - len(valid), valid[-1], dtype=np.int64)])
