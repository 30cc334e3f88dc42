"""The core parsers on mutated fixture files: a clean load or a DataError naming the file, nothing else."""

from functools import partial
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from recipes.core.contracts.arrays import TokenArray
from recipes.detection import coco_files
from recipes.multimodal.caption_files import read_caption_manifest
from recipes.text.corpus_files import parse_line, read_rows
from recipes.text.token_cache import load_cache, save_cache
from tests.core.mutations import fuzz_settings, load_or_data_error, mutated_file, quiet

FUZZ = fuzz_settings(60)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


@pytest.mark.parametrize("parser", ["msgspec", "stdlib"])
@FUZZ
@given(data=st.data(), masks=st.booleans())
def test_instances_reader_on_mutated_coco(fixtures, scratch, parser, data, masks):
    path = scratch / "instances.json"
    path.write_bytes(mutated_file(data, fixtures / "detection" / "instances.json"))
    with mock.patch.object(coco_files, "msgspec", coco_files.msgspec if parser == "msgspec" else None):
        columns = load_or_data_error(lambda: coco_files.read_instances(path, masks=masks), path)
    if columns is not None:  # what the dataset relies on: flat columns of one length each
        assert columns["bbox"].shape == (len(columns["ann_ids"]), 4)
        assert len(columns["image_ids"]) == len(columns["file_names"]) == len(columns["widths"])
        assert columns["ann_ids"].dtype == np.int64 and columns["category_ids"].dtype == np.int64


@pytest.mark.parametrize("name", ["manifest.jsonl", "captions.json", "manifest.csv"], ids=["jsonl", "coco", "csv"])
@FUZZ
@given(data=st.data(), on_error=st.sampled_from(["raise", "skip"]))
def test_caption_manifest_reader_on_mutated_files(fixtures, scratch, name, data, on_error):
    path = scratch / name
    path.write_bytes(mutated_file(data, fixtures / "multimodal" / name))
    with quiet():
        manifest = load_or_data_error(lambda: read_caption_manifest(path, on_error=on_error), path)
    if manifest is not None:
        assert len(manifest.images) == len(manifest.captions) == len(manifest.keys)
        assert all(isinstance(image, str) for image in manifest.images)
        assert all(c and all(isinstance(t, str) and t.strip() for t in c) for c in manifest.captions)
        np.asarray(manifest.keys, dtype=np.int64)  # the dataset stores them so


@pytest.mark.parametrize("name", ["labeled.jsonl", "labeled.csv", "corpus.txt"], ids=["jsonl", "csv", "txt"])
@FUZZ
@given(data=st.data(), on_error=st.sampled_from(["raise", "skip"]))
def test_row_reader_on_mutated_files(fixtures, scratch, name, data, on_error):
    path = scratch / name
    path.write_bytes(mutated_file(data, fixtures / "text" / name))
    label = None if name.endswith(".txt") else "label"
    with quiet():
        rows = load_or_data_error(lambda: read_rows(path, label_field=label, on_error=on_error), path)
    if rows is not None:
        assert len(rows.texts) == len(rows.lines) and all(text.strip() for text in rows.texts)
        assert all(isinstance(text, str) for text in rows.texts)
        for text in rows.texts:
            text.encode("utf-8")  # no lone surrogate reaches the tokenizer


@FUZZ
@given(line=st.binary(max_size=200) | st.text(max_size=200).map(lambda t: t.encode("utf-8", "surrogatepass")))
def test_parse_line_on_arbitrary_bytes(line):
    where = Path("stream.jsonl")
    for json_row in (True, False):
        parsed = load_or_data_error(partial(parse_line, line, "stream.jsonl byte 0", json_row=json_row), where)
        if parsed is not None:
            assert isinstance(parsed[0], str) and parsed[0].strip()


@FUZZ
@given(data=st.data(), verify=st.booleans())
def test_token_cache_on_mutated_files(scratch, data, verify):
    prefix = scratch / ("cache-" + "0" * 32)
    lines, labels = np.arange(3), np.array([1, 0, 1])
    save_cache(prefix, TokenArray(np.arange(50, dtype=np.uint16), np.array([0, 10, 20, 50])),
               {"lines": lines, "labels": labels}, label_names=["a", "b"])
    target = data.draw(st.sampled_from(sorted(scratch.glob(f"{prefix.name}.*"))), label="file")
    target.write_bytes(mutated_file(data, target))
    need = {"require_columns": ("lines", "labels"), "require_meta": ("label_names",)}
    loaded = load_or_data_error(lambda: load_cache(prefix, verify=verify, **need), target)
    if loaded is not None and (verify or target.suffix == ".json"):  # what the record vouches for
        tokens, columns, meta = loaded
        assert tokens.ids.tolist() == list(range(50)) and tokens.offsets.tolist() == [0, 10, 20, 50]
        assert columns["lines"].tolist() == [0, 1, 2] and columns["labels"].tolist() == [1, 0, 1]
        assert meta["label_names"] == ["a", "b"]
