"""The text fixtures (recipes/text/fixtures.py): a long-tailed corpus, labelled rows, the tokenizer."""

import csv
import json
import statistics

import pytest


def test_corpus_is_long_tailed_utf8(fixtures) -> None:
    root = fixtures / "text"
    lines = (root / "corpus.txt").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 200 and all(line.strip() for line in lines)
    counts = [len(line.split()) for line in lines]
    assert max(counts) / statistics.median(counts) > 10 and max(counts) >= 100
    joined = "\n".join(lines)
    assert "café" in joined and "naïve" in joined and "🐱" in joined


def test_labeled_rows_parse_with_quotes_and_labels(fixtures) -> None:
    root = fixtures / "text"
    rows = [json.loads(line) for line in (root / "labeled.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 120 and {r["label"] for r in rows} == {0, 1, 2}
    with (root / "labeled.csv").open(encoding="utf-8", newline="") as f:
        table = list(csv.DictReader(f))
    assert len(table) == 80 and {int(r["label"]) for r in table} == {0, 1, 2}
    assert any('"' in r["text"] and "," in r["text"] for r in table)


def test_tokenizer_has_specials_template_and_no_padding(fixtures) -> None:
    root = fixtures / "text"
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.Tokenizer.from_file(str(root / "tokenizer.json"))
    ids = [tok.token_to_id(t) for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]")]
    assert ids == [0, 1, 2, 3] and 600 <= tok.get_vocab_size() <= 1000
    assert tok.padding is None and tok.truncation is None
    enc = tok.encode("the café, too.")
    assert enc.tokens[0] == "[CLS]" and enc.tokens[-1] == "[SEP]" and "▁café" in enc.tokens
    assert tok.decode(enc.ids) == "the café, too."  # the decoder puts the spaces back
    assert tok.encode("a", "b").type_ids == [0, 0, 0, 1, 1]
