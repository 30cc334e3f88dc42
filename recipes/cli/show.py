"""``recipes show DOMAIN PATH -o batch.png``: one batch as a picture, to catch a wrong label map or a flipped box.

    python -m recipes show vision data/train -o batch.png            # image grid, class names
    python -m recipes show detection instances.json -o boxes.png     # boxes + category names
    python -m recipes show multimodal captions.jsonl --tokenizer tok.json -o pairs.png
    python -m recipes show text train.jsonl -o tokens.png            # each row's tokens, padding grey
    python -m recipes show audio train_manifest.jsonl -o clips.png   # waveforms, spectrograms, transcripts

The batch is the first one the domain's own loader gives, in evaluation mode by default (dataset
order, only the deterministic resize), so the picture shows what the files hold, drawn by the
``show`` its entry in :mod:`recipes.domains` names (one of the ``show_*`` functions here); ``--train``
shows a training batch instead (shuffled, grouped, augmented, seed 0). A title says what the picture
holds and what was left out of it, and why; each tile names its file or sample index. Classification
and caption tiles (all one size) are enlarged by a whole factor below ``READABLE_SIDE`` and laid out
with ``torchvision.utils.make_grid``; detection images, of many shapes, are scaled to one row height
and packed into rows. Boxes are drawn by ``torchvision.utils.draw_bounding_boxes`` in one colour per
category (:func:`category_colour`), names kept inside the image, crowd regions hatched. Captions and
token rows read what the tokenizer's decoder gives; the text picture is :mod:`recipes.cli.token_rows`.
"""

from __future__ import annotations

import argparse
import colorsys
import os
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from PIL import Image, ImageDraw
from torch.utils.data import IterableDataset
from torchvision.transforms.v2 import functional as F
from torchvision.utils import draw_bounding_boxes, make_grid

from recipes.cli.datasets import DataOptions, make_loader, open_dataset, sample_count
from recipes.cli.drawing import LINE_HEIGHT, READABLE_SIDE, draw_labels, fit, text_band, upscale, wrap
from recipes.cli.token_rows import render_tokens
from recipes.cli.token_text import caption_text
from recipes.core.contracts.nested import samples_in
from recipes.domains import domain

PADDING = 2  # pixels between grid tiles (make_grid's padding)
MAX_CAPTION_LINES = 4
COLUMNS = 8  # tiles per grid row at the most
GRID_WIDTH = 1820  # px: fewer columns when wider tiles would pass it (eight 224 px tiles fit)
MAX_ROW_HEIGHT = 400  # px: detection rows are as tall as the tallest image, within [READABLE_SIDE, this]
TITLE_LINES = 4  # what the picture shows, then what was left out of it and why, wrapped
TITLE_HEIGHT = TITLE_LINES * LINE_HEIGHT
MIN_WIDTH = 900  # px: a picture of a few small tiles is widened to this, so its title reads whole
HATCH_STEP = 6  # px between the diagonal lines that hatch a crowd region


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


def render_classes(batch: Any, class_names: Sequence[str], names: Sequence[str]) -> Image.Image:
    """Each image enlarged over its label, class name and file name."""
    images, labels = batch
    images = [upscale(image) for image in images]
    width = images[0].shape[2]
    captions = [[fit(f"{int(y)} {class_names[int(y)]}", width - 4), fit(name, width - 4)] for y, name in zip(labels, names)]
    return captioned_grid(images, captions)


def hatch(picture: Image.Image, box: Sequence[float], colour: tuple[int, int, int]) -> None:
    """Diagonal lines across ``box`` (x0, y0, x1, y1): a crowd region, which trains no detector box."""
    x0, y0, x1, y1 = (round(v) for v in box)
    layer = Image.new("L", picture.size, 0)
    draw = ImageDraw.Draw(layer)
    for start in range(x0 - (y1 - y0), x1, HATCH_STEP):
        draw.line((start, y1, start + (y1 - y0), y0), fill=255)
    region = Image.new("L", picture.size, 0)
    ImageDraw.Draw(region).rectangle((x0, y0, x1 - 1, y1 - 1), fill=255)
    layer.paste(0, mask=Image.eval(region, lambda v: 255 - v))  # keep the lines inside the box
    picture.paste(colour, mask=layer)


