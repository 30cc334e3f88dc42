"""`recipes show` writes a PNG a person can read: enlarged tiles, boxes with labels inside the image,
captions and token rows as the tokenizer's decoder gives them, padding shaded."""

import json
import os

import numpy as np
import pytest
import torch
from PIL import Image
from tokenizers import Tokenizer

from recipes.__main__ import main
from recipes.cli.drawing import LINE_HEIGHT, READABLE_SIDE, fit, place_labels, text_width, upscale_factor, wrap
from recipes.cli.show import MIN_WIDTH, PADDING, TITLE_HEIGHT, category_colour, grid_columns
from recipes.cli.token_rows import HEADER, MARGIN, PAD_COLOUR, layout_row, render_tokens, row_height
from recipes.cli.token_text import SEPARATOR, caption_text, token_pieces


def tile_origin(position, tile_size, count):
    """Top-left ``(x, y)`` of tile ``position`` in make_grid's grid of ``count`` tiles of ``(width, height)``."""
    width, height = tile_size
    columns = grid_columns(width, count)
    return PADDING + (position % columns) * (width + PADDING), PADDING + (position // columns) * (height + PADDING)


def _show(args, tmp_path, capsys, title=None):
    """The picture below its title band; ``title`` collects the title lines printed."""
    out = tmp_path / "sub" / "batch.png"
    assert main(["show", *map(str, args), "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"wrote {out}" in printed
    if title is not None:
        title.extend(line.strip() for line in printed.splitlines()[1:])
    with Image.open(out) as picture:
        picture = np.array(picture.convert("RGB"))
    assert picture.shape[1] >= MIN_WIDTH and (picture[:TITLE_HEIGHT].min(axis=2) < 100).any()  # a title is drawn
    return picture[TITLE_HEIGHT:]


@pytest.fixture
def bare_tokenizer(tokenizer):
    """The fixture tokenizer without its decoder."""
    config = json.loads(tokenizer.to_str())
    config["decoder"] = None  # through its JSON: tokenizers 0.19 cannot set the attribute to None
    return Tokenizer.from_str(json.dumps(config))


@pytest.mark.parametrize("side", [1, 7, 40, 64, 96, 150, 199, 200, 224, 640])
def test_small_images_are_enlarged_to_the_readable_side_by_a_whole_factor(side):
    factor = upscale_factor(side, max(1, side // 2))
    assert side * factor >= READABLE_SIDE
    assert factor == 1 or side * (factor - 1) < READABLE_SIDE  # the smallest factor that reaches it


def test_image_grid_tiles_are_the_evaluation_images_in_order_enlarged(fixtures, tmp_path, capsys):
    from torchvision.transforms import v2

    picture = _show(["vision", fixtures / "vision", "--size", 40, "--batch-size", 6], tmp_path, capsys)
    factor = upscale_factor(40, 40)
    side = 40 * factor
    assert side >= READABLE_SIDE
    # 6 enlarged tiles in one row, each over two lines of text (class, file), make_grid padding around all
    assert picture.shape == (side + 2 * LINE_HEIGHT + 2 * PADDING, 6 * (side + PADDING) + PADDING, 3)
    files = sorted((fixtures / "vision" / "bird").iterdir())[:5] + [min((fixtures / "vision" / "cat").iterdir())]
    resize = v2.Compose([v2.Resize(round(40 * 256 / 224), antialias=True), v2.CenterCrop(40)])
    for position, file in enumerate(files):  # the oracle: PIL decode + the same v2 resize
        if file.name == "gray16.png":
            continue  # PIL's convert("RGB") clips 16-bit to white; tests/core/test_images covers it
        with Image.open(file) as original:
            expected = resize(torch.from_numpy(np.array(original.convert("RGB"))).permute(2, 0, 1))
        x, y = tile_origin(position, (side, side + 2 * LINE_HEIGHT), 6)
        tile = torch.from_numpy(picture[y : y + side : factor, x : x + side : factor]).permute(2, 0, 1)
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


def test_boxes_land_where_the_annotations_say_on_the_enlarged_image(tmp_path, capsys):
    path, annotations = _one_box_coco(tmp_path)
    picture = _show(["detection", path], tmp_path, capsys)
    k = READABLE_SIDE // 40  # every image scaled to the row height
    width, height = 60 * k, 40 * k
    assert picture.shape[0] == height + 2 * LINE_HEIGHT + 2 * PADDING
    assert (picture[:, 2 * (width + PADDING) + PADDING :] == 255).all()  # then only the white of a wider title
    grey = (128, 128, 128)
    for position, annotation in enumerate(annotations):
        x0, y0 = tile_origin(position, (width, height + 2 * LINE_HEIGHT), 2)
        x, y, w, h = (k * v for v in annotation["bbox"])
        colour = category_colour(annotation["category_id"])
        middle = y + h // 2
        # left and right edges at mid height, bottom edge at mid width: the box colour
        assert tuple(picture[y0 + middle, x0 + x]) == colour
        assert tuple(picture[y0 + middle, x0 + x + w]) == colour
        assert tuple(picture[y0 + y + h, x0 + x + w // 2]) == colour
        # just outside the box, and at the mirrored position, the untouched grey image
        assert tuple(picture[y0 + middle, x0 + x - 2]) == grey
        assert tuple(picture[y0 + middle, x0 + width - 1 - x]) == grey
        # the category name on a box of the category's colour, where place_labels put it
        (label,) = place_labels([(x, y, x + w, y + h)], [["car", "dog"][position]], (width, height))
        assert tuple(picture[y0 + label[1], x0 + label[0]]) == colour


@pytest.mark.parametrize("box", [
    (0, 0, 10, 10),            # top-left corner: no room above
    (50, 30, 60, 40),          # bottom-right corner
    (-20, -20, 90, 70),        # larger than the image
    (58, 0, 60, 2),            # a sliver at the right edge
], ids=["corner", "far-corner", "oversized", "sliver"])
def test_every_label_lies_inside_the_image(box):
    texts = ["a category name far wider than the image", "person", "x"]
    for placed, text in zip(place_labels([box] * 3, texts, (60, 40)), texts):
        x0, y0, x1, y1 = placed
        assert 0 <= x0 < x1 <= 60 and 0 <= y0 < y1 <= 40, (placed, text)


def test_labels_of_neighbouring_boxes_do_not_cover_each_other():
    boxes = [(40, 60, 100, 120), (44, 64, 104, 124), (48, 68, 108, 128)]
    placed = place_labels(boxes, ["person", "person", "person"], (300, 200))
    for i, a in enumerate(placed):
        for b in placed[i + 1 :]:
            assert not (a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]), placed


def test_words_are_cut_or_wrapped_to_the_width_never_past_it():
    assert text_width(fit("a category name far wider than the image", 60)) <= 60
    for line in wrap("supercalifragilisticexpialidocious and some shorter words after it", 80, 10):
        assert text_width(line) <= 80 - 4, line
    assert wrap("one two three four five six seven eight", 60, 2)[-1].endswith("…")


def test_captions_and_token_rows_read_what_the_decoder_gives(tokenizer):
    ids = tokenizer.encode("Ready but she and the café, during?").ids
    assert caption_text(tokenizer, ids) == tokenizer.decode(ids, skip_special_tokens=True) == (
        "Ready but she and the café, during?")
    pieces = token_pieces(tokenizer, ids)
    assert len(pieces) == len(ids) and "".join(pieces) == tokenizer.decode(ids, skip_special_tokens=False)


def test_a_tokenizer_without_a_decoder_shows_its_pieces_joined(bare_tokenizer):
    ids = bare_tokenizer.encode("Ready but she").ids
    pieces = [bare_tokenizer.id_to_token(i) for i in ids]
    assert token_pieces(bare_tokenizer, ids) == pieces
    assert caption_text(bare_tokenizer, ids) == SEPARATOR.join(pieces[1:-1])  # [CLS] and [SEP] left out


def test_caption_tiles_show_the_enlarged_images_over_their_decoded_captions(fixtures, tmp_path, capsys):
    picture = _show(["multimodal", fixtures / "multimodal/manifest.jsonl", "--tokenizer",
                     fixtures / "text/tokenizer.json", "--size", 48, "--batch-size", 4], tmp_path, capsys)
    side = 48 * upscale_factor(48, 48)
    assert picture.shape[1] == 4 * (side + PADDING) + PADDING
    lines = (picture.shape[0] - 2 * PADDING - side) / LINE_HEIGHT
    assert lines == int(lines) and 2 <= lines <= 5  # the index and file, then up to 4 lines of caption
    # the band under each image holds dark text pixels
    for position in range(4):
        x, y = tile_origin(position, (side, picture.shape[0] - 2 * PADDING), 4)
        band = picture[y + side : y + side + LINE_HEIGHT, x : x + side]
        assert (band.min(axis=2) < 100).any(), position


def test_token_rows_hold_the_decoded_tokens_and_shade_exactly_the_padded_rows(fixtures, tokenizer, tmp_path, capsys):
    path = fixtures / "text/labeled.jsonl"
    picture = _show(["text", path, "--batch-size", 5, "--max-length", 40, "--label-field", "label"], tmp_path, capsys)
    rows = [json.loads(line)["text"] for line in path.read_text(encoding="utf-8").splitlines()[:5]]
    encoded = [tokenizer.encode(text).ids[:40] for text in rows]  # evaluation: file order
    longest = max(map(len, encoded))
    top = HEADER
    for ids in encoded:
        chips = layout_row(tokenizer, ids, longest - len(ids))
        tokens = [chip for chip in chips if chip.kind == "token"]
        assert [chip.token_id for chip in tokens] == ids
        assert "".join(chip.text for chip in tokens) == tokenizer.decode(ids, skip_special_tokens=False)
        assert sum(chip.width for chip in chips if chip.kind == "pad") == 6 * (longest - len(ids))
        band = picture[top : top + row_height(chips), MARGIN:]
        shaded = (band == PAD_COLOUR).all(axis=2).any()
        assert shaded == (len(ids) < longest)
        assert (picture[top + 4 : top + LINE_HEIGHT, :MARGIN].min(axis=2) < 100).any()  # the label column
        top += row_height(chips)
    assert picture.shape[0] == top


def test_a_long_sample_ends_in_an_ellipsis_within_its_lines(tokenizer, bare_tokenizer):
    ids = tokenizer.encode(" ".join(["interesting words"] * 200)).ids
    for tok in (tokenizer, bare_tokenizer):
        chips = layout_row(tok, ids, 0, width=400, max_lines=2)
        assert chips[-1].kind == "more" and max(chip.line for chip in chips) == 1
        assert all(chip.x + chip.width <= 400 for chip in chips)


def test_the_token_picture_of_a_tokenizer_without_a_decoder_renders(fixtures, bare_tokenizer):
    from recipes.text import TokenizedTextDataset, text_collate

    dataset = TokenizedTextDataset(fixtures / "text/labeled.jsonl", bare_tokenizer)
    picture = render_tokens(text_collate([dataset[i] for i in range(3)]), bare_tokenizer)
    assert picture.width > MARGIN and picture.height > HEADER


def test_a_training_batch_can_be_shown_too(fixtures, tmp_path, capsys):
    picture = _show(["vision", fixtures / "vision", "--size", 32, "--batch-size", 4, "--train"], tmp_path, capsys)
    side = 32 * upscale_factor(32, 32)
    assert picture.shape == (side + 2 * LINE_HEIGHT + 2 * PADDING, max(MIN_WIDTH, 4 * (side + PADDING) + PADDING), 3)


@pytest.mark.parametrize(("batch_size", "train", "left_out"), [
    (8, True, "left out: 6 dropped by training as incomplete batches"),      # 14 images: one batch of 8
    (4, True, "left out: 8 samples in later batches; 2 dropped by training"),
    (20, True, "nothing left out: the dataset holds fewer samples than the batch size, all 14 in this one batch"),
    (8, False, "left out: 6 samples in later batches"),
])
def test_the_title_says_how_many_were_drawn_and_why_the_rest_were_left_out(fixtures, tmp_path, capsys, batch_size,
                                                                          train, left_out):
    title = []
    _show(["vision", fixtures / "vision", "--size", 32, "--batch-size", batch_size, *(["--train"] if train else [])],
          tmp_path, capsys, title)
    mode = "training" if train else "evaluation"
    assert title[0].startswith(f"vision: the first {mode} batch") and f"batch size {batch_size}, {min(batch_size, 14)} drawn" in title[0]
    assert title[1].startswith(left_out), title


def test_each_tile_is_named_by_the_file_the_batch_drew(fixtures):
    from recipes.cli.datasets import DataOptions, make_loader, open_dataset
    from recipes.cli.show import first_batch_indices, sample_names

    dataset = open_dataset(DataOptions("vision", fixtures / "vision", size=32), train=True)
    loader = make_loader("vision", dataset, 8, train=True, device="cpu", num_workers=0)
    indices = first_batch_indices(loader)
    _, labels = next(iter(loader))  # the sampler was left at epoch 0: the same batch
    assert labels.tolist() == [dataset.targets[i] for i in indices]
    files = [dataset.samples[i][0] for i in indices]
    assert sample_names(dataset, indices) == [f"{os.path.basename(os.path.dirname(f))}/{os.path.basename(f)}" for f in files]


def test_box_rows_have_no_gaps_and_crowd_regions_are_hatched(tmp_path, capsys):
    (tmp_path / "images").mkdir()
    sizes = {"wide.png": (90, 30), "tall.png": (30, 90)}
    for name, size in sizes.items():
        Image.new("RGB", size, (128, 128, 128)).save(tmp_path / "images" / name)
    path = tmp_path / "instances.json"
    path.write_text(json.dumps({
        "images": [{"id": 1, "file_name": "wide.png", "width": 90, "height": 30},
                   {"id": 2, "file_name": "tall.png", "width": 30, "height": 90}],
        "annotations": [{"id": 10, "image_id": 1, "category_id": 3, "bbox": [4, 4, 20, 20], "area": 400, "iscrowd": 0},
                        {"id": 11, "image_id": 1, "category_id": 3, "bbox": [50, 4, 30, 20], "area": 600, "iscrowd": 1}],
        "categories": [{"id": 3, "name": "car"}],
    }))
    title = []
    picture = _show(["detection", path], tmp_path, capsys, title)
    # both images scaled to one row height: a 3:1 and a 1:3 tile side by side, no padding to the larger
    height = READABLE_SIDE
    wide, tall = 3 * height, height // 3
    assert picture.shape[0] == height + 2 * LINE_HEIGHT + 2 * PADDING
    assert (picture[PADDING : PADDING + height, PADDING + wide + PADDING + tall - 1] != 255).any()  # the tall tile's last column
    scale = height / 30
    colour = category_colour(3)
    inside = lambda box: picture[PADDING + round(box[1] * scale) + 4 : PADDING + round((box[1] + box[3]) * scale) - 4,
                                 PADDING + round(box[0] * scale) + 4 : PADDING + round((box[0] + box[2]) * scale) - 4]
    assert (inside([4, 4, 20, 20]) == 128).all()  # a plain box leaves its inside alone
    crowd = inside([50, 4, 30, 20])
    hatched = (crowd == colour).all(axis=2)
    assert 0.1 < hatched.mean() < 0.5 and ((crowd == 128).all(axis=2) | hatched).all()
    assert "image 1: 1 box, 1 crowd" not in title and any("hatched: crowd regions" in line for line in title)


def test_bad_data_stops_show_with_a_message_naming_the_file(fixtures, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["show", "detection", str(fixtures / "hostile/coco/unknown_category.json"), "-o", str(tmp_path / "x.png")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "unknown_category.json" in err and "annotation 2" in err and "recipes check" in err


def test_accented_letters_are_drawn_not_boxed():
    from PIL import ImageDraw

    from recipes.cli.drawing import font

    if "DejaVu" not in getattr(font(), "path", ""):
        pytest.skip("no DejaVu Sans on this machine (nor matplotlib's): PIL's own font draws ASCII only")

    def glyph(letter: str) -> np.ndarray:
        canvas = Image.new("L", (30, 30))
        ImageDraw.Draw(canvas).text((5, 5), letter, font=font(), fill=255)
        return np.asarray(canvas)

    missing = glyph("\uffff")  # no font has it: the missing-glyph box
    drawn = [glyph(letter) for letter in "eéèüñß"]
    assert all(not np.array_equal(letters, missing) for letters in drawn)
    assert len({letters.tobytes() for letters in drawn}) == len(drawn)  # each letter its own shape
