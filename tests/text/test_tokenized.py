"""TokenizedTextDataset: id parity with tokenizer.encode, file formats, bad lines, labels, cache."""

import csv
import json
import pickle
import warnings

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers, processors

from recipes.core.contracts.errors import DataError, SkippedSampleWarning
from recipes.core.contracts.read_options import ReadOptions
from recipes.text import TokenizedTextDataset, pack_collate, text_loader
from recipes.text.token_cache import DamagedCacheWarning
from tests.harness import with_skip_warnings
from tests.special_tokens import truncated


@pytest.fixture(scope="module")
def tok(fixtures):
    return Tokenizer.from_file(str(fixtures / "text" / "tokenizer.json"))


def _oracle_rows(path):
    """(text, label) per sample, read independently of recipes.text.corpus_files."""
    if path.suffix == ".txt":
        return [(line, None) for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]
    if path.suffix == ".jsonl":
        return [(row["text"], row["label"]) for row in map(json.loads, path.read_text(encoding="utf-8").splitlines())]
    with open(path, newline="", encoding="utf-8") as file:
        return [(row["text"], int(row["label"])) for row in csv.DictReader(file)]


@pytest.mark.parametrize("name", ["corpus.txt", "labeled.jsonl", "labeled.csv"])
@pytest.mark.parametrize("max_length", [None, 9], ids=["full", "cut9"])
def test_ids_equal_encode_truncated_to_max_length_keeping_special_tokens(fixtures, tok, name, max_length):
    path = fixtures / "text" / name
    label_field = None if name.endswith(".txt") else "label"
    dataset = TokenizedTextDataset(path, tok, label_field=label_field, max_length=max_length)
    rows = _oracle_rows(path)
    assert len(dataset) == len(rows) > 50
    for index, (text, label) in enumerate(rows):
        item = dataset[index]
        expected = truncated(tok, text, max_length)
        assert item["input_ids"].dtype == torch.int64 and item["input_ids"].tolist() == expected
        assert item["index"] == index and dataset.lengths[index] == len(expected)
        assert item.get("label") == label
    assert dataset.tokens.ids.dtype == np.uint16  # 793 ids fit in 16 bits
    assert dataset[0]["input_ids"][0] == tok.token_to_id("[CLS]")
    assert all(dataset[i]["input_ids"][-1] == tok.token_to_id("[SEP]") for i in range(len(dataset)))


def test_csv_fields_keep_quoted_commas_and_quotes(fixtures, tok):
    dataset = TokenizedTextDataset(fixtures / "text" / "labeled.csv", tok, label_field="label")
    text = _oracle_rows(fixtures / "text" / "labeled.csv")[0][0]
    assert '"' in text and "," in text
    assert dataset[0]["input_ids"].tolist() == tok.encode(text).ids


def _word_tokenizer(words, pad="[PAD]"):
    vocab = {w: i for i, w in enumerate([pad, "[UNK]", "[CLS]", "[SEP]", *words])}
    t = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    t.pre_tokenizer = pre_tokenizers.Whitespace()
    t.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    return t


def test_large_vocabularies_are_stored_as_uint32_without_losing_ids(tmp_path):
    words = [f"w{i}" for i in range(70_000)]
    t = _word_tokenizer(words)
    (tmp_path / "big.txt").write_text("w69999 w1 w65536\nw0\n", encoding="utf-8")
    dataset = TokenizedTextDataset(tmp_path / "big.txt", t)
    assert dataset.tokens.ids.dtype == np.uint32
    assert dataset[0]["input_ids"].tolist() == [2, 70_003, 5, 65_540, 3]


def test_batch_padding_in_the_tokenizer_does_not_leak_into_ids(tmp_path):
    t = _word_tokenizer(["a", "b"])
    t.enable_padding(pad_id=0, pad_token="[PAD]")
    (tmp_path / "d.txt").write_text("a\na b a b a\n", encoding="utf-8")
    dataset = TokenizedTextDataset(tmp_path / "d.txt", t)
    assert dataset[0]["input_ids"].tolist() == t.encode("a").ids == [2, 4, 3]


def test_tokenizer_path_and_object_give_the_same_dataset(fixtures, tok):
    by_path = TokenizedTextDataset(fixtures / "text" / "corpus.txt", str(fixtures / "text" / "tokenizer.json"))
    by_object = TokenizedTextDataset(fixtures / "text" / "corpus.txt", tok)
    assert np.array_equal(by_path.tokens.ids, by_object.tokens.ids)


