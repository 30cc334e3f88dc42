"""max_length keeps the tokenizer's special tokens, reads a long line in part, and a line too
long to tokenise whole is refused by its line number."""

import json
import random

import pytest

from recipes.core.contracts.errors import DataError, SkippedSampleWarning
from recipes.core.tokens.encoding import WHOLE_TEXT_CHARS
from recipes.text import StreamingTextDataset, TokenizedTextDataset
from recipes.core.checks import MAX_LINE_CHARS
from recipes.core.contracts.read_options import ReadOptions
from tests.core.hostile import peak_rss_growth_mb
from tests.special_tokens import bert_style, truncated


@pytest.fixture(scope="module")
def corpus(fixtures):
    lines = (fixtures / "text" / "corpus.txt").read_text(encoding="utf-8").splitlines()
    lines = [line for line in lines if line.strip()]
    words, rng = " ".join(lines).split(), random.Random(0)
    long_lines = [
        " ".join(rng.choice(words) for _ in range(20_000)),
        "".join(rng.choice("abcdeéñ漢字") for _ in range(80_000)),
        "Ünïcödé — “quoted” " * 4_000,
        "   " * 20_000 + " ".join(words[:3_000]),
    ]
    assert min(map(len, long_lines)) > WHOLE_TEXT_CHARS  # read from a prefix
    return lines[:30] + long_lines


@pytest.fixture(scope="module")
def minilm(corpus):
    return bert_style(corpus[:30])


def _write_jsonl(path, texts):
    path.write_text("".join(json.dumps({"text": text}) + "\n" for text in texts), encoding="utf-8")
    return path


@pytest.mark.parametrize("max_length", [4, 16, 128])
def test_both_readers_end_long_lines_in_sep_as_enable_truncation_does(tmp_path, minilm, corpus, max_length):
    path = _write_jsonl(tmp_path / "long.jsonl", corpus)
    expected = [truncated(minilm, text, max_length) for text in corpus]
    mapped = TokenizedTextDataset(path, minilm, max_length=max_length)
    assert [mapped[i]["input_ids"].tolist() for i in range(len(mapped))] == expected
    streamed = [item["input_ids"].tolist() for item in StreamingTextDataset(path, minilm, max_length=max_length)]
    assert streamed == expected
    sep = minilm.token_to_id("[SEP]")
    assert all(ids[-1] == sep and len(ids) == max_length for ids in expected[30:])
    assert minilm.truncation is None


def test_slice_truncation_cuts_encode_ids_and_has_its_own_cache_entry(tmp_path, minilm, corpus):
    path = _write_jsonl(tmp_path / "long.jsonl", corpus)
    sliced = TokenizedTextDataset(path, minilm, max_length=16, cache_dir=tmp_path / "cache",
                                  read_options=ReadOptions(truncation="slice"))
    assert [sliced[i]["input_ids"].tolist() for i in range(len(sliced))] == [minilm.encode(t).ids[:16] for t in corpus]
    kept = TokenizedTextDataset(path, minilm, max_length=16, cache_dir=tmp_path / "cache")
    assert [kept[i]["input_ids"].tolist() for i in range(len(kept))] == [truncated(minilm, t, 16) for t in corpus]
    assert len(list((tmp_path / "cache").glob("*.json"))) == 2
    with pytest.raises(ValueError, match="truncation must be one of"):
        StreamingTextDataset(path, minilm, max_length=16, read_options=ReadOptions(truncation="cut"))


def test_a_line_too_long_to_tokenise_whole_is_named_by_its_line(tmp_path, minilm):
    path = _write_jsonl(tmp_path / "huge.jsonl", ["short one", "x " * 600, "short two"])
    with pytest.raises(DataError, match=r"huge\.jsonl line 2: field 'text' holds 1,200 characters, over the 1,000"):
        TokenizedTextDataset(path, minilm, read_options=ReadOptions(max_line_chars=1_000))
    with pytest.raises(DataError, match=r"huge\.jsonl byte 22: field 'text' holds 1,200 characters.*max_line_chars"):
        list(StreamingTextDataset(path, minilm, read_options=ReadOptions(max_line_chars=1_000)))
    with pytest.warns(SkippedSampleWarning, match="line 2: field 'text' holds 1,200 characters"):
        skipped = TokenizedTextDataset(path, minilm, on_error="skip", read_options=ReadOptions(max_line_chars=1_000))
    assert skipped.line_numbers.tolist() == [1, 3]
    assert len(TokenizedTextDataset(path, minilm, read_options=ReadOptions(max_line_chars=2_000))) == 3  # raised: all kept
    assert len(TokenizedTextDataset(path, minilm, max_length=8, read_options=ReadOptions(max_line_chars=1_000))) == 3  # read in part
    txt = tmp_path / "huge.txt"
    txt.write_text("short\n" + "y" * (MAX_LINE_CHARS + 1) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=rf"huge\.txt line 2: the line holds {MAX_LINE_CHARS + 1:,} characters"):
        TokenizedTextDataset(txt, minilm)


@pytest.mark.parametrize("reader", ["TokenizedTextDataset", "StreamingTextDataset"])
def test_memory_for_one_long_line_follows_max_length(tmp_path, fixtures, reader):
    words = (fixtures / "text" / "corpus.txt").read_text(encoding="utf-8").split()
    rng = random.Random(0)
    line = " ".join(rng.choice(words) for _ in range(1_500_000))  # about 8 MB
    path = _write_jsonl(tmp_path / "one.jsonl", [line])
    setup = f"from recipes.text import {reader}"
    action = (
        f"items = list({reader}({str(path)!r}, {str(fixtures / 'text' / 'tokenizer.json')!r}, max_length=128))\n"
        "print('ids', len(items[0]['input_ids']))"
    )
    growth, out = peak_rss_growth_mb(setup, action)
    assert "ids 128" in out
    assert growth < 150  # the whole line tokenised at once grows by about 900 MB


def test_a_parquet_row_too_long_to_tokenise_whole_is_named_by_its_row(tmp_path, minilm):
    pa, pq = pytest.importorskip("pyarrow"), pytest.importorskip("pyarrow.parquet")
    path = tmp_path / "huge.parquet"
    pq.write_table(pa.table({"text": ["short one", "x " * 600, "short two"]}), path)
    with pytest.raises(DataError, match=r"huge\.parquet row 1: field 'text' holds 1,200 characters"):
        TokenizedTextDataset(path, minilm, read_options=ReadOptions(max_line_chars=1_000))
    with pytest.raises(DataError, match=r"huge\.parquet row 1: field 'text' holds 1,200 characters"):
        list(StreamingTextDataset(path, minilm, read_options=ReadOptions(max_line_chars=1_000)))
    assert len(TokenizedTextDataset(path, minilm, max_length=8, read_options=ReadOptions(max_line_chars=1_000))) == 3
