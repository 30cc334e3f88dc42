"""Local paths and URLs read the same bytes; transient faults are survived exactly, or named."""

import os

import pytest

from recipes.core.errors import DataError
from recipes.core.storage import is_transient, open_stream, shown, stream_size, suffix
from tests.servers import FaultyHTTPServer, s3_server, upload


@pytest.fixture
def folder(tmp_path):
    data = os.urandom(9 * 2**20 + 12345)  # three of the reader's 4 MB requests
    (tmp_path / "blob.bin").write_bytes(data)
    (tmp_path / "small.jsonl").write_bytes(b'{"text": "a"}\n' * 100)
    return tmp_path


def _read_all(path, start=0, **options):
    with open_stream(path, start=start, **options) as file:
        return file.read()


@pytest.mark.parametrize("start", [0, 1, 2**20 + 7])
def test_a_url_reads_the_same_bytes_as_the_file(folder, start):
    with FaultyHTTPServer(folder) as server:
        url = server.url("blob.bin")
        assert stream_size(url) == stream_size(folder / "blob.bin")
        assert _read_all(url, start) == _read_all(folder / "blob.bin", start)


def test_503s_and_bodies_cut_short_are_retried_from_the_byte_already_read(folder):
    with FaultyHTTPServer(folder, fail_every=3, cut_every=2) as server:
        got = _read_all(server.url("blob.bin"), backoff=0.001)
        lines = []
        with open_stream(server.url("small.jsonl"), backoff=0.001) as file:
            lines = file.readlines()
    assert got == (folder / "blob.bin").read_bytes()
    assert lines == (folder / "small.jsonl").read_bytes().splitlines(keepends=True)
    assert server.faults["503"] > 0 and server.faults["cut"] > 0


def test_reads_after_seeks_survive_faults_too(folder):
    data = (folder / "blob.bin").read_bytes()
    spots = [(len(data) - 100, 100), (5, 2**20), (4 * 2**20 - 3, 9), (123_456, 3 * 2**20)]  # footer first, as pyarrow
    with FaultyHTTPServer(folder, fail_every=3, cut_every=2) as server, open_stream(
        server.url("blob.bin"), backoff=0.001
    ) as file:
        assert file.seekable()
        got = []
        for offset, count in spots:
            file.seek(offset)
            got.append(file.read(count))
            assert file.tell() == offset + count
        file.seek(-10, os.SEEK_END)
        tail = file.read()
    assert got == [data[offset : offset + count] for offset, count in spots] and tail == data[-10:]
    assert server.faults["503"] > 0  # (one 16 MiB request holds this object: cut bodies, see test_parquet.py)


def test_a_fault_that_keeps_coming_is_a_data_error_naming_the_url_without_credentials(folder):
    with FaultyHTTPServer(folder, fail_every=1) as server:
        url = server.url("blob.bin").replace("http://", "http://user:secret@") + "?token=secret"
        with pytest.raises(DataError, match=r"http://127.0.0.1:\d+/blob.bin: read failed 3 times in a row") as error:
            _read_all(url, retries=2, backoff=0.001)
    assert "secret" not in str(error.value)


def test_a_missing_object_is_named(folder):
    with FaultyHTTPServer(folder) as server:
        with pytest.raises(FileNotFoundError, match="missing.bin does not exist"):
            stream_size(server.url("missing.bin"))


def test_s3_through_s3fs_reads_what_was_put(folder):
    with s3_server() as (endpoint, options):
        upload(endpoint, folder)
        assert _read_all("s3://data/blob.bin", 5, storage_options=options) == (folder / "blob.bin").read_bytes()[5:]
        assert stream_size("s3://data/small.jsonl", options) == 1400


def test_urls_are_shown_without_credentials_and_keep_their_suffix():
    assert shown("https://me:pw@host:8080/a/b.jsonl?sig=xyz") == "https://host:8080/a/b.jsonl"
    assert suffix("https://host/a/b.JSONL?sig=xyz") == ".jsonl" and suffix("/x/y.tar") == ".tar"


def test_only_connection_and_server_faults_are_transient():
    assert is_transient(ConnectionResetError()) and is_transient(TimeoutError())
    assert not any(map(is_transient, [FileNotFoundError(), PermissionError(), ValueError()]))


def test_a_missing_backend_names_the_pip_command():
    pytest.importorskip("fsspec")
    try:
        import gcsfs  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match=r'pip install gcsfs'):
            stream_size("gs://bucket/file.jsonl")
    else:
        pytest.skip("gcsfs is installed")
