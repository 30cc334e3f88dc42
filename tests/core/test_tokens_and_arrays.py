"""Flat token storage and its on-disk cache, padding, pad id lookup and the COW-safe string table."""

import pickle
import re

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers, processors

from recipes.core.contracts.arrays import StringArray
from recipes.core.contracts.errors import DataError
from recipes.core.tokens.padding import pad_batch
from recipes.core.tokens.encoding import encode_texts, load_tokenizer, pad_id_of
from recipes.text.token_cache import cache_prefix, is_cached, load_cache, save_cache
from tests.special_tokens import truncated


def _tokenizer(pad="[PAD]") -> Tokenizer:
    vocab = {w: i for i, w in enumerate([pad, "[UNK]", "[CLS]", "[SEP]", "a", "cat", "sat", "on", "the", "mat"])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    return tok


SENTENCES = ["a cat", "the cat sat on the mat", "", "dog", "a a a a a a a"]


@pytest.mark.parametrize("max_length", [None, 3])
def test_encoded_ids_equal_encode_one_by_one_truncated_by_the_tokenizer(max_length):
    tok = _tokenizer()
    tokens = encode_texts(tok, SENTENCES, max_length=max_length)
    for i, sentence in enumerate(SENTENCES):
        assert tokens[i].tolist() == truncated(tok, sentence, max_length)
    assert tokens.ids.dtype == np.uint16
    assert tokens.lengths.tolist() == [len(truncated(tok, s, max_length)) for s in SENTENCES]


def test_batch_longest_padding_config_does_not_leak_into_stored_ids():
    tok = _tokenizer()
    tok.enable_padding(pad_id=0, pad_token="[PAD]")
    tokens = encode_texts(tok, SENTENCES)
    assert [tokens[i].tolist() for i in range(len(SENTENCES))] == [tok.encode(s).ids for s in SENTENCES]


def test_token_cache_round_trips_columns_and_meta_and_keys_on_every_input(tmp_path):
    tok = _tokenizer()
    tokens = encode_texts(tok, SENTENCES)
    prefix = cache_prefix(tmp_path, "d.jsonl", b"data", tok, ["label", 16])
    assert not is_cached(prefix)
    save_cache(prefix, tokens, {"lines": np.arange(5), "labels": None}, label_names=["a", "b"])
    assert is_cached(prefix)
    loaded, columns, meta = load_cache(prefix)
    assert [loaded[i].tolist() for i in range(5)] == [tokens[i].tolist() for i in range(5)]
    assert list(columns) == ["lines"] and isinstance(columns["lines"], np.memmap) and isinstance(loaded.ids, np.memmap)
    assert meta["label_names"] == ["a", "b"] and meta["samples"] == 5
    assert not list(tmp_path.glob("*.tmp*"))  # every file published under its final name
    others = [
        cache_prefix(tmp_path, "d.jsonl", b"other data", tok, ["label", 16]),
        cache_prefix(tmp_path, "d.jsonl", b"data", _tokenizer(pad="<pad>"), ["label", 16]),
        cache_prefix(tmp_path, "d.jsonl", b"data", tok, ["label", 8]),
    ]
    assert len({prefix, *others}) == 4 and all(p.name.startswith("d-") for p in others)


def test_token_cache_save_deletes_a_killed_writers_temporary_files_and_load_names_a_short_file(tmp_path):
    tok = _tokenizer()
    tokens = encode_texts(tok, SENTENCES)
    prefix = cache_prefix(tmp_path, "d.jsonl", b"data", tok, [])
    orphan = prefix.with_name(prefix.name + ".ids.npy.4242.0a1b2c.tmp")  # nobody holds its lock
    orphan.write_bytes(b"\x93NUMPY" + bytes(1000))
    save_cache(prefix, tokens, {"lines": np.arange(5)}, label_names=None)
    assert not orphan.exists() and not list(tmp_path.glob("*.tmp"))
    ids = prefix.with_name(prefix.name + ".ids.npy")
    ids.write_bytes(ids.read_bytes()[:-2])
    with pytest.raises(DataError, match=f"{re.escape(str(ids))}: .* bytes, recorded"):
        load_cache(prefix)


def test_pad_id_comes_from_argument_then_padding_config_then_pad_token():
    tok = _tokenizer()
    assert pad_id_of(tok) == 0 and pad_id_of(tok, 5) == 5
    tok.enable_padding(pad_id=3, pad_token="[SEP]")
    assert pad_id_of(tok) == 3
    assert pad_id_of(_tokenizer(pad="<pad>")) == 0
    with pytest.raises(ValueError, match="pad_id=..."):
        pad_id_of(_tokenizer(pad="nothing"))


def test_load_tokenizer_reads_a_file_and_names_a_missing_one(tmp_path):
    _tokenizer().save(str(tmp_path / "tokenizer.json"))
    assert load_tokenizer(tmp_path / "tokenizer.json").get_vocab_size() == 10
    with pytest.raises(FileNotFoundError, match="missing.json"):
        load_tokenizer(tmp_path / "missing.json")


@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("multiple", [None, 4])
def test_pad_batch_places_tokens_and_mask_and_unpads_losslessly(side, multiple):
    seqs = [torch.tensor([5, 6, 7]), torch.tensor([8]), torch.tensor([], dtype=torch.int64)]
    ids, mask, lengths = pad_batch(seqs, pad_id=-1, pad_to_multiple_of=multiple, padding_side=side)
    width = 4 if multiple else 3
    assert ids.shape == mask.shape == (3, width) and ids.dtype == mask.dtype == lengths.dtype == torch.int64
    assert lengths.tolist() == [3, 1, 0]
    for row, seq, m in zip(ids, seqs, mask):
        assert row[m.bool()].tolist() == seq.tolist()
        assert (row[~m.bool()] == -1).all()
    first_real = mask.argmax(dim=1)
    if side == "left":
        assert first_real[0] == width - 3 and mask[:, -1][:2].all()
    else:
        assert first_real[0] == 0 and mask[:, 0][:2].all()


def test_pad_batch_rejects_an_unknown_side():
    with pytest.raises(ValueError, match="'right' or 'left'"):
        pad_batch([torch.tensor([1])], padding_side="middle")


def test_string_array_round_trips_unicode_and_undecodable_names():
    names = ["a/1.jpg", "ü/ß.png", "", "bad-\udcff.jpg"]
    table = StringArray(names)
    assert list(table) == names and table[-1] == names[-1] and len(table) == 4
    assert list(pickle.loads(pickle.dumps(table))) == names
    with pytest.raises(IndexError):
        table[4]


def test_a_bounded_token_array_never_serves_an_id_past_its_bound(monkeypatch):
    from recipes.core.contracts import arrays

    ids = np.array([1, 2, 3, 4, 5, 6, 7, 8, 9, 99, 1, 2], dtype=np.uint16)  # 99 is sample 2's
    offsets = np.array([0, 3, 6, 12])
    monkeypatch.setattr(arrays, "ID_BLOCK", 4)  # three blocks of 4 ids
    monkeypatch.setattr(arrays, "WHOLE_CHECK_BLOCKS", 1)  # checked a block at a time, as read
    tokens = arrays.TokenArray(ids, offsets).bounded(50, "ids.npy")
    assert tokens[0].tolist() == [1, 2, 3] and tokens[1].tolist() == [4, 5, 6]  # blocks 0 and 1: fine
    with pytest.raises(DataError, match=r"ids.npy: sample 2 holds token id 99, outside the vocabulary of 50 ids"):
        tokens[2]
    monkeypatch.setattr(arrays, "WHOLE_CHECK_BLOCKS", 256)  # a small array: all checked at its first item
    with pytest.raises(DataError, match=r"sample 2 holds token id 99, .* \(asked for sample 0\)"):
        arrays.TokenArray(ids, offsets).bounded(50, "ids.npy")[0]
    assert arrays.TokenArray(ids, offsets).bounded(100, "ids.npy")[2].tolist() == [7, 8, 9, 99, 1, 2]
