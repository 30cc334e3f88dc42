"""StreamingTextDataset: every line read by exactly one (rank, worker), seeded shuffling, bad lines.

Real torchrun ranks with loader workers: tests/text/test_ranks.py."""

import json
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer

from recipes.core.contracts.errors import DataError, SkippedSampleWarning
from recipes.text import StreamingTextDataset, TokenizedTextDataset, streaming_loader, text_collate
from recipes.core.sampling.stream_order import StreamOrder
from tests.special_tokens import truncated


@pytest.fixture(scope="module")
def tok(fixtures):
    return Tokenizer.from_file(str(fixtures / "text" / "tokenizer.json"))


def _expected(paths):
    """{global byte offset: line} for every non-blank line, computed from the raw bytes."""
    lines, base = {}, 0
    for path in paths:
        data = Path(path).read_bytes()
        position = 0
        for raw in data.split(b"\n"):
            line = raw.removesuffix(b"\r").decode("utf-8")
            if line.strip():
                lines[base + position] = line
            position += len(raw) + 1
        base += len(data)
    return lines


@pytest.fixture(scope="module")
def files(tmp_path_factory, fixtures):
    """101 lines over three files (one empty, one without a final newline), ragged lengths."""
    folder = tmp_path_factory.mktemp("stream")
    corpus = (fixtures / "text" / "corpus.txt").read_text(encoding="utf-8").split("\n")
    (folder / "a.txt").write_text("\n".join(corpus[:60]) + "\n\n", encoding="utf-8")
    (folder / "empty.txt").write_bytes(b"")
    (folder / "b.txt").write_text("\r\n".join(corpus[60:101]), encoding="utf-8")  # no final newline
    paths = [folder / "a.txt", folder / "empty.txt", folder / "b.txt"]
    assert len(_expected(paths)) == 101
    return paths


@pytest.mark.parametrize("world_size", [1, 2, 3, 4, 7, 200])
def test_slots_split_the_lines_exactly_and_ids_match_encode(files, tok, world_size):
    expected = _expected(files)
    seen = {}
    for rank in range(world_size):
        for item in StreamingTextDataset(files, tok, max_length=12,
                                         order=StreamOrder(rank=rank, world_size=world_size, seed=0)):
            assert item["index"] not in seen, "a line was read by two slots"
            seen[item["index"]] = item["input_ids"].tolist()
    assert seen.keys() == expected.keys()
    assert all(seen[offset] == truncated(tok, line, 12) for offset, line in expected.items())


@pytest.mark.parametrize("buffer", [0, 16], ids=["in-order", "buffered"])
def test_two_loader_workers_read_every_line_once(files, tok, buffer):
    stream = StreamingTextDataset(files, tok, order=StreamOrder(shuffle_buffer=buffer, seed=1))
    loader = streaming_loader(stream, 8, train=False, device="cpu", num_workers=2)
    batches = list(loader)
    offsets = [i for b in batches for i in b["index"].tolist()]
    assert sorted(offsets) == sorted(_expected(files)) and len(offsets) == 101
    first = batches[0]
    assert first["input_ids"].shape == first["attention_mask"].shape and first["lengths"].tolist() == first["attention_mask"].sum(1).tolist()


def _trained_on(fixtures, tok, buffer, epoch):
    """The lines (byte offsets) of labeled.jsonl one training epoch gives 2 ranks x 2 workers in batches of 8:
    each worker drops its last partial batch, and every rank stops at the step the shortest one ends at
    (EqualSteps, as a process group's streaming_loader does)."""
    steps = []
    for rank in range(2):
        order = StreamOrder(shuffle_buffer=buffer, seed=0, rank=rank, world_size=2)
        stream = StreamingTextDataset(fixtures / "text" / "labeled.jsonl", tok, order=order)
        stream.set_epoch(epoch)
        loader = streaming_loader(stream, 8, device="cpu", seed=0, num_workers=2, persistent_workers=False)
        steps.append([batch["index"].tolist() for batch in loader])
    common = min(map(len, steps))
    return {offset for batches in steps for batch in batches[:common] for offset in batch}


@pytest.mark.parametrize("buffer", [0, 16], ids=["in-order", "buffered"])
def test_every_line_is_trained_on_within_two_epochs_in_file_order_too(fixtures, tok, buffer):
    lines = len(_expected([fixtures / "text" / "labeled.jsonl"]))
    first, second = (_trained_on(fixtures, tok, buffer, epoch) for epoch in (0, 1))
    assert lines == 120 and len(first) == len(second) == 96  # 4 readers of 30 lines keep 3 batches of 8 each
    assert first != second and len(first | second) == lines  # what one epoch drops, the next one reads


def test_stream_batches_equal_text_collate_of_the_same_items(files, tok):
    stream = StreamingTextDataset(files, tok, order=StreamOrder(seed=0))
    items = list(stream)[:8]
    stream.set_epoch(0)  # the same pass again: the next epoch starts its share elsewhere
    ours = next(iter(streaming_loader(stream, 8, device="cpu", num_workers=0)))
    reference = text_collate(items, pad_id=stream.pad_id)
    assert ours.keys() == reference.keys() and all(torch.equal(ours[k], reference[k]) for k in ours)


def test_the_pad_id_is_the_padding_configs_as_the_map_style_dataset_reads_it(files, fixtures):
    padded = Tokenizer.from_file(str(fixtures / "text" / "tokenizer.json"))
    padded.enable_padding(pad_id=7, pad_token="[PAD]")  # an id other than its pad token's
    assert padded.token_to_id("[PAD]") != 7
    stream = StreamingTextDataset(files, padded)
    assert stream.pad_id == TokenizedTextDataset(files[0], padded).pad_id == 7
    assert StreamingTextDataset(files, padded, pad_id=3).pad_id == 3


