"""Tests for recipes/fixtures.py: determinism, the committed copy, and the edge cases it promises.

Test names avoid the domain words (pytest -k selects by substring), so folders are reached
through the ROOT constant rather than named in test ids.
"""

import csv
import json
import shutil
import statistics
import struct
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageOps

from recipes import fixtures
from recipes.domains import DOMAINS, REGISTRY

ROOT = Path(__file__).resolve().parents[2] / "fixtures"
IMAGES, WORDS, BOXES, PAIRS, HOSTILE = (
    ROOT / d for d in ("vision", "text", "detection", "multimodal", "hostile"))
NOT_GENERATED = {"generate.py"}  # the script lives next to its output


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file() and "__pycache__" not in p.parts
            and p.relative_to(root).as_posix() not in NOT_GENERATED}


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    return _tree(fixtures.generate(tmp_path_factory.mktemp("fresh")))


def test_generator_is_deterministic(fresh: dict[str, bytes], tmp_path: Path) -> None:
    again = _tree(fixtures.generate(tmp_path / "again"))
    assert sorted(again) == sorted(fresh)
    assert [k for k in fresh if fresh[k] != again[k]] == []


def test_committed_fixtures_match_generator(fresh: dict[str, bytes]) -> None:
    # Byte for byte, tokenizer.json included (BPE training was checked stable across thread
    # counts). Image bytes depend on the Pillow build (libjpeg-turbo, zlib); on a failure after
    # a Pillow upgrade, regenerate with `python fixtures/generate.py` and commit.
    committed = _tree(ROOT)
    assert sorted(committed) == sorted(fresh), "run python fixtures/generate.py"
    stale = [k for k in fresh if fresh[k] != committed[k]]
    assert stale == [], f"stale fixtures {stale}: run python fixtures/generate.py"


def test_fixtures_stay_small() -> None:
    assert sum(len(b) for b in _tree(ROOT).values()) < 1_500_000


def test_bomb_header_claims_huge_image_in_tiny_file() -> None:
    data = (HOSTILE / "images/bomb.png").read_bytes()
    assert len(data) < 1024 and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert width * height > 200_000_000
    with pytest.raises(Image.DecompressionBombError):
        Image.open(HOSTILE / "images/bomb.png")


def test_exif_orientation_six_turns_landscape_into_portrait() -> None:
    with Image.open(IMAGES / "dog/exif_rot6.jpg") as img:
        assert img.getexif()[0x0112] == 6 and img.size == (96, 64)
        upright = ImageOps.exif_transpose(img)
    assert upright.size == (64, 96)
    red, _, blue = upright.getpixel((4, 4))
    assert red > 200 and blue < 60  # the red marker is top-left only once rotated


def test_special_image_modes() -> None:
    modes = {"cat/cmyk.jpg": {"CMYK"}, "bird/gray16.png": {"I;16", "I"}, "bird/gray.png": {"L"},
             "cat/gray.jpg": {"L"}, "bird/palette.png": {"P"}, "cat/rgba.png": {"RGBA"}}
    for name, allowed in modes.items():
        with Image.open(IMAGES / name) as img:
            assert img.mode in allowed, name
    with Image.open(IMAGES / "bird/gray16.png") as img:
        values = np.asarray(img)
        assert (values.min(), values.max()) == (0, 65535)
    with Image.open(IMAGES / "bird/palette.png") as img:
        assert "transparency" in img.info


def test_image_folder_matches_reference_loader() -> None:
    folder = pytest.importorskip("torchvision.datasets").ImageFolder(str(IMAGES))
    assert folder.classes == ["bird", "cat", "dog"]
    names = [Path(p).relative_to(IMAGES).as_posix() for p, _ in folder.samples]
    assert "cat/X.JPG" in names and "dog/puppies/p0.jpg" in names
    assert "cat/notes.txt" not in names and (IMAGES / "cat/notes.txt").exists()
    assert all(4 <= folder.targets.count(c) <= 6 for c in range(3))


