"""A stream of a glob on S3 (moto, through s3fs) takes each file's size from the listing: no HEAD
a file, for lines (byte ranges) and Parquet rows (footers) alike, and every rank's batches equal
those of the same files read locally. Over HTTP a listing has no sizes: a HEAD a file, as for a
list of URLs. Requests are counted from each server's log."""

import logging

import pytest

from recipes.core.sampling.stream_order import StreamOrder
from recipes.text import StreamingTextDataset, streaming_loader
from tests.servers import FaultyHTTPServer, s3_log, s3_server, upload

FILES = 24


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """``FILES`` .txt files of 3-5 lines, and as many Parquet files of the same lines."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = tmp_path_factory.mktemp("globbed")
    for n in range(FILES):
        lines = [f"line {row} of file {n}" + " word" * (n % 4) for row in range(3 + n % 3)]
        (out / f"part-{n:03d}.txt").write_text("".join(f"{line}\n" for line in lines))
        pq.write_table(pa.table({"text": lines}), out / f"part-{n:03d}.parquet")
    return out


def _batches(source, tokenizer, rank, **options):
    stream = StreamingTextDataset(source, tokenizer, order=StreamOrder(shuffle_buffer=4, seed=1, rank=rank, world_size=2),
                                  **options)
    loader = streaming_loader(stream, 4, train=False, device="cpu", num_workers=0)
    return stream.sizes, [(batch["index"].tolist(), batch["input_ids"].tolist()) for batch in loader]


@pytest.mark.parametrize("suffix", [".txt", ".parquet"])
def test_an_s3_glob_asks_no_size_and_streams_the_local_batches(folder, tokenizer, caplog, suffix):
    local = [_batches(str(folder / f"part-*{suffix}"), tokenizer, rank) for rank in range(2)]
    caplog.set_level(logging.INFO, logger="werkzeug")
    with s3_server() as (endpoint, options):
        upload(endpoint, folder)
        caplog.clear()
        options = {**options, "use_listings_cache": False}  # no size from s3fs's cache of the listing either
        remote = [_batches(f"s3://data/part-*{suffix}", tokenizer, rank, storage_options=options) for rank in range(2)]
        log = s3_log(caplog)
    assert remote == local and all(batches for _, batches in local)
    assert [method for method, _ in log].count("HEAD") == 0
    listings = [path for method, path in log if method == "GET" and path.startswith("/data?")]
    assert len(listings) == 2  # a rank built alone lists for itself


def test_an_http_glob_of_lines_asks_each_size_as_a_list_of_urls_does(folder, tokenizer):
    local = _batches(str(folder / "part-*.txt"), tokenizer, 0)
    with FaultyHTTPServer(folder, listing=True) as server:
        remote = _batches(server.url("part-*.txt"), tokenizer, 0)
        heads = sorted(path for method, path in server.log if method == "HEAD")
        listed = _batches([server.url(f"part-{n:03d}.txt") for n in range(FILES)], tokenizer, 0)
    assert remote == listed == local
    assert heads == [f"/part-{n:03d}.txt" for n in range(FILES)]


def test_a_glob_that_matches_no_text_file_says_so(folder, tokenizer):
    with pytest.raises(FileNotFoundError, match="no text file matches .*nothing-\\*.txt"):
        StreamingTextDataset(str(folder / "nothing-*.txt"), tokenizer)
