"""``recipes show DOMAIN PATH -o batch.png``: one batch as a picture, to catch a wrong label map or a flipped box.

    python -m recipes show vision data/train -o batch.png            # image grid, class names
    python -m recipes show detection instances.json -o boxes.png     # boxes + category names
    python -m recipes show multimodal captions.jsonl --tokenizer tok.json -o pairs.png
    python -m recipes show text train.jsonl -o tokens.png            # token / padding heatmap

The batch is the first one the domain's own loader gives, in evaluation mode by default (dataset
order, only the deterministic resize), so the picture shows what the files hold; ``--train``
shows a training batch instead (shuffled, grouped, augmented, seed 0). Images are laid out with
``torchvision.utils.make_grid`` (``PADDING`` pixels between tiles), each over a band of text
drawn with PIL's default font; boxes are drawn by ``torchvision.utils.draw_bounding_boxes`` in
one colour per category (:func:`category_colour`).
"""

from __future__ import annotations

import argparse
import colorsys
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from PIL import Image, ImageDraw, ImageFont
from torchvision.utils import draw_bounding_boxes, make_grid

from recipes.cli.datasets import DataOptions, make_loader, open_dataset

PADDING = 2  # pixels between grid tiles (make_grid's padding)
LINE_HEIGHT = 13  # pixels per line of text under a tile (PIL's default font is ~11 px high)
MAX_CAPTION_LINES = 4
PAD_COLOUR = (48, 48, 48)  # padded positions of the token heatmap
COLUMNS = 8  # tiles per grid row


def category_colour(category: int) -> tuple[int, int, int]:
    """A bright colour per category id; neighbouring ids get distant hues (golden-ratio steps)."""
    red, green, blue = colorsys.hsv_to_rgb((category * 0.618034) % 1.0, 0.85, 1.0)
    return round(255 * red), round(255 * green), round(255 * blue)


def token_colours(ids: np.ndarray) -> np.ndarray:
    """``uint8 [..., 3]``: a pastel colour per token id, the same id always the same colour."""
    hue = (ids.astype(np.float64) * 0.618034) % 1.0
    sector, fraction = np.floor(hue * 6).astype(int) % 6, hue * 6 - np.floor(hue * 6)
    value, low = 0.95, 0.95 * (1 - 0.55)
    falling, rising = value - (value - low) * fraction, low + (value - low) * fraction
    table = np.stack([
        np.choose(sector, [value, falling, low, low, rising, value]),
        np.choose(sector, [rising, value, value, falling, low, low]),
        np.choose(sector, [low, low, rising, value, value, falling]),
    ], axis=-1)
    return np.round(255 * table).astype(np.uint8)


def _font() -> ImageFont.ImageFont | ImageFont.FreeTypeFont:
    return ImageFont.load_default()  # bundled with Pillow: nothing to download


def text_band(lines: Sequence[str], width: int) -> torch.Tensor:
    """``uint8 [3, LINE_HEIGHT * len(lines), width]``: black text on white, one row per line."""
    band = Image.new("RGB", (width, LINE_HEIGHT * len(lines)), "white")
    draw = ImageDraw.Draw(band)
    for row, line in enumerate(lines):
        draw.text((2, row * LINE_HEIGHT), line, fill="black", font=_font())
    return torch.from_numpy(np.array(band)).permute(2, 0, 1)


def wrap(text: str, width: int, max_lines: int) -> list[str]:
    """Greedy word wrap to ``width`` pixels of the default font, at most ``max_lines`` lines."""
    draw, font = ImageDraw.Draw(Image.new("RGB", (1, 1))), _font()
    lines: list[str] = []
    for word in text.split():
        if lines and draw.textlength(f"{lines[-1]} {word}", font=font) <= width - 4:
            lines[-1] = f"{lines[-1]} {word}"
        else:
            lines.append(word)
    if len(lines) > max_lines:
        lines = lines[:max_lines]
        lines[-1] += " ..."
    return lines or [""]


def captioned_grid(images: Sequence[torch.Tensor], captions: Sequence[Sequence[str]]) -> Image.Image:
    """Each image (uint8 [3,H,W], padded to the largest at the bottom right) over its text lines."""
    height = max(image.shape[1] for image in images)
    width = max(image.shape[2] for image in images)
    lines = max(len(caption) for caption in captions)
    tiles = []
    for image, caption in zip(images, captions):
        tile = torch.full((3, height + LINE_HEIGHT * lines, width), 255, dtype=torch.uint8)
        tile[:, : image.shape[1], : image.shape[2]] = image
        tile[:, height:] = text_band(list(caption) + [""] * (lines - len(caption)), width)
        tiles.append(tile)
    grid = make_grid(tiles, nrow=min(COLUMNS, len(tiles)), padding=PADDING, pad_value=255)
    return Image.fromarray(grid.permute(1, 2, 0).numpy())