def render_boxes(batch: Any, categories: dict[int, str], names: Sequence[str]) -> Image.Image:
    """Each image scaled to one row height, its boxes drawn and named, crowd regions hatched, packed in rows."""
    images, targets = batch
    height = min(MAX_ROW_HEIGHT, max(READABLE_SIDE, *(image.shape[-2] for image in images)))
    tiles = []
    for image, target, name in zip(images, targets, names):
        scale = height / image.shape[-2]
        size = [height, max(1, round(image.shape[-1] * scale))]
        picture = F.resize(image.as_subclass(torch.Tensor), size, antialias=scale < 1,
                           interpolation=F.InterpolationMode.NEAREST_EXACT if scale >= 1 else F.InterpolationMode.BILINEAR)
        boxes = target["boxes"].as_subclass(torch.Tensor) * torch.tensor([size[1] / image.shape[-1], scale] * 2)
        labels = [int(label) for label in target["labels"]]
        crowd = target["iscrowd"].bool().tolist()
        if labels:  # an image without boxes: nothing to draw (torchvision would warn)
            colours = [category_colour(c) for c in labels]
            picture = draw_bounding_boxes(picture, boxes, colors=colours, width=2)
            canvas = Image.fromarray(picture.permute(1, 2, 0).numpy())
            for box, colour, is_crowd in zip(boxes.tolist(), colours, crowd):
                if is_crowd:
                    hatch(canvas, box, colour)
            texts = [categories.get(c, f"id {c}") + (" (crowd)" if is_crowd else "") for c, is_crowd in zip(labels, crowd)]
            draw_labels(canvas, boxes.tolist(), texts, colours)
            picture = torch.from_numpy(np.array(canvas)).permute(2, 0, 1)
        boxed = len(labels) - sum(crowd)
        line = f"image {target['image_id']}: {boxed} box{'' if boxed == 1 else 'es'}" + (f", {sum(crowd)} crowd" if any(crowd) else "")
        tiles.append((picture, [fit(line, picture.shape[2] - 4), fit(name, picture.shape[2] - 4)]))
    return packed_rows(tiles)


def packed_rows(tiles: Sequence[tuple[torch.Tensor, list[str]]]) -> Image.Image:
    """Tiles of one height (uint8 [3,H,W_i], each over its text lines) placed left to right, a new
    row when ``GRID_WIDTH`` would be passed: no tile is padded to another's size."""
    lines = max(len(caption) for _, caption in tiles)
    tile_height = tiles[0][0].shape[1] + LINE_HEIGHT * lines
    rows: list[list[torch.Tensor]] = [[]]
    used = PADDING
    for image, caption in tiles:
        tile = torch.cat([image, text_band(caption + [""] * (lines - len(caption)), image.shape[2])], dim=1)
        if rows[-1] and used + tile.shape[2] + PADDING > GRID_WIDTH:
            rows.append([])
            used = PADDING
        rows[-1].append(tile)
        used += tile.shape[2] + PADDING
    width = max(PADDING + sum(tile.shape[2] + PADDING for tile in row) for row in rows)
    canvas = torch.full((3, PADDING + len(rows) * (tile_height + PADDING), width), 255, dtype=torch.uint8)
    for number, row in enumerate(rows):
        top, left = PADDING + number * (tile_height + PADDING), PADDING
        for tile in row:
            canvas[:, top : top + tile_height, left : left + tile.shape[2]] = tile
            left += tile.shape[2] + PADDING
    return Image.fromarray(canvas.permute(1, 2, 0).numpy())


def render_captions(batch: dict[str, Any], tokenizer: Any, names: Sequence[str]) -> Image.Image:
    """Each image (enlarged if small) over its index and file name, then the caption its token ids decode to."""
    images = [upscale(image) for image in batch["pixel_values"]]
    width = images[0].shape[2]
    captions = []
    for ids, length, index, name in zip(batch["input_ids"], batch["lengths"], batch["index"], names):
        caption = wrap(caption_text(tokenizer, ids[: int(length)].tolist()), width, MAX_CAPTION_LINES)
        captions.append([fit(f"#{int(index)} {name}", width - 4), *caption])
    return captioned_grid(images, captions)


def sample_names(dataset: Any, indices: Sequence[int]) -> list[str]:
    """What each tile is called: its file name (the last two path parts), else its sample index."""
    names = []
    for index in indices:
        if isinstance(dataset, IterableDataset):  # a stream: the sample's place in this batch
            names.append(f"#{index} of the stream")
            continue
        if hasattr(dataset, "samples"):  # an image folder: (path, label)
            path = dataset.samples[index][0]
        elif hasattr(dataset, "index") and hasattr(dataset.index, "file_names"):  # COCO
            path = dataset.index.file_names[index]
        elif hasattr(dataset, "images"):  # caption pairs, one image a row
            path = dataset.images[index]
        else:
            names.append(f"#{index}")
            continue
        parts = os.fspath(path).replace(os.sep, "/").split("/")
        names.append("/".join(parts[-2:]))
    return names