def test_coco_instances_cover_edge_cases() -> None:
    coco = json.loads((BOXES / "instances.json").read_text(encoding="utf-8"))
    cat_ids = [c["id"] for c in coco["categories"]]
    assert cat_ids != list(range(1, len(cat_ids) + 1))
    assert all(c["supercategory"] for c in coco["categories"])
    image_ids = [i["id"] for i in coco["images"]]
    assert image_ids != list(range(1, len(image_ids) + 1))
    shapes = {(i["width"], i["height"]) for i in coco["images"]}
    assert {(96, 64), (64, 96), (80, 80)} <= shapes
    anns = coco["annotations"]
    assert len({a["id"] for a in anns}) == len(anns)
    per_image = {i: sum(a["image_id"] == i for a in anns) for i in image_ids}
    assert sorted(per_image.values())[0] == 0 and sorted(per_image.values())[1] >= 2
    assert max(per_image.values()) <= 4 and list(per_image.values()).count(0) == 1
    sizes = {i["id"]: (i["width"], i["height"]) for i in coco["images"]}
    for a in anns:
        x, y, w, h = a["bbox"]
        width, height = sizes[a["image_id"]]
        assert w > 0 and h > 0 and x >= 0 and y >= 0 and x + w <= width and y + h <= height
        assert a["category_id"] in cat_ids and (BOXES / "images" / coco["images"][
            image_ids.index(a["image_id"])]["file_name"]).is_file()
    crowd = [a for a in anns if a["iscrowd"]]
    assert len(crowd) >= 2 and all(isinstance(a["segmentation"]["counts"], list) for a in crowd)
    compressed = [a for a in anns if isinstance(a["segmentation"], dict)
                  and isinstance(a["segmentation"]["counts"], str)]
    assert len(compressed) == 1 and compressed[0]["iscrowd"] == 0


def test_rle_masks_agree_with_pycocotools() -> None:
    mask_utils = pytest.importorskip("pycocotools.mask")
    coco = json.loads((BOXES / "instances.json").read_text(encoding="utf-8"))
    for a in coco["annotations"]:
        seg = a["segmentation"]
        if not isinstance(seg, dict):
            continue
        rle = mask_utils.frPyObjects(seg, *seg["size"]) if a["iscrowd"] else seg
        assert float(mask_utils.area(rle)) == a["area"]
        assert mask_utils.toBbox(rle).tolist() == a["bbox"]
        mask = mask_utils.decode(rle)
        encoded = mask_utils.encode(np.asfortranarray(mask))["counts"].decode()
        assert fixtures.rle_string(fixtures.rle_counts(mask)) == encoded
        if a["iscrowd"]:
            assert fixtures.rle_counts(mask) == seg["counts"]
        else:
            assert seg["counts"] == encoded


def test_corpus_is_long_tailed_utf8() -> None:
    lines = (WORDS / "corpus.txt").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 200 and all(line.strip() for line in lines)
    counts = [len(line.split()) for line in lines]
    assert max(counts) / statistics.median(counts) > 10 and max(counts) >= 100
    joined = "\n".join(lines)
    assert "café" in joined and "naïve" in joined and "🐱" in joined