def render_classes(batch: Any, class_names: Sequence[str]) -> Image.Image:
    images, labels = batch
    return captioned_grid(list(images), [[f"{int(y)} {class_names[int(y)]}"] for y in labels])


def render_boxes(batch: Any, categories: dict[int, str]) -> Image.Image:
    images, targets = batch
    drawn = []
    for image, target in zip(images, targets):
        boxes = target["boxes"].as_subclass(torch.Tensor)
        labels = [int(label) for label in target["labels"]]
        if not labels:  # an image without boxes: nothing to draw (torchvision would warn)
            drawn.append(image.as_subclass(torch.Tensor))
            continue
        drawn.append(draw_bounding_boxes(
            image.as_subclass(torch.Tensor), boxes, labels=[categories.get(c, f"id {c}") for c in labels],
            colors=[category_colour(c) for c in labels], width=2,
        ))
    return captioned_grid(drawn, [[f"image {target['image_id']}"] for target in targets])


def render_captions(batch: dict[str, Any], tokenizer: Any) -> Image.Image:
    images = list(batch["pixel_values"])
    width = images[0].shape[2]
    captions = []
    for ids, length in zip(batch["input_ids"], batch["lengths"]):
        text = tokenizer.decode(ids[: int(length)].tolist(), skip_special_tokens=True)
        captions.append(wrap(text, width, MAX_CAPTION_LINES))
    return captioned_grid(images, captions)


def heatmap_cell(length: int) -> tuple[int, int]:
    """``(width, height)`` in pixels of one token cell for a batch padded to ``length``."""
    return max(2, min(12, 1200 // max(length, 1))), 10


HEATMAP_MARGIN = 44  # left column: each row's length


def render_tokens(batch: dict[str, Any]) -> Image.Image:
    """One row per sample, one cell per position: a colour per token id, padding dark grey."""
    ids, mask = batch["input_ids"].numpy(), batch["attention_mask"].numpy().astype(bool)
    rows, length = ids.shape
    cell_width, cell_height = heatmap_cell(length)
    cells = np.where(mask[..., None], token_colours(ids), np.array(PAD_COLOUR, dtype=np.uint8))
    pixels = np.repeat(np.repeat(cells, cell_height, axis=0), cell_width, axis=1)
    canvas = Image.new("RGB", (HEATMAP_MARGIN + length * cell_width, LINE_HEIGHT + rows * cell_height), "white")
    canvas.paste(Image.fromarray(pixels), (HEATMAP_MARGIN, LINE_HEIGHT))
    draw, font = ImageDraw.Draw(canvas), _font()
    padding = 1 - mask.mean() if mask.size else 0.0
    draw.text((2, 0), f"{rows} x {length} token ids, {100 * padding:.0f}% padding (dark grey)", fill="black", font=font)
    for row, count in enumerate(mask.sum(1)):
        draw.text((2, LINE_HEIGHT + row * cell_height - 1), f"{int(count):>5}", fill="black", font=font)
    return canvas


def render(domain: str, batch: Any, dataset: Any, options: DataOptions) -> Image.Image:
    """The picture of ``batch`` for ``domain``."""
    if domain == "vision":
        return render_classes(batch, dataset.classes)
    if domain == "detection":
        return render_boxes(batch, dataset.categories)
    if domain == "multimodal":
        from recipes.core.tokens import load_tokenizer

        return render_captions(batch, load_tokenizer(options.tokenizer_path()))
    return render_tokens(batch)


def run(args: argparse.Namespace, options: DataOptions) -> int:
    dataset = open_dataset(options, train=args.train)
    # no workers: one batch does not repay starting them; drop_last off so a small set still shows
    loader = make_loader(options.domain, dataset, args.batch_size, train=args.train, device="cpu", seed=0,
                         num_workers=0, drop_last=False)
    batch = next(iter(loader))
    picture = render(options.domain, batch, dataset, options)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    picture.save(args.output)
    mode = "training" if args.train else "evaluation"
    print(f"wrote {args.output}: {picture.width}x{picture.height} px, the first {mode} batch of "
          f"{type(dataset).__name__} ({len(dataset)} samples)")
    return 0
