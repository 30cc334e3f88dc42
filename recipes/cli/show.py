"""``recipes show DOMAIN PATH -o batch.png``: one batch as a picture, to catch a wrong label map or a flipped box.

    python -m recipes show vision data/train -o batch.png            # image grid, class names
    python -m recipes show detection instances.json -o boxes.png     # boxes + category names
    python -m recipes show multimodal captions.jsonl --tokenizer tok.json -o pairs.png
    python -m recipes show text train.jsonl -o tokens.png            # each row's tokens, padding grey

The batch is the first one the domain's own loader gives, in evaluation mode by default (dataset
order, only the deterministic resize), so the picture shows what the files hold; ``--train``
shows a training batch instead (shuffled, grouped, augmented, seed 0). Images smaller than
``READABLE_SIDE`` are enlarged by a whole factor (each pixel a square, boxes scaled alike) and
laid out with ``torchvision.utils.make_grid`` (``PADDING`` pixels between tiles), each over a band
of text in PIL's own font. Boxes are drawn by ``torchvision.utils.draw_bounding_boxes`` in one
colour per category (:func:`category_colour`), each name on a box of that colour kept inside its
image (:func:`recipes.cli.drawing.place_labels`). Captions and token rows read what the
tokenizer's decoder gives (:mod:`recipes.cli.token_text`); the text picture is
:mod:`recipes.cli.token_rows`.
"""

from __future__ import annotations

import argparse
import colorsys
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from PIL import Image
from torchvision.utils import draw_bounding_boxes, make_grid

from recipes.cli.datasets import DataOptions, make_loader, open_dataset
from recipes.cli.drawing import LINE_HEIGHT, draw_labels, text_band, upscale, upscale_factor, wrap
from recipes.cli.token_rows import render_tokens
from recipes.cli.token_text import caption_text

PADDING = 2  # pixels between grid tiles (make_grid's padding)
MAX_CAPTION_LINES = 4
COLUMNS = 8  # tiles per grid row at the most
GRID_WIDTH = 1820  # px: fewer columns when wider tiles would pass it (eight 224 px tiles fit)


def category_colour(category: int) -> tuple[int, int, int]:
    """A bright colour per category id; neighbouring ids get distant hues (golden-ratio steps)."""
    red, green, blue = colorsys.hsv_to_rgb((category * 0.618034) % 1.0, 0.85, 1.0)
    return round(255 * red), round(255 * green), round(255 * blue)


def grid_columns(tile_width: int, count: int) -> int:
    """Tiles per grid row: as many as fit in ``GRID_WIDTH``, at most ``COLUMNS`` and ``count``, at least 1."""
    return max(1, min(COLUMNS, count, GRID_WIDTH // (tile_width + PADDING)))


def captioned_grid(images: Sequence[torch.Tensor], captions: Sequence[Sequence[str]]) -> Image.Image:
    """Each image (uint8 [3,H,W]) at the top centre of a tile the size of the largest, over its text lines."""
    height = max(image.shape[1] for image in images)
    width = max(image.shape[2] for image in images)
    lines = max(len(caption) for caption in captions)
    tiles = []
    for image, caption in zip(images, captions):
        tile = torch.full((3, height + LINE_HEIGHT * lines, width), 255, dtype=torch.uint8)
        left = (width - image.shape[2]) // 2
        tile[:, : image.shape[1], left : left + image.shape[2]] = image
        tile[:, height:] = text_band(list(caption) + [""] * (lines - len(caption)), width)
        tiles.append(tile)
    grid = make_grid(tiles, nrow=grid_columns(width, len(tiles)), padding=PADDING, pad_value=255)
    return Image.fromarray(grid.permute(1, 2, 0).numpy())


def render_classes(batch: Any, class_names: Sequence[str]) -> Image.Image:
    images, labels = batch
    images = [upscale(image) for image in images]
    width = images[0].shape[2]
    return captioned_grid(images, [wrap(f"{int(y)} {class_names[int(y)]}", width, 2) for y in labels])


def render_boxes(batch: Any, categories: dict[int, str]) -> Image.Image:
    """Each image enlarged to a readable size, its boxes drawn and each named on a box of its colour."""
    images, targets = batch
    drawn = []
    for image, target in zip(images, targets):
        factor = upscale_factor(*image.shape[-2:])
        picture = upscale(image.as_subclass(torch.Tensor), factor)
        boxes = target["boxes"].as_subclass(torch.Tensor) * factor
        labels = [int(label) for label in target["labels"]]
        if labels:  # an image without boxes: nothing to draw (torchvision would warn)
            colours = [category_colour(c) for c in labels]
            picture = draw_bounding_boxes(picture, boxes, colors=colours, width=2)
            canvas = Image.fromarray(picture.permute(1, 2, 0).numpy())
            draw_labels(canvas, boxes.tolist(), [categories.get(c, f"id {c}") for c in labels], colours)
            picture = torch.from_numpy(np.array(canvas)).permute(2, 0, 1)
        drawn.append(picture)
    counts = [len(target["labels"]) for target in targets]
    captions = [[f"image {target['image_id']}: {n} box{'' if n == 1 else 'es'}"] for target, n in zip(targets, counts)]
    return captioned_grid(drawn, captions)


def render_captions(batch: dict[str, Any], tokenizer: Any) -> Image.Image:
    """Each image (enlarged if small) over the caption its token ids decode to."""
    images = [upscale(image) for image in batch["pixel_values"]]
    width = images[0].shape[2]
    captions = []
    for ids, length in zip(batch["input_ids"], batch["lengths"]):
        captions.append(wrap(caption_text(tokenizer, ids[: int(length)].tolist()), width, MAX_CAPTION_LINES))
    return captioned_grid(images, captions)


def render(domain: str, batch: Any, dataset: Any, options: DataOptions) -> Image.Image:
    """The picture of ``batch`` for ``domain``."""
    if domain == "vision":
        return render_classes(batch, dataset.classes)
    if domain == "detection":
        return render_boxes(batch, dataset.categories)
    from recipes.core.tokens import load_tokenizer

    tokenizer = load_tokenizer(options.tokenizer_path())
    return render_captions(batch, tokenizer) if domain == "multimodal" else render_tokens(batch, tokenizer)


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
