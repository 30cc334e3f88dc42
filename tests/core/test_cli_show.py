"""`recipes show` writes a PNG of the expected size whose pixels are the batch: tiles, boxes, tokens."""

import json

import numpy as np
import pytest
import torch
from PIL import Image
from tokenizers import Tokenizer

from recipes.__main__ import main
from recipes.cli.show import (
    COLUMNS,
    HEATMAP_MARGIN,
    LINE_HEIGHT,
    PAD_COLOUR,
    PADDING,
    category_colour,
    heatmap_cell,
)


def tile_origin(position, tile_size, count):
    """Top-left ``(x, y)`` of tile ``position`` in make_grid's grid of ``count`` tiles of ``(width, height)``."""
    columns = min(COLUMNS, count)
    width, height = tile_size
    return PADDING + (position % columns) * (width + PADDING), PADDING + (position // columns) * (height + PADDING)


def _show(args, tmp_path, capsys):
    out = tmp_path / "sub" / "batch.png"
    assert main(["show", *map(str, args), "-o", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    with Image.open(out) as picture:
        return np.array(picture.convert("RGB"))


def test_image_grid_tiles_are_the_evaluation_images_in_order(fixtures, tmp_path, capsys):
    from torchvision.transforms import v2

    picture = _show(["vision", fixtures / "vision", "--size", 40, "--batch-size", 6], tmp_path, capsys)
    # 6 tiles of 40x40 in one row, each over one line of text, make_grid padding around all
    assert picture.shape == (40 + LINE_HEIGHT + 2 * PADDING, 6 * (40 + PADDING) + PADDING, 3)
    files = sorted((fixtures / "vision" / "bird").iterdir())[:5] + [min((fixtures / "vision" / "cat").iterdir())]
    resize = v2.Compose([v2.Resize(round(40 * 256 / 224), antialias=True), v2.CenterCrop(40)])
    for position, file in enumerate(files):  # the oracle: PIL decode + the same v2 resize
        if file.name == "gray16.png":
            continue  # PIL's convert("RGB") clips 16-bit to white; tests/core/test_images covers it
        with Image.open(file) as original:
            expected = resize(torch.from_numpy(np.array(original.convert("RGB"))).permute(2, 0, 1))
        x, y = tile_origin(position, (40, 40 + LINE_HEIGHT), 6)
        tile = torch.from_numpy(picture[y : y + 40, x : x + 40]).permute(2, 0, 1)
        assert (tile.int() - expected.int()).abs().float().mean() < 3, file.name


def _one_box_coco(tmp_path):
    (tmp_path / "images").mkdir()
    for name in ("a.png", "b.png"):
        Image.new("RGB", (60, 40), (128, 128, 128)).save(tmp_path / "images" / name)
    annotations = [  # boxes near the left edge: a horizontal flip would move them to the right
        {"id": 10, "image_id": 1, "category_id": 3, "bbox": [4, 6, 20, 16], "area": 320, "iscrowd": 0},
        {"id": 11, "image_id": 2, "category_id": 7, "bbox": [8, 10, 12, 24], "area": 288, "iscrowd": 0},
    ]
    path = tmp_path / "instances.json"
    path.write_text(json.dumps({
        "images": [{"id": 1, "file_name": "a.png", "width": 60, "height": 40},
                   {"id": 2, "file_name": "b.png", "width": 60, "height": 40}],
        "annotations": annotations,
        "categories": [{"id": 3, "name": "car"}, {"id": 7, "name": "dog"}],
    }))
    return path, annotations


def test_boxes_land_where_the_annotations_say(tmp_path, capsys):
    path, annotations = _one_box_coco(tmp_path)
    picture = _show(["detection", path], tmp_path, capsys)
    assert picture.shape == (40 + LINE_HEIGHT + 2 * PADDING, 2 * (60 + PADDING) + PADDING, 3)
    grey = (128, 128, 128)
    for position, annotation in enumerate(annotations):
        x0, y0 = tile_origin(position, (60, 40 + LINE_HEIGHT), 2)
        x, y, w, h = annotation["bbox"]
        colour = category_colour(annotation["category_id"])
        middle = y + h // 2
        # left and right edges at mid height, bottom edge at mid width: the box colour
        assert tuple(picture[y0 + middle, x0 + x]) == colour
        assert tuple(picture[y0 + middle, x0 + x + w]) == colour
        assert tuple(picture[y0 + y + h, x0 + x + w // 2]) == colour
        # just outside the box, and at the mirrored position, the untouched grey image
        assert tuple(picture[y0 + middle, x0 + x - 2]) == grey
        assert tuple(picture[y0 + middle, x0 + 60 - 1 - x]) == grey


def test_caption_tiles_show_the_images_over_their_decoded_captions(fixtures, tmp_path, capsys):
    picture = _show(["multimodal", fixtures / "multimodal/manifest.jsonl", "--tokenizer",
                     fixtures / "text/tokenizer.json", "--size", 48, "--batch-size", 4], tmp_path, capsys)
    assert picture.shape[1] == 4 * (48 + PADDING) + PADDING
    lines = (picture.shape[0] - 2 * PADDING - 48) / LINE_HEIGHT
    assert lines == int(lines) and 1 <= lines <= 4
    # the band under each image holds dark text pixels; the padding row between is white
    for position in range(4):
        x, y = tile_origin(position, (48, picture.shape[0] - 2 * PADDING), 4)
        band = picture[y + 48 : y + 48 + LINE_HEIGHT, x : x + 48]
        assert (band.min(axis=2) < 100).any(), position


def test_token_heatmap_marks_exactly_the_padded_positions(fixtures, tmp_path, capsys):
    path, tokenizer = fixtures / "text/labeled.jsonl", fixtures / "text/tokenizer.json"
    picture = _show(["text", path, "--batch-size", 5, "--max-length", 40], tmp_path, capsys)
    encoder = Tokenizer.from_file(str(tokenizer))
    rows = [json.loads(line)["text"] for line in path.read_text(encoding="utf-8").splitlines()[:5]]
    lengths = [min(40, len(encoder.encode(text).ids)) for text in rows]  # evaluation: file order
    longest = max(lengths)
    width, height = heatmap_cell(longest)
    assert picture.shape == (LINE_HEIGHT + 5 * height, HEATMAP_MARGIN + longest * width, 3)
    def cell(row, k):  # the colour at the centre of token k of row
        return tuple(picture[LINE_HEIGHT + row * height + height // 2, HEATMAP_MARGIN + k * width + width // 2])

    for row, length in enumerate(lengths):
        assert cell(row, length - 1) != PAD_COLOUR
        if length < longest:
            assert cell(row, length) == PAD_COLOUR and cell(row, longest - 1) == PAD_COLOUR


def test_a_training_batch_can_be_shown_too(fixtures, tmp_path, capsys):
    picture = _show(["vision", fixtures / "vision", "--size", 32, "--batch-size", 4, "--train"], tmp_path, capsys)
    assert picture.shape == (32 + LINE_HEIGHT + 2 * PADDING, 4 * (32 + PADDING) + PADDING, 3)


def test_bad_data_stops_show_with_a_message_naming_the_file(fixtures, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["show", "detection", str(fixtures / "hostile/coco/unknown_category.json"), "-o", str(tmp_path / "x.png")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "unknown_category.json" in err and "annotation 2" in err and "recipes check" in err
