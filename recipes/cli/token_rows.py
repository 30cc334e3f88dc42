"""The text picture of ``recipes show``: each sample's tokens as chips, its padding shaded, its label at the left.

    picture = render_tokens(batch, tokenizer)   # batch from text_collate; a PIL image

One block of lines per sample. The left column names the sample (``#index``, ``label`` when the
batch has labels, the token count); then one chip per token, in a colour of its id, holding
what the tokenizer's decoder makes of it (:func:`recipes.cli.token_text.token_pieces`: a gap
before a chip starts a word) or, without a decoder, the raw piece; then the padding as a dark
grey bar, ``PAD_CELL`` pixels per padded position. A sample longer than ``MAX_LINES`` lines
ends in "…"; the header says how much of the batch is padding.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

from recipes.cli.drawing import LINE_HEIGHT, font, ink, text_width, visible
from recipes.cli.token_text import has_decoder, token_pieces

WIDTH = 1100  # px of chips per line
MARGIN = 130  # px: the left column (index, label, length)
MAX_LINES = 4  # lines per sample; a longer sample ends in "…"
PAD_CELL = 6  # px per padded position
PAD_COLOUR = (64, 64, 64)  # padding: dark, plainly not a token (the chips are pastel)
CHIP_PADDING, GAP, WORD_GAP = 2, 1, 7  # px: inside a chip; between pieces of a word; between words
ELLIPSIS = "…"
HEADER = LINE_HEIGHT + 4  # px above the first sample: the batch's shape and padding share


@dataclass
class Chip:
    """One drawn rectangle of a row: a token (``text`` as decoded), the padding, or the final "…"."""

    x: int
    line: int
    width: int
    text: str
    kind: str  # "token", "pad" or "more"
    token_id: int = -1


def token_colours(ids: np.ndarray) -> np.ndarray:
    """``uint8 [..., 3]``: a pastel colour per token id, the same id always the same colour."""
    hue = (ids.astype(np.float64) * 0.618034) % 1.0
    sector, fraction = np.floor(hue * 6).astype(int) % 6, hue * 6 - np.floor(hue * 6)
    value, low = 0.97, 0.97 * (1 - 0.35)
    falling, rising = value - (value - low) * fraction, low + (value - low) * fraction
    table = np.stack([
        np.choose(sector, [value, falling, low, low, rising, value]),
        np.choose(sector, [rising, value, value, falling, low, low]),
        np.choose(sector, [low, low, rising, value, value, falling]),
    ], axis=-1)
    return np.round(255 * table).astype(np.uint8)


def shown(piece: str) -> str:
    """What a chip shows of a decoded piece: no word-starting space (the gap before the chip says it)."""
    return visible(piece.strip(" ")) or "_"


def layout_row(tokenizer: Any, ids: list[int], pads: int, *, width: int = WIDTH, max_lines: int = MAX_LINES) -> list[Chip]:
    """The chips of one sample, left to right and line by line, at most ``max_lines`` lines."""
    chips: list[Chip] = []
    x = line = 0
    reserve = text_width(ELLIPSIS) + 2 * CHIP_PADDING + WORD_GAP  # room for "…" on the last line
    most = max_lines * width // (2 * CHIP_PADDING + 4)  # more chips than this cannot fit: decode no further
    for token_id, piece in zip(ids, token_pieces(tokenizer, ids[:most])):
        gap = (WORD_GAP if piece[:1].isspace() or not has_decoder(tokenizer) else GAP) if x else 0
        chip_width = text_width(shown(piece)) + 2 * CHIP_PADDING
        if x + gap + chip_width > width - (reserve if line == max_lines - 1 else 0):
            if line == max_lines - 1:
                return chips + [Chip(x + WORD_GAP, line, reserve - WORD_GAP, ELLIPSIS, "more")]
            x, line, gap = 0, line + 1, 0
        chips.append(Chip(x + gap, line, chip_width, piece, "token", token_id))
        x += gap + chip_width
    pad_text = f"{pads} pad"
    while pads:
        x += WORD_GAP if x else 0
        cells = min(pads, (width - x) // PAD_CELL)
        if cells <= 0:
            if line == max_lines - 1:
                break
            x, line = 0, line + 1
            continue
        chips.append(Chip(x, line, cells * PAD_CELL, pad_text, "pad"))
        x, pads, pad_text = x + cells * PAD_CELL, pads - cells, ""  # the count once, on the first bar
    return chips


def row_height(chips: list[Chip]) -> int:
    """Pixels of one sample's block: its lines of chips, two at the least (the left column's)."""
    return LINE_HEIGHT * max(2, 1 + max((chip.line for chip in chips), default=0)) + 4


def render_tokens(batch: dict[str, Any], tokenizer: Any) -> Image.Image:
    """One block per sample: the left column, then its token chips and padding (see the module doc)."""
    ids, mask = batch["input_ids"].numpy(), batch["attention_mask"].numpy().astype(bool)
    labels = batch.get("labels")
    rows = [layout_row(tokenizer, ids[row][mask[row]].tolist(), int((~mask[row]).sum())) for row in range(len(ids))]
    heights = [row_height(chips) for chips in rows]
    canvas = Image.new("RGB", (MARGIN + WIDTH + 4, HEADER + sum(heights)), "white")
    draw = ImageDraw.Draw(canvas)
    padding = 1 - mask.mean() if mask.size else 0.0
    source = "decoded by the tokenizer's decoder" if has_decoder(tokenizer) else "raw pieces (the tokenizer has no decoder)"
    draw.text((2, 0), f"{len(ids)} samples x {ids.shape[1]} positions, {100 * padding:.0f}% padding (grey); "
              f"one chip per token, {source}", fill="black", font=font())
    top = HEADER
    for row, (chips, height) in enumerate(zip(rows, heights)):
        draw.line((0, top, canvas.width, top), fill=(200, 200, 200))
        name = f"#{int(batch['index'][row])}" + (f"  label {int(labels[row])}" if labels is not None else "")
        draw.text((2, top + 1), name, fill="black", font=font())
        draw.text((2, top + 1 + LINE_HEIGHT), f"{int(mask[row].sum())} tokens", fill=(90, 90, 90), font=font())
        for chip in chips:
            _draw_chip(draw, chip, MARGIN, top + 2 + chip.line * LINE_HEIGHT)
        top += height
    return canvas


def _draw_chip(draw: ImageDraw.ImageDraw, chip: Chip, left: int, top: int) -> None:
    box = (left + chip.x, top + 1, left + chip.x + chip.width - 1, top + LINE_HEIGHT - 2)
    if chip.kind == "pad":
        draw.rectangle(box, fill=PAD_COLOUR)
        if text_width(chip.text) + 2 * CHIP_PADDING <= chip.width:
            draw.text((box[0] + CHIP_PADDING, top - 1), chip.text, fill="white", font=font())
        return
    fill = tuple(int(v) for v in token_colours(np.array(chip.token_id))) if chip.kind == "token" else (255, 255, 255)
    draw.rectangle(box, fill=fill)
    draw.text((box[0] + CHIP_PADDING, top - 1), shown(chip.text) if chip.kind == "token" else chip.text,
              fill=ink(fill), font=font())
