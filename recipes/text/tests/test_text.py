"""What a copy of the text recipe must keep doing, checked against the tokenizer and the files' own rows.

    python -m pytest text/tests          # in the folder you copied the recipe into

Each test builds the fixture folder from the recipe's own ``fixtures.py`` (a 200-line long-tailed
corpus, labeled JSONL and CSV rows, a BPE tokenizer, chats and prompt/completion pairs), so they
run wherever the recipe does, with or without ``dataloader-recipes`` installed.
"""

import csv
import json
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer

from recipes.core import DataError, SkippedSampleWarning
from recipes.text import (
    InstructionDataset,
    StreamingTextDataset,
    TokenizedTextDataset,
    pack_collate,
    streaming_loader,
    text_collate,
    text_loader,
)
from recipes.text.fixtures import write_text


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("fixtures") / "text"
    write_text(folder)
    return folder


@pytest.fixture(scope="module")
def tok(root: Path) -> Tokenizer:
    return Tokenizer.from_file(str(root / "tokenizer.json"))


def encoded(tok: Tokenizer, text: str, max_length: int | None = None) -> list[int]:
    """The ids a copy of ``tok`` gives with ``enable_truncation(max_length)``: the text cut, the specials kept."""
    copy = Tokenizer.from_str(tok.to_str())
    if max_length is not None:
        copy.enable_truncation(max_length)
    return copy.encode(text).ids


def test_ids_are_the_tokenizers_own_cut_as_enable_truncation_cuts(root, tok):
    lines = (root / "corpus.txt").read_text(encoding="utf-8").splitlines()
    dataset = TokenizedTextDataset(root / "corpus.txt", tok, max_length=24)
    assert len(dataset) == len(lines) == 200
    for index, line in enumerate(lines):
        item = dataset[index]
        assert item["input_ids"].dtype == torch.int64 and item["index"] == index
        assert item["input_ids"].tolist() == encoded(tok, line, 24), f"line {index + 1}"
    assert max(dataset.lengths) == 24 and dataset[0]["input_ids"][-1] == tok.token_to_id("[SEP]")


def test_jsonl_and_csv_rows_give_their_own_texts_and_integer_labels(root, tok):
    jsonl = [json.loads(line) for line in (root / "labeled.jsonl").read_text(encoding="utf-8").splitlines()]
    with open(root / "labeled.csv", newline="", encoding="utf-8") as file:
        rows = [(row["text"], int(row["label"])) for row in csv.DictReader(file)]
    for name, expected in (("labeled.jsonl", [(r["text"], r["label"]) for r in jsonl]), ("labeled.csv", rows)):
        dataset = TokenizedTextDataset(root / name, tok, label_field="label")
        assert len(dataset) == len(expected)
        for index, (text, label) in enumerate(expected):
            item = dataset[index]
            assert item["input_ids"].tolist() == tok.encode(text).ids and item["label"] == label, f"{name} row {index}"
    assert any('"' in text and "," in text for text, _ in rows)  # quoted commas survive


def test_padding_and_packing_keep_every_id_of_every_sample(root, tok):
    dataset = TokenizedTextDataset(root / "labeled.jsonl", tok, label_field="label")
    items = [dataset[i] for i in (0, 7, 3)]
    padded = text_collate([items[0], None, items[1], items[2]], pad_id=dataset.pad_id)  # None: a sample skipped
    longest = max(len(item["input_ids"]) for item in items)
    assert padded["input_ids"].shape == padded["attention_mask"].shape == (3, longest)
    assert padded["input_ids"].dtype == padded["attention_mask"].dtype == torch.int64
    for row, item in enumerate(items):
        n = len(item["input_ids"])
        assert padded["lengths"][row] == padded["attention_mask"][row].sum() == n
        assert torch.equal(padded["input_ids"][row, :n], item["input_ids"])
        assert (padded["input_ids"][row, n:] == dataset.pad_id).all()
    assert padded["labels"].tolist() == [item["label"] for item in items]
    packed = pack_collate(items)
    bounds = packed["cu_seqlens"].tolist()
    assert packed["input_ids"].shape == (1, bounds[-1]) and packed["max_seqlen"] == longest
    for b, item in enumerate(items):
        assert torch.equal(packed["input_ids"][0, bounds[b]:bounds[b + 1]], item["input_ids"])
        assert packed["position_ids"][0, bounds[b]:bounds[b + 1]].tolist() == list(range(len(item["input_ids"])))


