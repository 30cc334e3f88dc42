"""TokenizedTextDataset and StreamingTextDataset on a .jsonl file where every line is wrong its own way.

Under ``on_error="skip"`` exactly the good lines become samples and one warning names each bad
line (line number, or byte offset for the stream); under ``"raise"`` each is a DataError naming
the file and line, from a loader worker too. Blank lines are not samples; an over-long line is
tokenised whole and cut to ``max_length`` exactly as ``tokenizer.encode`` would be.
"""

import json

import pytest
from tokenizers import Tokenizer

from recipes.core.contracts.errors import DataError, SkippedSampleWarning
from recipes.text import StreamingTextDataset, TokenizedTextDataset, streaming_loader
from recipes.core.sampling.stream_order import StreamOrder
from tests.core.hostile import assert_one_warning_each, recording, worker_error
from tests.special_tokens import truncated

LONG = " ".join(f"word{i % 97} and more" for i in range(60_000))  # ~1 MB on one line


def good(text):
    return json.dumps({"text": text}).encode()


# (line bytes, what its error must say); reason None = a good line, b"" / spaces = blank
LINES = [
    (good("the first good line"), None),
    (b'{"text": "bad \xff\xfe bytes"}', "not valid UTF-8"),
    (b"", None),
    (json.dumps({"label": 1}).encode(), "no 'text' field"),
    (good(""), "is empty"),
    (good(LONG), None),
    (b'{"text": "cut', "not valid JSON"),
    (json.dumps({"text": 5}).encode(), "is int, not a string"),
    (good("the last good line"), None),
    (b"   \r", None),
    (b'{"text": "\\ud800"}', "lone surrogate"),
    (b'{"text": "big", "n": ' + b"9" * 5000 + b"}", "not valid JSON"),
    (b"[" * 50_000 + b"]" * 50_000, "not valid JSON"),
]
GOOD = [n for n, (raw, reason) in enumerate(LINES, start=1) if reason is None and raw.strip()]
BAD = {n: reason for n, (_, reason) in enumerate(LINES, start=1) if reason is not None}


@pytest.fixture(scope="module")
def tok(fixtures):
    return Tokenizer.from_file(str(fixtures / "text" / "tokenizer.json"))


def write(path, lines):
    path.write_bytes(b"\n".join(lines) + b"\n")
    offsets, position = {}, 0
    for number, raw in enumerate(lines, start=1):
        offsets[number] = position
        position += len(raw) + 1
    return path, offsets


def texts_of(numbers):
    return [json.loads(LINES[n - 1][0])["text"] for n in numbers]


def test_tokenized_skip_keeps_exactly_the_good_lines_and_names_every_bad_one(tmp_path, tok):
    path, _ = write(tmp_path / "d.jsonl", [raw for raw, _ in LINES])
    with recording() as caught:
        dataset = TokenizedTextDataset(path, tok, max_length=64, on_error="skip")
    assert dataset.line_numbers.tolist() == GOOD
    assert [dataset[i]["input_ids"].tolist() for i in range(len(dataset))] == [
        truncated(tok, text, 64) for text in texts_of(GOOD)
    ]
    assert_one_warning_each(caught, {f"d.jsonl line {number}: ": reason for number, reason in BAD.items()})


def test_stream_skip_keeps_exactly_the_good_lines_and_names_every_bad_one(tmp_path, tok):
    path, offsets = write(tmp_path / "d.jsonl", [raw for raw, _ in LINES])
    with recording() as caught:
        items = list(StreamingTextDataset(path, tok, on_error="skip"))
    assert [item["index"] for item in items] == [offsets[n] for n in GOOD]
    assert [item["input_ids"].tolist() for item in items] == [tok.encode(text).ids for text in texts_of(GOOD)]
    assert_one_warning_each(caught, {f"d.jsonl byte {offsets[n]}: ": reason for n, reason in BAD.items()})


@pytest.mark.parametrize("number", list(BAD), ids=[f"line{n}" for n in BAD])
def test_raise_names_the_file_and_line_in_both_datasets(tmp_path, tok, number):
    path, offsets = write(tmp_path / "d.jsonl", [LINES[0][0], LINES[number - 1][0]])
    with pytest.raises(DataError, match=rf"d\.jsonl line 2: .*{BAD[number]}"):
        TokenizedTextDataset(path, tok)
    with pytest.raises(DataError, match=rf"d\.jsonl byte {offsets[2]}: .*{BAD[number]}"):
        list(StreamingTextDataset(path, tok))


def test_an_over_long_line_is_read_once_however_many_slices_it_spans(tmp_path, tok):
    lines = [b"short one", LONG.encode(), b"short two"]
    path, offsets = write(tmp_path / "d.txt", lines)
    seen = []
    for rank in range(16):  # most of the 16 slices start and end inside the long line
        seen += [item["index"] for item in StreamingTextDataset(path, tok, max_length=5,
                                                                order=StreamOrder(rank=rank, world_size=16))]
    assert sorted(seen) == [offsets[1], offsets[2], offsets[3]]


def test_an_error_in_a_stream_worker_names_the_file_and_byte(tmp_path, tok):
    clean, _ = write(tmp_path / "a.jsonl", [good(f"line {i}") for i in range(20)])
    broken, offsets = write(tmp_path / "b.jsonl", [good(f"more {i}") for i in range(20)] + [LINES[1][0]])
    stream = StreamingTextDataset([clean, broken], tok)
    loader = streaming_loader(stream, 4, train=False, device="cpu", num_workers=2)
    message = worker_error(loader, rf"b\.jsonl byte {offsets[21]}: not valid UTF-8")
    assert "DataLoader worker process" in message


@pytest.mark.parametrize(
    ("name", "content", "line"),
    [("d.jsonl", b'{"text": "ok", "label": 1}\n{"text": "huge", "label": 9223372036854775808}\n', 2),
     ("d.csv", b"text,label\nok,1\nhuge," + b"9" * 30 + b"\n", 3)],
    ids=["json-int", "csv-digits"],
)
def test_an_integer_label_past_int64_names_its_line(tmp_path, tok, name, content, line):
    (tmp_path / name).write_bytes(content)
    with pytest.raises(DataError, match=rf"{name} line {line}: label .* too large for int64"):
        TokenizedTextDataset(tmp_path / name, tok, label_field="label")
    with pytest.warns(SkippedSampleWarning, match=f"line {line}"):
        assert TokenizedTextDataset(tmp_path / name, tok, label_field="label", on_error="skip").labels.tolist() == [1]


def test_the_advice_to_skip_is_given_when_raising_not_when_it_was_taken(tmp_path, tok):
    path = tmp_path / "rows.txt"
    path.write_bytes(b"a good line\nbad \xff\xfe bytes\n")
    with pytest.raises(DataError, match=r"line 2: not valid UTF-8 .*re-encode the file as UTF-8, or pass on_error='skip'"):
        TokenizedTextDataset(path, tok)
    with pytest.warns(SkippedSampleWarning) as caught:
        assert len(TokenizedTextDataset(path, tok, on_error="skip")) == 1
    (warning,) = caught
    assert str(warning.message).endswith("re-encode the file as UTF-8") and "on_error" not in str(warning.message)
