"""A glob keeps the sizes its listing gives: an object store's (moto's S3, through s3fs) spare a
HEAD a file, for byte sizes and Parquet footers alike; an HTTP folder's links carry none, and
those are asked as before (a HEAD a file). Counted from each server's request log."""

import logging

import pytest

from recipes.core.sources.parquet_files import parquet_listing, read_footers
from recipes.core.sources.storage import glob_paths, glob_sizes, stream_sizes
from tests.servers import FaultyHTTPServer, s3_log, s3_server, upload

FILES = 24


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """``FILES`` files of different sizes, and as many Parquet files of 3 rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = tmp_path_factory.mktemp("sized")
    for n in range(FILES):
        (out / f"part-{n:03d}.bin").write_bytes(bytes(7 * n + 1))
        pq.write_table(pa.table({"text": [f"row {row} of {n}" for row in range(3)]}), out / f"part-{n:03d}.parquet")
    return out


def _sizes(folder, paths):
    return [(folder / path.rsplit("/", 1)[1]).stat().st_size for path in paths]


@pytest.mark.parametrize("pattern", ["s3://data/part-*.bin", "s3://data/**/part-*.bin"], ids=["folder", "glob"])
def test_an_s3_glob_gives_every_size_from_its_listing_and_asks_none(folder, caplog, pattern):
    caplog.set_level(logging.INFO, logger="werkzeug")
    with s3_server() as (endpoint, options):
        upload(endpoint, folder)
        caplog.clear()
        options = {**options, "use_listings_cache": False}
        paths, sizes = glob_sizes(pattern, options)
        assert stream_sizes(paths, options, known=sizes) == sizes  # nothing left to ask
        log = s3_log(caplog)
    assert paths == [f"s3://data/part-{n:03d}.bin" for n in range(FILES)]
    assert sizes == _sizes(folder, paths)
    assert log and all(method == "GET" and path.startswith(("/data?", "/data/?", "/?")) for method, path in log), log


def test_an_http_glob_has_no_sizes_and_each_is_asked_as_before(folder):
    with FaultyHTTPServer(folder, listing=True) as server:
        paths, sizes = glob_sizes(server.url("part-*.bin"))
        assert paths == glob_paths(server.url("part-*.bin")) == [server.url(f"part-{n:03d}.bin") for n in range(FILES)]
        assert sizes == [None] * FILES
        assert stream_sizes(paths, known=sizes) == _sizes(folder, paths)
        known = _sizes(folder, paths)[:-1] + [None]  # only the unknown one is asked
        assert stream_sizes(paths, known=known) == _sizes(folder, paths)
    heads = sorted(path for method, path in server.log if method == "HEAD")
    assert heads == sorted([f"/part-{n:03d}.bin" for n in range(FILES)] + [f"/part-{FILES - 1:03d}.bin"])


def test_a_local_glob_has_no_sizes_from_its_listing(folder):
    paths, sizes = glob_sizes(str(folder / "part-*.bin"))
    assert paths == glob_paths(str(folder / "part-*.bin")) and sizes == [None] * FILES
    assert stream_sizes(paths, known=sizes) == _sizes(folder, paths)


def test_parquet_footers_of_an_s3_glob_ask_no_size(folder, caplog):
    local, _ = parquet_listing(str(folder / "part-*.parquet"))
    rows, _ = read_footers(local, {"text_field": "text"})
    caplog.set_level(logging.INFO, logger="werkzeug")
    with s3_server() as (endpoint, options):
        upload(endpoint, folder)
        caplog.clear()
        options = {**options, "use_listings_cache": False}  # no size from s3fs's cache of the listing either
        entries, sizes = parquet_listing("s3://data/part-*.parquet", options)
        remote_rows, file_bytes = read_footers(entries, {"text_field": "text"}, options, sizes=sizes)
        log = s3_log(caplog)
    assert entries == [f"s3://data/part-{n:03d}.parquet" for n in range(FILES)]
    assert remote_rows == rows == [3] * FILES and file_bytes == sizes == _sizes(folder, entries)
    assert [method for method, _ in log].count("HEAD") == 0
    assert sorted(path for method, path in log if method == "GET" and "?" not in path) == sorted(
        f"/data/part-{n:03d}.parquet" for n in range(FILES))  # a footer each, and one listing