def render_audio(batch: dict[str, Any], dataset: Any, indices: Sequence[int]) -> Image.Image:
    """Waveforms over spectrograms (:mod:`recipes.cli.waveforms`), each named by its file, with its
    class or its transcript."""
    from recipes.cli.waveforms import render_clips, transcript_lines  # here: TorchCodec loads only for clips

    if "labels" in batch:  # a clip folder
        names = sample_names(dataset, indices)
        captions = [[f"{int(y)} {dataset.classes[int(y)]}"] for y in batch["labels"]]
    else:  # a speech manifest: the line it came from, what is said
        manifest = str(dataset.name)
        names = [dataset.describe(int(index)).replace(manifest, os.path.basename(manifest), 1) for index in batch["index"]]
        captions = [transcript_lines(text) for text in batch["text"]]
    return render_clips(batch, sample_rate=dataset.sample_rate, names=names, captions=captions)


# What each domain's entry in recipes/domains.py names as its `show`: the picture of a batch, and what
# the title says of it; ``indices`` are the dataset indices the batch was drawn from.


def show_classes(batch: Any, dataset: Any, options: DataOptions, indices: Sequence[int], *,
                 train: bool) -> tuple[Image.Image, list[str]]:
    """An image grid with class and file names."""
    what = "sample" if isinstance(dataset, IterableDataset) else "file"
    notes = [f"each tile is a random crop and flip of the {what} named under it"] if train else []
    classes = dataset.classes or [str(label) for label in range(max(batch[1].tolist(), default=-1) + 1)]  # numbers
    return render_classes(batch, classes, sample_names(dataset, indices)), notes


def show_tokens(batch: Any, dataset: Any, options: DataOptions, indices: Sequence[int], *,
                train: bool) -> tuple[Image.Image, list[str]]:
    """A line per sample: its tokens as the tokenizer's decoder gives them, its padding grey."""
    from recipes.core.tokens.encoding import load_tokenizer

    return render_tokens(batch, load_tokenizer(options.tokenizer_path())), []


def show_boxes(batch: Any, dataset: Any, options: DataOptions, indices: Sequence[int], *,
               train: bool) -> tuple[Image.Image, list[str]]:
    """Each image with its boxes and category names, crowd regions hatched."""
    if isinstance(dataset, IterableDataset):  # shards: their samples carry no file name
        names = [f"#{place} of the stream" for place in range(len(batch[1]))]
    else:
        names = sample_names(dataset, [dataset.image_ids.tolist().index(t["image_id"]) for t in batch[1]])
    notes = ["hatched: crowd regions (iscrowd=1), which a detector does not train on as boxes"]
    return render_boxes(batch, dataset.categories or {}, names), notes


def show_captions(batch: Any, dataset: Any, options: DataOptions, indices: Sequence[int], *,
                  train: bool) -> tuple[Image.Image, list[str]]:
    """Each image over the caption its token ids decode to."""
    from recipes.core.tokens.encoding import load_tokenizer

    names = sample_names(dataset, [int(i) for i in batch["index"]])
    which = "one drawn at random" if train else "the first"
    notes = [f"each image over {which} of its captions ({len(dataset.caption_tokens)} captions in all)"]
    return render_captions(batch, load_tokenizer(options.tokenizer_path()), names), notes


def show_clips(batch: Any, dataset: Any, options: DataOptions, indices: Sequence[int], *,
               train: bool) -> tuple[Image.Image, list[str]]:
    """Each clip's waveform over its log-mel spectrogram, with its class or transcript."""
    notes = ["each clip: its waveform over its log-mel spectrogram, one time scale for all; grey: padding"]
    if getattr(dataset, "clip_seconds", None):
        window = "a random" if train else "the centre"
        notes.append(f"each clip is {window} {dataset.clip_seconds:g} s window of the file named under it")
    return render_audio(batch, dataset, indices), notes


def show_strips(batch: Any, dataset: Any, options: DataOptions, indices: Sequence[int], *,
                train: bool) -> tuple[Image.Image, list[str]]:
    """Each clip as a strip of its frames (``recipes.video.show.strips``) over its label, file and frame numbers."""
    from recipes.video.show import strips  # here: TorchCodec's video decoder loads only for video

    notes = ["each clip: up to 8 of its frames, evenly spaced, as the batch holds them"]
    if train:
        notes.append("a random clip of each video, one crop and flip for all its frames")
    return captioned_grid(*strips(batch, dataset)), notes