def test_shuffle_buffer_is_seeded_and_reshuffles_every_epoch(files, tok):
    def order(stream):
        return [item["index"] for item in stream]

    in_file_order = order(StreamingTextDataset(files, tok, order=StreamOrder(seed=0)))
    assert in_file_order == sorted(in_file_order)
    stream = StreamingTextDataset(files, tok, order=StreamOrder(shuffle_buffer=32, seed=5))
    first, second = order(stream), order(stream)  # the epoch advances by itself
    assert sorted(first) == sorted(second) == in_file_order
    assert first != second and first != in_file_order
    assert order(StreamingTextDataset(files, tok, order=StreamOrder(shuffle_buffer=32, seed=5))) == first  # same seed, same order
    stream.set_epoch(0)
    assert order(stream) == first


def test_labels_come_from_jsonl_and_must_be_integers(tmp_path, tok):
    rows = [{"text": "a cat", "label": 1}, {"text": "the dog", "label": "2"}, {"text": "sat", "label": "pos"}]
    path = tmp_path / "d.jsonl"
    path.write_text("\n".join(map(json.dumps, rows)) + "\n", encoding="utf-8")
    offset = path.read_bytes().index(b'{"text": "sat"')
    with pytest.raises(DataError, match=rf"d\.jsonl byte {offset}: label 'pos' is not an integer"):
        list(StreamingTextDataset(path, tok, label_field="label"))
    with pytest.warns(SkippedSampleWarning):
        items = list(StreamingTextDataset(path, tok, label_field="label", on_error="skip"))
    assert [item["label"] for item in items] == [1, 2]


def test_invalid_utf8_names_the_file_and_byte_offset_or_is_skipped(fixtures, tok):
    path = fixtures / "hostile" / "text" / "bad_utf8.txt"
    offset = path.read_bytes().index(b"third")
    with pytest.raises(DataError, match=rf"bad_utf8\.txt byte {offset}: not valid UTF-8"):
        list(StreamingTextDataset(path, tok))
    with pytest.warns(SkippedSampleWarning, match=f"byte {offset}"):
        items = list(StreamingTextDataset(path, tok, on_error="skip"))
    assert [item["input_ids"].tolist() for item in items] == [tok.encode(t).ids for t in ("first line is fine", "second line is fine", "fourth line is fine")]


def test_formats_it_cannot_split_and_bad_options_are_refused(fixtures, tok):
    with pytest.raises(ValueError, match=r"\.csv.*\['\.txt', '\.jsonl'\]"):
        StreamingTextDataset(fixtures / "text" / "labeled.csv", tok)
    with pytest.raises(ValueError, match="label_field needs"):
        StreamingTextDataset(fixtures / "text" / "corpus.txt", tok, label_field="label")
    with pytest.raises(ValueError, match="shuffle_buffer"):
        StreamingTextDataset(fixtures / "text" / "corpus.txt", tok, order=StreamOrder(shuffle_buffer=-1))


@pytest.mark.parametrize("option", ["text_field", "label_field"])
def test_a_wrong_field_name_lists_the_fields_of_the_line(fixtures, tok, option):
    options = {"label_field": "label", option: "stars"}
    message = rf"labeled\.jsonl byte 0: no 'stars' field \(fields: \['label', 'text'\]\); pass {option}="
    with pytest.raises(DataError, match=message):
        next(iter(StreamingTextDataset(fixtures / "text" / "labeled.jsonl", tok, **options)))



def test_skip_mode_warns_line_by_line_where_a_reader_sees_only_one_of_two_schemas(tmp_path, tok):
    # a reader's share may lack a field the file has elsewhere: it warns, it does not refuse
    rows = [{"text": f"new line {i}"} for i in range(40)] + [{"body": f"old line number {i}"} for i in range(40)]
    (tmp_path / "two.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    readers = [StreamingTextDataset(tmp_path / "two.jsonl", tok, on_error="skip",
                                    order=StreamOrder(rank=r, world_size=2)) for r in (0, 1)]
    with pytest.warns(SkippedSampleWarning) as caught:
        first, second = (list(reader) for reader in readers)
    assert second == [] and len(caught) == 40  # reader 1's share: "body" lines only, each warned
    items = sorted(first + second, key=lambda item: item["index"])
    assert [item["input_ids"].tolist() for item in items] == [tok.encode(f"new line {i}").ids for i in range(40)]


def test_every_keyword_the_docs_give_the_stream_is_one_it_takes():
    import dataclasses
    import inspect
    import re

    from torch.utils.data import DataLoader

    from recipes.core.contracts.read_options import ReadOptions

    def named(function):
        return set(inspect.signature(function).parameters)

    taken = (named(StreamingTextDataset.__init__) | named(StreamingTextDataset.from_ids) | named(streaming_loader)
             | named(DataLoader.__init__) | {field.name for kind in (ReadOptions, StreamOrder)
                                               for field in dataclasses.fields(kind)})
    docs = Path(__file__).resolve().parents[2] / "docs"
    wrong = [(page.name, keyword) for page in sorted(docs.rglob("*.md"))
             for part in re.split(r"\n\s*\n|\n- ", page.read_text(encoding="utf-8")) if "StreamingTextDataset" in part
             for keyword in re.findall(r"`(\w+)=", part) if keyword not in taken]
    assert wrong == []  # e.g. trainers.md once gave it cache_dir=, which raises TypeError
