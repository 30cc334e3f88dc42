"""Drawing helpers for ``recipes show``: a readable font, text bands, upscaling, labels that stay inside.

    image = upscale(image)                                # uint8 [3,H,W], longer side >= READABLE_SIDE
    boxes = place_labels(boxes, ["car", "dog"], (W, H))   # label rectangles, all inside the image
    band = text_band(wrap("a long caption", W, 3), W)     # black text on white, one row per line

Everything is drawn at ``FONT_SIZE`` in DejaVu Sans where the system or matplotlib has it, else
in PIL's own font (``ImageFont.load_default(size=...)``, Pillow >= 10.1): nothing to download. Small images are enlarged by a whole factor with
nearest-neighbour sampling, so every pixel the model sees is still there, only bigger.
"""

from __future__ import annotations

import functools
import importlib.util
import math
import os
from collections.abc import Sequence

import numpy as np
import torch
from PIL import Image, ImageDraw, ImageFont

FONT_SIZE = 14  # px; PIL's default of 10 px is hard to read next to a 200 px image
LINE_HEIGHT = 18  # px per line of text (ascent + descent at 14 px: 18 in PIL's font, 17 in DejaVu Sans)
DEJAVU = "DejaVuSans.ttf"  # Debian and Ubuntu install it with any desktop, matplotlib bundles it
READABLE_SIDE = 200  # px: an image whose longer side is shorter is enlarged by a whole factor until it is not
LABEL_PADDING = 2  # px between a label's text and the edge of its background box
# tokenizer markers shown as what they stand for (PIL's font has no glyph for them), and line breaks
STAND_INS = str.maketrans({"▁": "_", "Ġ": "_", "Ċ": "\\n", "\n": "\\n"})
Box = tuple[int, int, int, int]  # x0, y0, x1, y1 in pixels, x1 and y1 exclusive


@functools.cache
def font() -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    """DejaVu Sans at ``FONT_SIZE`` where the system or matplotlib has it (accented and most non-Latin
    letters: PIL's bundled font draws "é" as a box), else PIL's bundled font: nothing to download."""
    for candidate in _dejavu_files():
        try:
            return ImageFont.truetype(candidate, FONT_SIZE)
        except OSError:
            continue
    return ImageFont.load_default(size=FONT_SIZE)


def _dejavu_files() -> list[str]:
    """DejaVu Sans by name (PIL looks in the system's font folders), then matplotlib's copy if installed."""
    files = [DEJAVU]
    spec = importlib.util.find_spec("matplotlib")
    if spec is not None and spec.origin is not None:
        files.append(os.path.join(os.path.dirname(spec.origin), "mpl-data", "fonts", "ttf", DEJAVU))
    return files


def visible(text: str) -> str:
    """``text`` as drawn: the ``STAND_INS`` for characters the font cannot draw."""
    return text.translate(STAND_INS)


def text_width(text: str) -> int:
    return math.ceil(font().getlength(visible(text)))


def upscale_factor(height: int, width: int) -> int:
    """The smallest whole factor that brings the longer side to ``READABLE_SIDE`` (1 if it is there)."""
    return max(1, math.ceil(READABLE_SIDE / max(height, width, 1)))


def upscale(image: torch.Tensor, factor: int | None = None) -> torch.Tensor:
    """``uint8 [3,H,W]`` enlarged ``factor`` times (default :func:`upscale_factor`), each pixel a square."""
    factor = upscale_factor(*image.shape[-2:]) if factor is None else factor
    return image.repeat_interleave(factor, dim=-2).repeat_interleave(factor, dim=-1)


def fit(text: str, width: int) -> str:
    """``text``, cut and ended with an ellipsis if it is wider than ``width`` pixels."""
    if text_width(text) <= width:
        return text
    while text and text_width(text + "…") > width:
        text = text[:-1]
    return text + "…"


def wrap(text: str, width: int, max_lines: int) -> list[str]:
    """Greedy word wrap to ``width`` pixels, at most ``max_lines`` lines (the last ends in "…" if cut).

    A word wider than a line is broken between characters rather than drawn past the edge.
    """
    usable = width - 4
    lines: list[str] = []
    for piece in (part for word in text.split() for part in _broken(word, usable)):
        if lines and text_width(f"{lines[-1]} {piece}") <= usable:
            lines[-1] = f"{lines[-1]} {piece}"
        else:
            lines.append(piece)
    if len(lines) > max_lines:
        lines = lines[:max_lines]
        lines[-1] = fit(lines[-1] + " …", usable)
    return lines or [""]


def _broken(word: str, width: int) -> list[str]:
    """``word`` cut into pieces of at most ``width`` pixels (one character at the least)."""
    pieces = []
    while len(word) > 1 and text_width(word) > width:
        cut = len(word) - 1
        while cut > 1 and text_width(word[:cut]) > width:
            cut -= 1
        pieces.append(word[:cut])
        word = word[cut:]
    return pieces + [word]


def text_band(lines: Sequence[str], width: int) -> torch.Tensor:
    """``uint8 [3, LINE_HEIGHT * len(lines), width]``: black text on white, one row per line."""
    band = Image.new("RGB", (width, LINE_HEIGHT * len(lines)), "white")
    draw = ImageDraw.Draw(band)
    for row, line in enumerate(lines):
        draw.text((2, row * LINE_HEIGHT), visible(line), fill="black", font=font())
    return torch.from_numpy(np.array(band)).permute(2, 0, 1)


def ink(background: Sequence[int]) -> str:
    """Black or white, whichever reads better on ``background`` (ITU-R BT.601 luma)."""
    red, green, blue = background[:3]
    return "black" if 0.299 * red + 0.587 * green + 0.114 * blue > 140 else "white"


def label_size(text: str) -> tuple[int, int]:
    return text_width(text) + 2 * LABEL_PADDING, LINE_HEIGHT


def _overlap(a: Box, b: Box) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def place_labels(boxes: Sequence[Sequence[float]], texts: Sequence[str], size: tuple[int, int]) -> list[Box]:
    """Where to draw each box's label: a rectangle inside the ``(width, height)`` image.

    Tried in order: above the box's top-left corner, inside it at the top, below the box, inside
    at the bottom; the first that fits in the image and covers no label placed before wins, else
    the first that fits. Every position is clamped into the image, so no label is cut off.
    """
    width, height = size
    placed: list[Box] = []
    for (x0, y0, x1, y1), text in zip(boxes, texts):
        w, h = label_size(text)
        w, h = min(w, width), min(h, height)
        left = int(min(max(x0, 0), width - w))
        candidates = []
        for top in (y0 - h, y0, y1, y1 - h):
            top = int(min(max(top, 0), height - h))
            candidates.append((left, top, left + w, top + h))
        free = [box for box in candidates if not any(_overlap(box, other) for other in placed)]
        placed.append((free or candidates)[0])
    return placed


def draw_labels(picture: Image.Image, boxes: Sequence[Sequence[float]], texts: Sequence[str],
                colours: Sequence[tuple[int, int, int]]) -> list[Box]:
    """Draw each label on a background box of its colour (see :func:`place_labels`); returns the boxes."""
    draw = ImageDraw.Draw(picture)
    places = place_labels(boxes, texts, picture.size)
    for (x0, y0, x1, y1), text, colour in zip(places, texts, colours):
        draw.rectangle((x0, y0, x1 - 1, y1 - 1), fill=colour)
        draw.text((x0 + LABEL_PADDING, y0), visible(fit(text, x1 - x0 - 2 * LABEL_PADDING)), fill=ink(colour), font=font())
    return places
