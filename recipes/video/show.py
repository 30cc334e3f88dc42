"""``recipes show video PATH``: each clip of a batch as a strip of its frames, with its label and file.

    images, captions = strips(batch, dataset)   # the CLI lays them out under their captions

Up to :data:`FRAMES_SHOWN` frames of each clip, evenly spaced, side by side with a white gap,
enlarged by a whole factor (nearest neighbour) while shorter than :data:`MIN_SIDE`, so that every
pixel the model sees is there. Each strip's caption: the label and its class name, the file (and
clip), and the frame numbers shown. The batch is a ``video_loader`` batch, either layout.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np
import torch

from recipes.core import hooks

FRAMES_SHOWN = 8
MIN_SIDE = 96  # px: a smaller frame is enlarged
GAP = 2  # px of white between frames


def strips(batch: dict[str, Any], dataset: Any) -> tuple[list[torch.Tensor], list[list[str]]]:
    """Each clip of ``batch`` as uint8 ``[3, H, W]`` (its frames in a row) and its caption lines."""
    video = batch["video"].as_subclass(torch.Tensor)
    if video.ndim == 5 and video.shape[2] != 3:  # [B, 3, T, H, W]
        video = video.permute(0, 2, 1, 3, 4)
    classes = getattr(dataset, "classes", None) or []
    images, captions = [], []
    for clip, label, index, frames in zip(video, batch["label"].tolist(), batch["index"].tolist(), batch["frames"]):
        shown = np.unique(np.linspace(0, len(clip) - 1, min(FRAMES_SHOWN, len(clip))).round().astype(np.int64))
        images.append(strip(clip[torch.from_numpy(shown)]))
        name = str(dataset.describe(index)) if isinstance(dataset, hooks.Described) else f"#{index}"
        kind = f" {classes[label]}" if 0 <= label < len(classes) else ""
        numbers = ", ".join(str(int(frames[position])) for position in shown.tolist())
        captions.append([f"{label}{kind}", _short(name), f"frames {numbers}"])
    return images, captions


def strip(frames: torch.Tensor) -> torch.Tensor:
    """``frames`` (uint8 ``[N, 3, H, W]``) side by side, enlarged while smaller than :data:`MIN_SIDE`."""
    factor = max(1, math.ceil(MIN_SIDE / max(frames.shape[-2:])))
    frames = frames.repeat_interleave(factor, dim=-2).repeat_interleave(factor, dim=-1)
    count, _, height, width = frames.shape
    out = torch.full((3, height, count * width + (count - 1) * GAP), 255, dtype=torch.uint8)
    for position, frame in enumerate(frames):
        left = position * (width + GAP)
        out[:, :, left : left + width] = frame
    return out


def _short(name: str) -> str:
    """A file as the last two parts of its path; a manifest's line and the clip number kept."""
    path, _, rest = name.partition(", clip")
    line, _, inner = path.rpartition(" (")
    parts = (inner.removesuffix(")") if line else path).replace(os.sep, "/").split("/")
    short = "/".join(parts[-2:])
    return (f"{line} ({short})" if line else short) + (", clip" + rest if rest else "")
