"""recipes.text.prepare and `recipes prepare text`: a corpus tokenised once into Parquet shards of ids
that TokenizedTextDataset.from_ids reads; the ids and labels those of TokenizedTextDataset on the
source (the oracle), byte-identical whatever the workers, a changed source or tokenizer refused,
bad lines named or skipped, and a stopped run resumed to the same bytes."""

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from tokenizers import Tokenizer

from recipes.__main__ import main
from recipes.core import DataError, SkippedSampleWarning
from recipes.text import TokenizedTextDataset, prepare


def written(dest: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(dest.iterdir()) if path.is_file()}


def same_samples(expected: TokenizedTextDataset, got: TokenizedTextDataset) -> None:
    assert len(got) == len(expected)
    for index in range(len(expected)):
        assert np.array_equal(got[index]["input_ids"], expected[index]["input_ids"]), index
        assert got[index].get("label") == expected[index].get("label"), index
    assert got.label_names == expected.label_names


@pytest.mark.parametrize("name, label_field", [("labeled.jsonl", "label"), ("labeled.csv", "label"),
                                               ("corpus.txt", None)])
def test_the_ids_are_those_the_text_path_makes_and_the_bytes_the_same_whatever_the_workers(
        fixtures, tokenizer, tmp_path, name, label_field):
    source = fixtures / "text" / name
    one = prepare(source, tmp_path / "one", tokenizer, max_length=16, label_field=label_field, samples_per_shard=30,
                  workers=1, progress=False)
    prepare(source, tmp_path / "two", tokenizer, max_length=16, label_field=label_field, samples_per_shard=30,
            workers=2, progress=False)
    assert written(tmp_path / "one") == written(tmp_path / "two")
    expected = TokenizedTextDataset(source, tokenizer, max_length=16, label_field=label_field)
    got = TokenizedTextDataset.from_ids(str(tmp_path / "one" / "shard-*.parquet"), tmp_path / "one" / "tokenizer.json",
                                        label_field=None if label_field is None else "label")
    same_samples(expected, got)
    assert one.samples == len(expected) and len(one.shards) == -(-len(expected) // 30)
    schema = pq.read_schema(one.shards[0])
    assert str(schema.field("input_ids").type) == "list<element: int32>"
    assert Tokenizer.from_file(str(tmp_path / "one" / "tokenizer.json")).to_str() == tokenizer.to_str()
    listed = json.loads((tmp_path / "one" / "manifest.json").read_text())
    assert [entry["name"] for entry in listed["shards"]] == [path.name for path in one.shards]
    assert sum(entry["samples"] for entry in listed["shards"]) == len(expected)


def test_class_names_are_numbered_as_the_text_path_numbers_them(tokenizer, tmp_path):
    rows = [{"text": f"sample number {k} of the corpus", "label": ["spam", "ham", "eggs"][k % 3]} for k in range(11)]
    source = tmp_path / "named.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    prepare(source, tmp_path / "out", tokenizer, label_field="label", samples_per_shard=4, workers=1, progress=False)
    got = TokenizedTextDataset.from_ids(str(tmp_path / "out" / "shard-*.parquet"), tokenizer, label_field="label")
    same_samples(TokenizedTextDataset(source, tokenizer, label_field="label"), got)
    assert got.label_names == ["eggs", "ham", "spam"]


def test_another_source_or_tokenizer_is_refused_by_name_and_a_bad_line_named_or_skipped(
        fixtures, tokenizer, tmp_path):
    dest = tmp_path / "out"
    prepare(fixtures / "text/corpus.txt", dest, tokenizer, samples_per_shard=50, workers=1, progress=False)
    with pytest.raises(ValueError, match=r"prepared with other options \(source .*corpus.txt"):
        prepare(fixtures / "text/labeled.jsonl", dest, tokenizer, samples_per_shard=50, workers=1, progress=False)
    other = Tokenizer.from_str(tokenizer.to_str())
    other.add_tokens(["zzzword"])
    with pytest.raises(ValueError, match="prepared with other options \\(tokenizer="):
        prepare(fixtures / "text/corpus.txt", dest, other, samples_per_shard=50, workers=1, progress=False)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "kept one"}\n{"text": \n{"text": "kept two"}\n', encoding="utf-8")
    with pytest.raises(DataError, match="bad.jsonl line 2"):
        prepare(bad, tmp_path / "raised", tokenizer, workers=1, progress=False)
    with pytest.warns(SkippedSampleWarning, match="bad.jsonl line 2"):
        summary = prepare(bad, tmp_path / "skipped", tokenizer, on_error="skip", workers=1, progress=False)
    # the line the listing dropped is counted and named, in the summary and the manifest
    assert summary.samples == 2 and [where for where, _ in summary.skipped] == [f"{bad} line 2"]
    assert json.loads((tmp_path / "skipped" / "manifest.json").read_text())["skipped"][0][0] == f"{bad} line 2"


def test_a_stopped_run_goes_on_from_its_whole_shards_to_the_same_bytes(fixtures, tokenizer, tmp_path):
    source = fixtures / "text/labeled.jsonl"
    prepare(source, tmp_path / "whole", tokenizer, label_field="label", samples_per_shard=25, workers=1,
            progress=False)
    dest = tmp_path / "stopped"
    prepare(source, dest, tokenizer, label_field="label", samples_per_shard=25, workers=1, progress=False)
    (dest / "shard-000002.parquet").unlink()  # as a run killed before it renamed that shard leaves it
    (dest / ".prepare" / "shard-000003.parquet.json").unlink()  # killed between the rename and the record
    (dest / "shard-000001.parquet.1234.tmp").write_bytes(b"half a shard")
    summary = prepare(source, dest, tokenizer, label_field="label", samples_per_shard=25, workers=2, progress=False)
    assert summary.reused == 3 and written(dest) == written(tmp_path / "whole")


def test_recipes_prepare_text_needs_a_tokenizer_and_prints_how_to_read_the_copy(fixtures, tmp_path, capsys):
    dest = tmp_path / "prepared"
    source = str(fixtures / "text/labeled.csv")
    with pytest.raises(SystemExit):
        main(["prepare", "text", source, str(dest)])
    assert "text needs --tokenizer FILE" in capsys.readouterr().err
    assert main(["prepare", "text", source, str(dest), "--tokenizer", str(fixtures / "text/tokenizer.json"),
                 "--label-field", "label", "--max-length", "12", "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert "80 samples in 1 shards" in out and "TokenizedTextDataset.from_ids(" in out and "label_field='label'" in out
    got = TokenizedTextDataset.from_ids(str(dest / "shard-*.parquet"), dest / "tokenizer.json", label_field="label")
    assert len(got) == 80 and max(len(got[k]["input_ids"]) for k in range(80)) <= 12
    assert main(["check", "text", str(dest)]) == 0
    out = capsys.readouterr().out
    assert "samples   80" in out and "1 of 1 shards as manifest.json lists them (sha256)" in out
    shard = dest / "shard-000000.parquet"
    data = bytearray(shard.read_bytes())
    data[-12] ^= 1  # in the footer's length field: the file no longer reads, and the sha256 disagrees
    shard.write_bytes(bytes(data))
    assert main(["check", "text", str(dest)]) != 0
    assert "shard-000000.parquet: its bytes are not those manifest.json lists" in capsys.readouterr().out


def test_recipes_prepare_text_writes_to_s3_with_the_credentials_fsspec_finds(fixtures, tokenizer, monkeypatch, capsys):
    from tests.servers import s3_server

    with s3_server() as (endpoint, options):
        for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                            "AWS_ENDPOINT_URL": endpoint, "AWS_DEFAULT_REGION": "us-east-1"}.items():
            monkeypatch.setenv(name, value)
        url = "s3://data/corpus-ids"  # moto's buckets live as long as the process: a prefix of its own
        assert main(["prepare", "text", str(fixtures / "text/corpus.txt"), url, "--tokenizer",
                     str(fixtures / "text/tokenizer.json"), "--samples-per-shard", "64", "--workers", "2"]) == 0
        assert f"from_ids('{url}/shard-*.parquet', '{url}/tokenizer.json')" in capsys.readouterr().out
        got = TokenizedTextDataset.from_ids(f"{url}/shard-*.parquet", tokenizer, storage_options=options)
        same_samples(TokenizedTextDataset(fixtures / "text/corpus.txt", tokenizer), got)
