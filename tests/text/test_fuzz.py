"""Property tests: text_collate, pack_collate and stream_collate invert exactly, for any batch;
the datasets on mutated files load or raise a DataError naming the file."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from tokenizers import Tokenizer

from recipes.text import StreamingTextDataset, TokenizedTextDataset, pack_collate, text_collate
from recipes.text.streaming import stream_collate
from tests.core.mutations import fuzz_settings, load_or_data_error, mutated_file, quiet

FUZZ = fuzz_settings(150)

LENGTHS = st.lists(st.integers(0, 12), min_size=1, max_size=6)  # 0: an empty sequence


@st.composite
def batches(draw, labels=None):
    """A batch of items (ids drawn from 1..999, any length, 0 included), some of them None."""
    with_labels = draw(st.booleans()) if labels is None else labels
    items = []
    for index, length in enumerate(draw(LENGTHS)):
        if draw(st.integers(0, 4)) == 0:
            items.append(None)  # a skipped sample
            continue
        ids = torch.tensor(draw(st.lists(st.integers(1, 999), min_size=length, max_size=length)), dtype=torch.int64)
        item = {"input_ids": ids, "index": index}
        if with_labels:
            item["label"] = draw(st.integers(-3, 50))
        items.append(item)
    return items


def kept(batch):
    return [item for item in batch if item is not None]


@FUZZ
@given(batch=batches(), pad_id=st.integers(0, 1000), multiple=st.sampled_from([None, 1, 3, 8]),
       side=st.sampled_from(["right", "left"]))
def test_text_collate_unpads_to_exactly_the_items(batch, pad_id, multiple, side):
    out = text_collate(batch, pad_id=pad_id, pad_to_multiple_of=multiple, padding_side=side)
    items = kept(batch)
    lengths = [len(item["input_ids"]) for item in items]
    width = max(lengths, default=0)
    if multiple:
        width = -(-width // multiple) * multiple
    assert out["input_ids"].shape == out["attention_mask"].shape == (len(items), width)
    assert all(out[key].dtype == torch.int64 for key in out)
    assert out["lengths"].tolist() == lengths and out["attention_mask"].sum(1).tolist() == lengths
    assert out["index"].tolist() == [item["index"] for item in items]
    for row, mask, item in zip(out["input_ids"], out["attention_mask"], items):
        assert torch.equal(row[mask.bool()], item["input_ids"])  # unpad(pad(x)) == x
        assert (row[~mask.bool()] == pad_id).all()
        real = mask.nonzero().flatten().tolist()
        expected = range(len(item["input_ids"])) if side == "right" else range(width - len(item["input_ids"]), width)
        assert real == list(expected)  # one contiguous run, on the chosen side
    if items and "label" in items[0]:
        assert out["labels"].tolist() == [item["label"] for item in items]
    else:
        assert "labels" not in out


@FUZZ
@given(batch=batches())
def test_pack_collate_unpacks_to_exactly_the_items(batch):
    out = pack_collate(batch)
    items = kept(batch)
    cu = out["cu_seqlens"]
    assert cu.dtype == torch.int32 and cu[0] == 0 and len(cu) == len(items) + 1
    assert out["input_ids"].shape == out["position_ids"].shape == (1, int(cu[-1]))
    for k, item in enumerate(items):
        start, stop = int(cu[k]), int(cu[k + 1])
        assert torch.equal(out["input_ids"][0, start:stop], item["input_ids"])  # unpack(pack(x)) == x
        assert out["position_ids"][0, start:stop].tolist() == list(range(stop - start))
    assert out["max_seqlen"] == max((len(item["input_ids"]) for item in items), default=0)
    assert out["index"].tolist() == [item["index"] for item in items]


@FUZZ
@given(batch=batches(), pad_id=st.integers(0, 1000))
def test_stream_collate_is_text_collate_with_right_padding(batch, pad_id):
    out, reference = stream_collate(batch, pad_id=pad_id), text_collate(batch, pad_id=pad_id)
    assert out.keys() == reference.keys()
    assert all(torch.equal(out[key], reference[key]) for key in out)


# -- the datasets on mutated files --------------------------------------------------------------


@pytest.fixture(scope="module")
def tok(fixtures):
    return Tokenizer.from_file(str(fixtures / "text" / "tokenizer.json"))


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


@fuzz_settings(40)
@given(data=st.data(), on_error=st.sampled_from(["raise", "skip"]))
def test_both_datasets_on_a_mutated_jsonl_load_or_name_the_file(fixtures, tok, scratch, data, on_error):
    path = scratch / "labeled.jsonl"
    path.write_bytes(mutated_file(data, fixtures / "text" / "labeled.jsonl"))
    with quiet():
        dataset = load_or_data_error(
            lambda: TokenizedTextDataset(path, tok, label_field="label", max_length=16, on_error=on_error), path
        )
        stream = load_or_data_error(lambda: list(StreamingTextDataset(path, tok, max_length=16, on_error=on_error)), path)
    if dataset is not None:
        assert all(len(dataset[i]["input_ids"]) <= 16 for i in range(len(dataset)))
    if dataset is not None and stream is not None:
        assert len(stream) >= len(dataset)  # the stream needs no label: it keeps at least as many lines