def test_pad_id_from_pad_token_padding_config_or_argument_and_a_clear_error(tmp_path):
    (tmp_path / "d.txt").write_text("a b\n", encoding="utf-8")
    assert TokenizedTextDataset(tmp_path / "d.txt", _word_tokenizer(["a", "b"])).pad_id == 0
    assert TokenizedTextDataset(tmp_path / "d.txt", _word_tokenizer(["a", "b"], pad="<pad>")).pad_id == 0
    configured = _word_tokenizer(["a", "b"])
    configured.enable_padding(pad_id=3, pad_token="[SEP]")
    assert TokenizedTextDataset(tmp_path / "d.txt", configured).pad_id == 3
    nameless = _word_tokenizer(["a", "b"], pad="nothing")
    assert TokenizedTextDataset(tmp_path / "d.txt", nameless, pad_id=7).pad_id == 7
    dataset = TokenizedTextDataset(tmp_path / "d.txt", nameless)
    with pytest.raises(ValueError, match=r"pad_id=\.\.\."):
        _ = dataset.pad_id
    assert pack_collate([dataset[0]])["input_ids"].tolist() == [[2, 4, 5, 3]]  # packing needs no pad id


def test_blank_lines_are_not_samples_and_line_numbers_stay_true(tmp_path, tok):
    (tmp_path / "d.txt").write_bytes(b"first line\r\n\r\n   \nsecond line\n\nthird\n")
    dataset = TokenizedTextDataset(tmp_path / "d.txt", tok)
    assert len(dataset) == 3 and dataset.line_numbers.tolist() == [1, 4, 6]
    assert dataset[0]["input_ids"].tolist() == tok.encode("first line").ids  # \r\n removed


def test_invalid_utf8_names_file_and_line_or_is_skipped_with_a_warning(fixtures, tok):
    path = fixtures / "hostile" / "text" / "bad_utf8.txt"
    with pytest.raises(DataError, match=r"bad_utf8\.txt line 3: not valid UTF-8"):
        TokenizedTextDataset(path, tok)
    with pytest.warns(SkippedSampleWarning, match=r"bad_utf8\.txt line 3"):
        dataset = TokenizedTextDataset(path, tok, on_error="skip")
    assert dataset.line_numbers.tolist() == [1, 2, 4]
    assert dataset[2]["input_ids"].tolist() == tok.encode("fourth line is fine").ids


def test_missing_field_names_line_and_key_or_is_skipped(fixtures, tok):
    path = fixtures / "hostile" / "text" / "missing_field.jsonl"
    with pytest.raises(DataError, match=r"missing_field\.jsonl line 2: no 'text' field"):
        TokenizedTextDataset(path, tok, label_field="label")
    with pytest.warns(SkippedSampleWarning, match="line 2"):
        dataset = TokenizedTextDataset(path, tok, label_field="label", on_error="skip")
    assert [dataset[i]["label"] for i in range(len(dataset))] == [0, 2]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"text": "ok", "label": 1}\n{"text": "x", "label": 1\n', "line 2: not valid JSON"),
        (b'{"text": "ok", "label": 1}\n["a list"]\n', "line 2: expected a JSON object"),
        (b'{"text": "ok", "label": 1}\n{"text": 5, "label": 1}\n', "line 2: field 'text' is int"),
        (b'{"text": "ok", "label": 1}\n{"text": "  ", "label": 1}\n', "line 2: field 'text' is empty"),
        (b'{"text": "ok", "label": 1}\n{"text": "x"}\n', "line 2: no 'label' field"),
        (b'{"text": "ok", "label": 1}\n{"text": "x", "label": null}\n', "line 2: field 'label' holds no label"),
        (b'{"text": "ok", "label": 1}\n{"text": "x", "label": 0.5}\n', "line 2: label 0.5 is neither"),
        (b'{"text": "ok", "label": 1}\n{"text": "\\udc80", "label": 1}\n', "line 2: field 'text' is not valid"),
    ],
    ids=["bad-json", "not-object", "not-string", "empty", "no-label", "null-label", "float-label", "lone-surrogate"],
)
def test_each_bad_jsonl_row_is_a_data_error_naming_its_line(tmp_path, tok, content, message):
    (tmp_path / "bad.jsonl").write_bytes(content)
    with pytest.raises(DataError, match=rf"bad\.jsonl {message}"):
        TokenizedTextDataset(tmp_path / "bad.jsonl", tok, label_field="label")
    with pytest.warns(SkippedSampleWarning):
        assert len(TokenizedTextDataset(tmp_path / "bad.jsonl", tok, label_field="label", on_error="skip")) == 1