def test_labeled_rows_parse_with_quotes_and_labels() -> None:
    rows = [json.loads(line) for line in (WORDS / "labeled.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 120 and {r["label"] for r in rows} == {0, 1, 2}
    with (WORDS / "labeled.csv").open(encoding="utf-8", newline="") as f:
        table = list(csv.DictReader(f))
    assert len(table) == 80 and {int(r["label"]) for r in table} == {0, 1, 2}
    assert any('"' in r["text"] and "," in r["text"] for r in table)


def test_tokenizer_has_specials_template_and_no_padding() -> None:
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.Tokenizer.from_file(str(WORDS / "tokenizer.json"))
    ids = [tok.token_to_id(t) for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]")]
    assert ids == [0, 1, 2, 3] and 600 <= tok.get_vocab_size() <= 1000
    assert tok.padding is None and tok.truncation is None
    enc = tok.encode("the café, too.")
    assert enc.tokens[0] == "[CLS]" and enc.tokens[-1] == "[SEP]" and "▁café" in enc.tokens
    assert tok.decode(enc.ids) == "the café, too."  # the decoder puts the spaces back
    assert tok.encode("a", "b").type_ids == [0, 0, 0, 1, 1]


def test_caption_files_describe_the_same_images() -> None:
    rows = [json.loads(line) for line in (PAIRS / "manifest.jsonl").read_text(encoding="utf-8").splitlines()]
    assert sum("captions" in r for r in rows) == 1 and sum("caption" in r for r in rows) == 7
    with (PAIRS / "manifest.csv").open(encoding="utf-8", newline="") as f:
        table = list(csv.DictReader(f))
    coco = json.loads((PAIRS / "captions.json").read_text(encoding="utf-8"))
    files = [i["file_name"] for i in coco["images"]]
    assert [r["image"] for r in rows] == [r["image"] for r in table] == files
    assert all((PAIRS / name).is_file() for name in files)  # relative to the json's folder
    per_image = [sum(a["image_id"] == i["id"] for a in coco["annotations"]) for i in coco["images"]]
    assert min(per_image) >= 2 and max(per_image) <= 5


def test_hostile_cases_are_each_broken_one_way() -> None:
    def load(name: str) -> dict:
        return json.loads((HOSTILE / "coco" / name).read_text(encoding="utf-8"))

    assert "../escape.jpg" in [i["file_name"] for i in load("escape.json")["images"]]
    unknown = load("unknown_category.json")
    known = {c["id"] for c in unknown["categories"]}
    assert [a["id"] for a in unknown["annotations"] if a["category_id"] not in known] == [2]
    assert [a["id"] for a in load("negative_box.json")["annotations"] if a["bbox"][2] < 0] == [3]
    lines = (HOSTILE / "text/bad_utf8.txt").read_bytes().split(b"\n")
    assert b"\xff\xfe" in lines[2]
    lines[2].decode("latin-1")
    with pytest.raises(UnicodeDecodeError):
        lines[2].decode("utf-8")
    rows = [json.loads(line) for line in (HOSTILE / "text/missing_field.jsonl").read_text(encoding="utf-8").splitlines()]
    assert ["text" in r for r in rows] == [True, False, True]
    assert (HOSTILE / "images/empty.jpg").stat().st_size == 0
    with pytest.raises(OSError), Image.open(HOSTILE / "images/truncated.jpg") as img:
        img.load()
    with pytest.raises(Image.UnidentifiedImageError):
        Image.open(HOSTILE / "images/not_an_image.jpg")


def test_fixtures_dir_is_usable() -> None:
    root = fixtures.fixtures_dir()
    assert (root / "VERSION").read_text().strip() == fixtures.FIXTURES_VERSION
    assert all((root / d).is_dir() for d in DOMAINS)


def test_cached_copy_is_generated_once_and_atomically(tmp_path: Path) -> None:
    first = fixtures._cached_fixtures(tmp_path)
    stamp = (first / "VERSION").stat().st_mtime_ns
    assert fixtures._cached_fixtures(tmp_path) == first
    assert (first / "VERSION").stat().st_mtime_ns == stamp
    assert [p.name for p in tmp_path.iterdir()] == [first.name]  # no staging dir left behind
    assert _tree(first) == _tree(ROOT)


def test_cache_key_hashes_every_module_of_the_generator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    writers = {entry.fixtures.partition(":")[0] for entry in REGISTRY if entry.load("fixtures")}  # imported now
    loaded = {Path(module.__file__).resolve() for name, module in sys.modules.items()
              if name in ("recipes.fixtures", "recipes.domains", *writers) or name.startswith("recipes.fixtures_")}
    assert loaded == {path.resolve() for path in fixtures.GENERATOR_FILES}
    copies = [Path(shutil.copy(path, tmp_path / path.name)) for path in fixtures.GENERATOR_FILES]
    monkeypatch.setattr(fixtures, "GENERATOR_FILES", tuple(copies))
    for copy in copies:  # an edit to any one of them is a new key
        before = fixtures._generator_hash()
        copy.write_text(copy.read_text(encoding="utf-8") + "# edited\n", encoding="utf-8")
        assert fixtures._generator_hash() != before
