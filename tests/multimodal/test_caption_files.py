"""read_caption_manifest: JSONL / CSV / TSV / COCO captions rows, line numbers, the error policy."""

import json

import pytest

from recipes.core.contracts.errors import DataError, SkippedSampleWarning
from recipes.multimodal.caption_files import read_caption_manifest


def test_the_three_fixture_formats_give_the_same_images_and_first_captions(fixtures):
    root = fixtures / "multimodal"
    jsonl, csv_rows, coco = (read_caption_manifest(root / n) for n in ("manifest.jsonl", "manifest.csv", "captions.json"))
    assert jsonl.images == csv_rows.images == coco.images == [f"images/img_{i}.jpg" for i in range(8)]
    assert [c[0] for c in jsonl.captions] == [c[0] for c in csv_rows.captions] == [c[0] for c in coco.captions]
    assert len(jsonl.captions[3]) == 3 and all(len(c) == 1 for i, c in enumerate(jsonl.captions) if i != 3)
    raw = json.loads((root / "captions.json").read_text(encoding="utf-8"))
    assert sum(len(c) for c in coco.captions) == len(raw["annotations"])
    assert coco.keys == [image["id"] for image in raw["images"]]
    assert jsonl.where(2) == f"{root / 'manifest.jsonl'} line 3" and coco.where(0).endswith("image id 2")


def test_tsv_with_a_byte_order_mark_and_blank_jsonl_lines(tmp_path):
    tsv = tmp_path / "m.tsv"
    tsv.write_bytes("\ufeffimage\tcaption\na.jpg\ta cat, sitting\n".encode())
    rows = read_caption_manifest(tsv)
    assert rows.images == ["a.jpg"] and rows.captions == [["a cat, sitting"]] and rows.keys == [2]
    jsonl = tmp_path / "m.jsonl"
    jsonl.write_text('\n{"image": "a.jpg", "caption": "x"}\n\n', encoding="utf-8")
    assert read_caption_manifest(jsonl).keys == [2]


def test_invalid_utf8_names_its_line_and_skip_drops_only_that_row(tmp_path):
    jsonl = tmp_path / "m.jsonl"
    jsonl.write_bytes(b'{"image": "a.jpg", "caption": "ok"}\n{"image": "b.jpg", "caption": "\xff"}\n')
    with pytest.raises(DataError, match="m.jsonl line 2"):
        read_caption_manifest(jsonl)
    with pytest.warns(SkippedSampleWarning, match="line 2"):
        assert read_caption_manifest(jsonl, on_error="skip").images == ["a.jpg"]


def test_unknown_suffix_and_missing_file_are_clear(tmp_path):
    with pytest.raises(ValueError, match="unknown manifest format '.parquet'"):
        read_caption_manifest(tmp_path / "m.parquet")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_caption_manifest(tmp_path / "m.jsonl")