def test_csv_errors_name_the_line_where_a_multiline_record_starts(tmp_path, tok):
    content = 'text,label\n"two\nlines, quoted",1\n"bad \xff byte",0\nfine,0\n'.encode("latin-1")
    (tmp_path / "d.csv").write_bytes(content)
    with pytest.raises(DataError, match=r"d\.csv line 4: field 'text' is not valid"):
        TokenizedTextDataset(tmp_path / "d.csv", tok, label_field="label")
    with pytest.warns(SkippedSampleWarning):
        dataset = TokenizedTextDataset(tmp_path / "d.csv", tok, label_field="label", on_error="skip")
    assert dataset.line_numbers.tolist() == [2, 5]
    assert dataset[0]["input_ids"].tolist() == tok.encode("two\nlines, quoted").ids
    with pytest.raises(DataError, match=r"no column \['body'\]"):
        TokenizedTextDataset(tmp_path / "d.csv", tok, text_field="body")


@pytest.mark.parametrize("name", ["labeled.jsonl", "labeled.csv"], ids=["jsonl", "csv"])
@pytest.mark.parametrize("option", ["text_field", "label_field"])
def test_a_wrong_field_name_lists_the_fields_the_file_has(fixtures, tok, name, option):
    options = {"label_field": "label", option: "stars"}
    with pytest.raises(DataError, match=rf"{name}.* no (column \['stars'\]|'stars' field) .*{option}=\.\.\.") as error:
        TokenizedTextDataset(fixtures / "text" / name, tok, **options)
    assert "'label'" in str(error.value) and "'text'" in str(error.value)


@pytest.mark.parametrize("option", ["text_field", "label_field"])
def test_skip_mode_refuses_a_field_no_line_has_instead_of_warning_every_line(fixtures, tok, option):
    options = {"label_field": "label", option: "stars", "on_error": "skip"}
    message = rf"labeled\.jsonl line 1: no 'stars' field in any of the 120 lines read .*{option}=\.\.\."
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # and not one warning before the error
        with pytest.raises(DataError, match=message):
            TokenizedTextDataset(fixtures / "text" / "labeled.jsonl", tok, **options)