def test_a_seed_gives_the_same_length_grouped_batches_with_or_without_workers(root, tok):
    dataset = TokenizedTextDataset(root / "corpus.txt", tok, max_length=64)

    def batches(workers: int, seed: int = 0) -> list:
        return [batch["index"].tolist() for batch in text_loader(dataset, 8, device="cpu", seed=seed,
                                                                num_workers=workers)]

    first = batches(0)
    assert len(first) == 25 and sorted(i for batch in first for i in batch) == list(range(200))
    assert batches(0) == batches(2) == first and batches(0, seed=1) != first
    padding = sum(8 * max(dataset.lengths[i] for i in batch) - sum(dataset.lengths[i] for i in batch)
                  for batch in first)
    assert padding < 0.1 * sum(dataset.lengths)  # samples of a length share a batch


def test_a_stateful_loader_resumes_mid_epoch_with_exactly_the_batches_still_to_come(root, tok):
    def loader():
        return text_loader(TokenizedTextDataset(root / "labeled.jsonl", tok, label_field="label"), 16,
                           device="cpu", seed=3, stateful=True, num_workers=0)

    def ids(batches: list) -> list:
        return [(batch["index"].tolist(), batch["input_ids"].tolist()) for batch in batches]

    uninterrupted = loader()
    expected = ids(list(uninterrupted) + list(uninterrupted))
    interrupted = loader()
    batches = iter(interrupted)
    seen = [next(batches) for _ in range(3)]
    resumed = loader()
    resumed.load_state_dict(interrupted.state_dict())
    assert ids(seen + list(resumed) + list(resumed)) == expected  # the epoch's rest, then the next epoch


def test_a_bad_line_is_named_or_skipped_with_a_warning(tok, tmp_path):
    path = tmp_path / "mixed.txt"
    path.write_bytes(b"first line\nsecond line\nbroken \xff\xfe line\nfourth line\n")
    with pytest.raises(DataError, match=r"mixed\.txt line 3"):
        TokenizedTextDataset(path, tok)
    with pytest.warns(SkippedSampleWarning, match=r"mixed\.txt line 3"):
        dataset = TokenizedTextDataset(path, tok, on_error="skip")
    assert [dataset[i]["input_ids"].tolist() for i in range(len(dataset))] == [
        tok.encode(text).ids for text in ("first line", "second line", "fourth line")]


def test_the_stream_reads_every_line_once_across_workers_as_the_tokenizer_encodes_it(root, tok):
    data = (root / "corpus.txt").read_bytes()
    lines, offset = {}, 0
    for raw in data.split(b"\n")[:-1]:
        lines[offset] = raw.decode("utf-8")
        offset += len(raw) + 1
    stream = StreamingTextDataset(root / "corpus.txt", tok, max_length=32)
    batches = list(streaming_loader(stream, 8, train=False, device="cpu", num_workers=2))
    read = {}
    for batch in batches:
        for row, index in enumerate(batch["index"].tolist()):
            assert index not in read, "a line was read twice"
            read[index] = batch["input_ids"][row, :batch["lengths"][row]].tolist()
    assert read.keys() == lines.keys()
    assert all(read[offset] == encoded(tok, line, 32) for offset, line in lines.items())


def test_instruction_pairs_learn_the_completion_and_its_end_only(root):
    chat = root / "chat"
    tok = Tokenizer.from_file(str(chat / "tokenizer.json"))
    dataset = InstructionDataset(chat / "pairs.jsonl", tok, template=chat / "mistral" / "tokenizer_config.json")
    rows = [json.loads(line) for line in (chat / "pairs.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(dataset) == len(rows) == 24
    for index, row in enumerate(rows):
        item = dataset[index]
        learned = (item["labels"] != -100).tolist()
        first = learned.index(True)
        assert learned == [False] * first + [True] * (len(learned) - first)  # the prompt, then what is learned
        assert item["input_ids"][-1] == tok.token_to_id("</s>")
        prompt = tok.decode(item["input_ids"][:first].tolist())
        assert row["prompt"].startswith(prompt.strip()) and row["completion"].strip() not in prompt, f"row {index}"