def title_lines(name: str, dataset: Any, batch: Any, *, batch_size: int, train: bool, kept: int,
                count: int) -> list[str]:
    """What the picture of domain ``name`` shows (mode, batch size, samples drawn), then what was left
    out and why; ``count`` is the samples of the dataset, ``kept`` how many the epoch's batches hold
    (training drops incomplete batches)."""
    drawn = samples_in(batch)
    mode = "training batch (shuffled, augmented, seed 0)" if train else "evaluation batch (dataset order)"
    order = "stream order" if isinstance(dataset, IterableDataset) else "dataset order"
    mode = mode.replace("dataset order", order)
    shown = [f"{name}: the first {mode} of {type(dataset).__name__}, {count} samples; "
             f"batch size {batch_size}, {drawn} drawn"]
    left = []
    if drawn < batch_size and count >= batch_size:
        left.append(f"{batch_size - drawn} of this batch skipped as bad data (--on-error skip; the warnings name them)")
    later, dropped = max(0, kept - batch_size), count - kept
    if later:
        left.append(f"{later} sample{'s' * (later != 1)} in later batches")
    if dropped:
        left.append(f"{dropped} dropped by training as incomplete batches (without --train every sample is kept)")
    small = f": the dataset holds fewer samples than the batch size, all {count} in this one batch"
    return shown + ["left out: " + "; ".join(left) if left else "nothing left out" + (small if drawn < batch_size else "")]


def titled(picture: Image.Image, lines: Sequence[str]) -> Image.Image:
    """``picture`` under a ``TITLE_HEIGHT`` band of ``lines``, wrapped to the width (at least
    ``MIN_WIDTH``: the picture then stands at the left of a wider white canvas)."""
    width = max(picture.width, MIN_WIDTH)
    wrapped = [part for line in lines for part in wrap(line, width, TITLE_LINES)][:TITLE_LINES]
    band = text_band(wrapped + [""] * (TITLE_LINES - len(wrapped)), width)
    canvas = Image.new("RGB", (width, TITLE_HEIGHT + picture.height), "white")
    canvas.paste(Image.fromarray(band.permute(1, 2, 0).numpy()), (0, 0))
    canvas.paste(picture, (0, TITLE_HEIGHT))
    return canvas


def first_batch_indices(loader: Any) -> list[int]:
    """The dataset indices of the loader's first batch, from its batch sampler, which is left at epoch 0."""
    sampler = loader.batch_sampler
    first = next(iter(sampler), [])
    if hasattr(sampler, "set_epoch"):
        sampler.set_epoch(0)
    return [int(entry[0]) if isinstance(entry, tuple) else int(entry) for entry in first]


def run(args: argparse.Namespace, options: DataOptions) -> int:
    entry = domain(options.domain)
    if entry.show is None:
        raise ValueError(f"recipes show has no picture for {options.domain} batches (its entry in recipes/domains.py "
                         "names none)")
    dataset = open_dataset(options, train=args.train, include_crowd=True)  # drawn hatched, where a dataset has them
    count = sample_count(dataset)
    # A training batch as training sees it (incomplete batches dropped) unless the whole dataset is
    # smaller than one batch; no workers: one batch does not repay starting them.
    drop_last = args.train and count >= args.batch_size
    loader = make_loader(options.domain, dataset, args.batch_size, train=args.train, device="cpu", seed=0,
                         num_workers=0, drop_last=drop_last)
    if isinstance(dataset, IterableDataset):  # shards: the stream's first batch, its samples numbered in it
        batch = next(iter(loader))
        indices, kept = list(range(samples_in(batch))), count - count % args.batch_size if drop_last else count
    else:
        indices = first_batch_indices(loader)
        # training batches are all full, so they hold len(batch sampler) x batch size samples
        kept = len(loader.batch_sampler) * args.batch_size if drop_last else len(dataset)
        batch = next(iter(loader))
        if samples_in(batch) < len(indices):  # some skipped: name the rest
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # each was warned about once already
                indices = [index for index in indices if dataset[index] is not None]
    picture, notes = entry.load("show")(batch, dataset, options, indices, train=args.train)
    lines = title_lines(options.domain, dataset, batch, batch_size=args.batch_size, train=args.train, kept=kept,
                        count=count) + notes
    picture = titled(picture, lines)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    picture.save(args.output)
    print(f"wrote {args.output}: {picture.width}x{picture.height} px")
    for line in lines:
        print(f"  {line}")
    return 0