def test_skip_mode_still_warns_lines_without_a_field_others_have_in_line_order(tmp_path, tok):
    lines = ['{"body": "a"}', "not json", '{"text": "kept"}', '{"body": "b"}', '{"text": "also kept"}']
    (tmp_path / "messy.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    dataset, warned = with_skip_warnings(lambda: TokenizedTextDataset(tmp_path / "messy.jsonl", tok, on_error="skip"))
    assert dataset.line_numbers.tolist() == [3, 5]
    assert [message.split(": ", 2)[1].rsplit(" ", 1)[1] for message in warned] == ["1", "2", "4"]
    (tmp_path / "broken.jsonl").write_text('{"body": "a"}\nnot json\n', encoding="utf-8")  # not only a field
    with pytest.warns(SkippedSampleWarning) as warned, pytest.raises(  # nothing left: an error, not an empty dataset
            DataError, match=r"broken.jsonl: every row was skipped \(2 read, on_error='skip'\); the first: .*line 1: no 'text'"):
        TokenizedTextDataset(tmp_path / "broken.jsonl", tok, on_error="skip")
    assert len(warned) == 2
    many = "".join('{"body": "x"}\n' for _ in range(1500)) + '{"text": "late"}\n'  # a whole file decides
    (tmp_path / "many.jsonl").write_text(many, encoding="utf-8")
    dataset, warned = with_skip_warnings(lambda: TokenizedTextDataset(tmp_path / "many.jsonl", tok, on_error="skip"))
    assert dataset.line_numbers.tolist() == [1501] and len(warned) == 1500


def test_string_labels_are_numbered_by_their_sorted_names(tmp_path, tok):
    rows = [{"text": "a", "label": "pos"}, {"text": "b", "label": "neg"}, {"text": "c", "label": "neutral"}, {"text": "d", "label": "pos"}]
    (tmp_path / "d.jsonl").write_text("\n".join(map(json.dumps, rows)), encoding="utf-8")
    dataset = TokenizedTextDataset(tmp_path / "d.jsonl", tok, label_field="label")
    assert dataset.label_names == ["neg", "neutral", "pos"]
    assert [dataset.label_names[dataset[i]["label"]] for i in range(4)] == ["pos", "neg", "neutral", "pos"]


def test_unknown_format_missing_file_and_bad_options_are_refused(tmp_path, fixtures, tok):
    (tmp_path / "d.xlsx").write_bytes(b"")
    with pytest.raises(ValueError, match=r"\.xlsx.*\['\.txt', '\.jsonl', '\.csv', '\.parquet'\]"):
        TokenizedTextDataset(tmp_path / "d.xlsx", tok)
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        TokenizedTextDataset(tmp_path / "nope.txt", tok)
    with pytest.raises(ValueError, match="on_error"):
        TokenizedTextDataset(fixtures / "text" / "corpus.txt", tok, on_error="ignore")
    with pytest.raises(ValueError, match="label_field needs"):
        TokenizedTextDataset(fixtures / "text" / "corpus.txt", tok, label_field="label")


def test_indexing_accepts_numpy_and_negative_indices_and_refuses_out_of_range(fixtures, tok):
    dataset = TokenizedTextDataset(fixtures / "text" / "corpus.txt", tok)
    assert dataset[np.int64(3)]["index"] == 3
    assert dataset[-1]["index"] == len(dataset) - 1
    with pytest.raises(IndexError, match="out of range"):
        dataset[len(dataset)]


def _items(dataset):
    return [(item["input_ids"].tolist(), item["index"], item.get("label")) for item in (dataset[i] for i in range(len(dataset)))]


def test_cache_is_reused_without_tokenising_and_gives_identical_items(tmp_path, fixtures, tok, monkeypatch):
    path = fixtures / "text" / "labeled.jsonl"
    first = TokenizedTextDataset(path, tok, label_field="label", max_length=16, cache_dir=tmp_path)
    written = sorted(p.name.split(".", 1)[1] for p in tmp_path.iterdir())
    assert written == ["ids.npy", "json", "labels.npy", "lines.npy", "offsets.npy"]  # no pickle

    def refuse(*args, **kwargs):
        raise AssertionError("the cache should have been used")

    monkeypatch.setattr("recipes.core.tokenizing.encode_texts", refuse)
    second = TokenizedTextDataset(path, tok, label_field="label", max_length=16, cache_dir=tmp_path)
    assert isinstance(second.tokens.ids, np.memmap)
    assert _items(second) == _items(first)
    assert np.array_equal(second.lengths, first.lengths) and second.label_names == first.label_names
    with pytest.raises(AssertionError, match="cache"):  # another max_length is another key
        TokenizedTextDataset(path, tok, label_field="label", max_length=8, cache_dir=tmp_path)


def test_cache_key_follows_file_content_and_tokenizer(tmp_path, tok):
    data = tmp_path / "d.txt"
    data.write_text("a cat\nthe dog\n", encoding="utf-8")
    before = TokenizedTextDataset(data, tok, cache_dir=tmp_path / "cache")
    data.write_text("a cat\nthe dog sat\n", encoding="utf-8")
    after = TokenizedTextDataset(data, tok, cache_dir=tmp_path / "cache")
    assert after[1]["input_ids"].tolist() == tok.encode("the dog sat").ids != before[1]["input_ids"].tolist()
    other = _word_tokenizer(["a", "cat", "the", "dog", "sat"])
    assert TokenizedTextDataset(data, other, cache_dir=tmp_path / "cache")[1]["input_ids"].tolist() == other.encode("the dog sat").ids
    assert len(list((tmp_path / "cache").glob("*.json"))) == 3


def _damage(prefix_file, damage):
    """Spoil one file of a token cache entry, as a full disk, a stray copy or a bad edit would."""
    ids = prefix_file.with_name(prefix_file.name.removesuffix(".json") + ".ids.npy")
    if damage == "truncated-ids":
        ids.write_bytes(ids.read_bytes()[:-7])
        return ids
    if damage == "replaced-ids":  # another valid array, same dtype, shape and size
        replaced = np.load(ids)[::-1].copy()
        assert not np.array_equal(replaced, np.load(ids))
        np.save(ids, replaced)
        return ids
    prefix_file.write_text('{"version": 3, "samples": ', encoding="utf-8")
    return prefix_file


@pytest.mark.parametrize("damage", ["truncated-ids", "replaced-ids", "garbled-record"])
def test_a_damaged_cache_is_rebuilt_with_one_warning_naming_the_file(tmp_path, fixtures, tok, damage, monkeypatch):
    path = fixtures / "text" / "labeled.jsonl"
    options = {"label_field": "label", "max_length": 16}
    fresh = TokenizedTextDataset(path, tok, **options)
    TokenizedTextDataset(path, tok, cache_dir=tmp_path, **options)
    (record,) = tmp_path.glob("*.json")
    spoiled = _damage(record, damage)
    if damage == "replaced-ids":  # sizes, dtypes and shapes agree: only verify=True re-reads the bytes
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert _items(TokenizedTextDataset(path, tok, cache_dir=tmp_path, **options)) != _items(fresh)
    with pytest.warns(DamagedCacheWarning) as caught:
        healed = TokenizedTextDataset(path, tok, cache_dir=tmp_path, read_options=ReadOptions(verify_cache=True), **options)
    assert len(caught) == 1 and str(spoiled) in str(caught[0].message)
    assert _items(healed) == _items(fresh) and healed.label_names == fresh.label_names
    assert np.array_equal(healed.line_numbers, fresh.line_numbers) and np.array_equal(healed.lengths, fresh.lengths)

    def refuse(*args, **kwargs):
        raise AssertionError("the rebuilt cache should have been used")

    monkeypatch.setattr("recipes.core.tokenizing.encode_texts", refuse)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = TokenizedTextDataset(path, tok, cache_dir=tmp_path, read_options=ReadOptions(verify_cache=True), **options)
    assert _items(again) == _items(fresh)
    assert sorted(p.name.split(".", 1)[1] for p in tmp_path.iterdir()) == ["ids.npy", "json", "labels.npy", "lines.npy", "offsets.npy"]


def test_an_id_written_over_in_place_is_never_served_by_the_default_open(tmp_path, fixtures, tok):
    path = fixtures / "text" / "labeled.jsonl"
    TokenizedTextDataset(path, tok, cache_dir=tmp_path)
    (ids,) = tmp_path.glob("*.ids.npy")
    stored = np.load(ids, mmap_mode="r")
    start = TokenizedTextDataset(path, tok).tokens.offsets[27]
    with open(ids, "r+b") as file:  # 8 bytes of 0xff, the file's size, dtype and shape unchanged
        file.seek(stored.offset + int(start) * stored.itemsize)
        file.write(b"\xff" * 8)
    del stored
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        opened = TokenizedTextDataset(path, tok, cache_dir=tmp_path)  # the default open: no bytes re-read
    bad = rf"{ids.name}: sample 27 holds token id 65535, outside the vocabulary of {tok.get_vocab_size()} ids"
    with pytest.raises(DataError, match=bad):
        opened[27]
    with pytest.raises(DataError, match=bad):
        opened[3]  # the block it lies in is refused whole
    with pytest.raises(DataError, match=bad):
        next(iter(text_loader(opened, 8, train=False, device="cpu", num_workers=1)))  # and in a worker
    with pytest.warns(DamagedCacheWarning):  # full verification stays opt-in, and rebuilds
        healed = TokenizedTextDataset(path, tok, cache_dir=tmp_path, read_options=ReadOptions(verify_cache=True))
    assert healed[27]["input_ids"].max() < tok.get_vocab_size()


def test_an_empty_cache_dir_is_refused_not_the_current_directory(fixtures, tok):
    with pytest.raises(ValueError, match="cache_dir='' names no folder"):
        TokenizedTextDataset(fixtures / "text" / "corpus.txt", tok, cache_dir="")


def test_a_cached_dataset_pickles_as_its_cache_path_not_its_tokens(tmp_path, fixtures, tok):
    path = fixtures / "text" / "corpus.txt"
    cached = TokenizedTextDataset(path, tok, cache_dir=tmp_path)
    plain = TokenizedTextDataset(path, tok)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        restored = pickle.loads(pickle.dumps(cached))
    assert len(pickle.dumps(cached)) < len(pickle.dumps(plain)) / 4
    assert isinstance(restored.tokens.ids, np.memmap)
    assert _items(restored) == _items(plain)


def test_a_folder_or_an_unknown_suffix_is_refused_listing_every_format_the_dataset_reads(fixtures, tmp_path):
    with pytest.raises(ValueError, match=r"text is a folder; expected a file, one of \['.txt', '.jsonl', '.csv', '.parquet'\]"):
        TokenizedTextDataset(fixtures / "text", fixtures / "text" / "tokenizer.json")
    (tmp_path / "rows.tsv").write_text("a\tb\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"rows.tsv: unsupported file type '.tsv'; expected one of \['.txt', '.jsonl', '.csv', '.parquet'\]"):
        TokenizedTextDataset(tmp_path / "rows.tsv", fixtures / "text" / "tokenizer.json")
