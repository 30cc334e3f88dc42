"""Streamed lines over real servers (HTTP with injected faults, S3 through s3fs) equal the local ones."""

import json

import pytest

from recipes.core.contracts.read_options import ReadOptions
from recipes.core.sampling.stream_order import StreamOrder
from recipes.text import StreamingTextDataset, streaming_loader
from tests.servers import FaultyHTTPServer, s3_server, upload

# the faults are retried as ever, without the real backoff's seconds (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("quick_retries")


@pytest.fixture(scope="module")
def folder(tmp_path_factory, fixtures):
    """The fixture corpus as a .txt and, with labels, a .jsonl (~1 MB between them)."""
    out = tmp_path_factory.mktemp("lines")
    corpus = (fixtures / "text" / "corpus.txt").read_text(encoding="utf-8").split("\n")
    lines = [line for line in corpus if line.strip()]
    lines = (lines * (4000 // len(lines) + 1))[:4000]
    (out / "a.txt").write_text("".join(f"{line}\n" for line in lines[:2000]), encoding="utf-8")
    rows = [json.dumps({"text": line, "label": k % 3}) + "\n" for k, line in enumerate(lines[2000:])]
    (out / "b.jsonl").write_text("".join(rows), encoding="utf-8")
    return out


def _items(stream, workers):
    """Every line as (index, ids), in the loader's order."""
    loader = streaming_loader(stream, 16, train=False, device="cpu", num_workers=workers)
    return [(int(i), ids[:n].tolist()) for b in loader for i, ids, n in zip(b["index"], b["input_ids"], b["lengths"])]


@pytest.mark.parametrize("workers", [0, 2])
def test_http_lines_with_503s_and_cut_bodies_equal_the_local_lines(folder, tokenizer, workers):
    files = [folder / "a.txt", folder / "b.jsonl"]
    local = _items(StreamingTextDataset(files, tokenizer, order=StreamOrder(shuffle_buffer=64, seed=0)), workers)
    with FaultyHTTPServer(folder, fail_every=3, cut_every=2) as server:
        urls = [server.url("a.txt"), server.url("b.jsonl")]
        remote = _items(StreamingTextDataset(urls, tokenizer, order=StreamOrder(shuffle_buffer=64, seed=0)), workers)
    assert server.faults["503"] > 0 and server.faults["cut"] > 0
    assert len(local) == 4000 and len({index for index, _ in local}) == 4000
    assert remote == local if workers == 0 else sorted(remote) == sorted(local)


@pytest.mark.parametrize("workers", [0, 2])
def test_s3_lines_through_s3fs_equal_the_local_lines(folder, tokenizer, workers):
    local = _items(StreamingTextDataset([folder / "a.txt", folder / "b.jsonl"], tokenizer, order=StreamOrder(seed=0)), workers)
    with s3_server() as (endpoint, options):
        upload(endpoint, folder)
        urls = ["s3://data/a.txt", "s3://data/b.jsonl"]
        stream = StreamingTextDataset(urls, tokenizer, storage_options=options, order=StreamOrder(seed=0))
        remote = _items(stream, workers)
    assert remote == local if workers == 0 else sorted(remote) == sorted(local)


def test_a_tokenized_file_from_a_url_equals_the_local_one(folder, tokenizer, tmp_path):
    from recipes.text import TokenizedTextDataset

    local = TokenizedTextDataset(folder / "b.jsonl", tokenizer, label_field="label")
    with FaultyHTTPServer(folder, fail_every=2, fail_first=1) as server:  # the file is one GET
        remote = TokenizedTextDataset(server.url("b.jsonl"), tokenizer, label_field="label", cache_dir=tmp_path)
    assert server.faults["503"] > 0 and len(remote) == len(local) == 2000
    assert all(remote[i]["input_ids"].tolist() == local[i]["input_ids"].tolist() for i in range(len(local)))
    assert (remote.labels == local.labels).all() and list(tmp_path.glob("b-*.json"))  # cached by the file's name
    with s3_server() as (endpoint, options):
        upload(endpoint, folder)
        again = TokenizedTextDataset("s3://data/b.jsonl", tokenizer, label_field="label", storage_options=options)
        assert [again[i]["input_ids"].tolist() for i in range(5)] == [local[i]["input_ids"].tolist() for i in range(5)]
        with pytest.raises(FileNotFoundError, match="s3://data/missing.jsonl does not exist"):
            TokenizedTextDataset("s3://data/missing.jsonl", tokenizer, storage_options=options)


def test_a_cached_line_index_lets_the_next_build_read_no_line_over_http(folder, tokenizer, tmp_path):
    files = [folder / "a.txt", folder / "b.jsonl"]
    local = _items(StreamingTextDataset(files, tokenizer, order=StreamOrder(rank=1, world_size=2)), 0)
    with FaultyHTTPServer(folder) as server:
        urls = [server.url("a.txt"), server.url("b.jsonl")]
        first = StreamingTextDataset(urls, tokenizer, order=StreamOrder(rank=1, world_size=2),
                                     read_options=ReadOptions(index_dir=tmp_path))
        assert server.count("GET") >= 2  # the first build reads both files to count their lines
        before = len(server.log)
        again = StreamingTextDataset(urls, tokenizer, order=StreamOrder(rank=1, world_size=2),
                                     read_options=ReadOptions(index_dir=tmp_path))
        assert server.count("GET", before) == 0  # the second asks the sizes, reads nothing
        assert _items(again, 0) == _items(first, 0) == local  # rank 1's equal share, as built from the files
    assert [path.name.startswith("lines-index-") for path in tmp_path.iterdir()] == [True]
