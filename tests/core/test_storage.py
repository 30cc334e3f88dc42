"""Local paths and URLs read the same bytes; transient faults are survived exactly, or named."""

import logging
import os

import pytest

from recipes.core.contracts.errors import DataError
from recipes.core.sources import storage
from recipes.core.sources.storage import glob_paths, has_glob, is_transient, open_stream, shown, stream_size, stream_sizes, suffix
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


@pytest.mark.parametrize("length", [0, 1, 3 * 1024 - 1, 3 * 1024, 3 * 1024 + 1])
@pytest.mark.parametrize("start", [0, 1024, 5000])
def test_a_url_is_read_in_ranged_gets_without_asking_its_size(tmp_path, monkeypatch, length, start):
    monkeypatch.setattr(storage, "BLOCK_BYTES", 1024)  # objects of several blocks, a block's multiple among them
    data = os.urandom(length)
    (tmp_path / "blob.bin").write_bytes(data)
    with FaultyHTTPServer(tmp_path, fail_every=3, cut_every=2) as server:
        with open_stream(server.url("blob.bin"), start=start, backoff=0.001) as file:
            got = file.read()
            assert file.raw.size == length
    assert got == data[start:]
    asked = [method for method, _ in server.log]
    # a HEAD only where a range starting at the end was refused (416): the object's end, or past it
    assert asked.count("HEAD") == (start >= length) and asked.count("GET") >= -(-(length - start + 1) // 1024)


def test_a_missing_url_is_named_when_opened(folder):
    with FaultyHTTPServer(folder) as server:
        with pytest.raises(FileNotFoundError, match=r"http://127.0.0.1:\d+/missing.bin does not exist"):
            open_stream(server.url("missing.bin"))
    assert server.log == [("GET", "/missing.bin")]


def test_a_url_glob_is_one_listing_of_its_folder(tmp_path):
    (tmp_path / "shards").mkdir()
    for name in ("shard-0.tar", "shard-1.tar", "shard-2.tar", "other.txt"):
        (tmp_path / "shards" / name).write_bytes(b"x")
    with FaultyHTTPServer(tmp_path, listing=True) as server:
        found = glob_paths(server.url("shards/shard-[02].tar"))
        assert found == [server.url("shards/shard-0.tar"), server.url("shards/shard-2.tar")]
        assert glob_paths(server.url("shards/*.tar")) == [server.url(f"shards/shard-{n}.tar") for n in range(3)]
        assert glob_paths(server.url("nothing/*.tar")) == []
    assert server.log == [("LIST", "/shards"), ("LIST", "/shards"), ("GET", "/nothing")]  # one request a glob


def test_sizes_of_many_urls_are_asked_together(folder):
    with FaultyHTTPServer(folder, fail_every=4) as server:
        urls = [server.url("blob.bin"), server.url("small.jsonl")] * 10
        sizes = stream_sizes([*urls, folder / "small.jsonl"])
    assert sizes == [stream_size(folder / "blob.bin"), 1400] * 10 + [1400]
    assert server.count("HEAD") >= 20 and server.faults["503"] > 0


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
    # the size given, as Parquet's reader gives it: no first block is fetched, each seek's read asks
    with FaultyHTTPServer(folder, fail_every=2, cut_every=2) as server, open_stream(
        server.url("blob.bin"), backoff=0.001, size=len(data)
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


def _requests(caplog, bucket: str) -> int:
    """Requests moto's server answered for ``bucket`` (its access log, one record each)."""
    return sum(f" /{bucket}" in record.getMessage() for record in caplog.records if record.name == "werkzeug")


@pytest.mark.parametrize(
    "bucket, key, refused, error, words",
    [
        pytest.param("nobucket", "x.jsonl", False, FileNotFoundError, "s3://nobucket/x.jsonl does not exist",
                     id="no-such-bucket"),
        pytest.param("data", "missing.jsonl", False, FileNotFoundError, "s3://data/missing.jsonl does not exist",
                     id="404"),
        pytest.param("data", "small.jsonl", True, DataError, "s3://data/small.jsonl: cannot read (PermissionError",
                     id="403"),
    ],
)
def test_a_refusal_from_s3_fails_at_once_naming_the_url(folder, caplog, monkeypatch, bucket, key, refused, error,
                                                        words):
    from recipes.core.sources.storage import filesystem

    caplog.set_level(logging.INFO, logger="werkzeug")
    with s3_server() as (endpoint, options):
        upload(endpoint, folder)
        if refused:  # moto checks signatures from here on, and knows no key: every request is a 403
            monkeypatch.setattr("moto.settings.INITIAL_NO_AUTH_ACTION_COUNT", 0)
        url = f"s3://{bucket}/{key}"
        fs, inner = filesystem(url, options)
        caplog.clear()
        with pytest.raises(Exception):  # noqa: B017 - s3fs's own answer, asked once: the oracle
            fs.info(inner)
        once = _requests(caplog, bucket)
        fs.invalidate_cache()
        caplog.clear()
        with pytest.raises(error) as raised:
            stream_size(url, options, retries=5, backoff=0.001)
        assert _requests(caplog, bucket) == once > 0  # retried, it would be 6 times as many
    assert words in str(raised.value)
    assert raised.value.__suppress_context__ and raised.value.__cause__ is None


def test_s3_answers_are_transient_only_when_asking_again_may_cure_them():
    from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError, ParamValidationError

    def answer(status, code):
        response = {"Error": {"Code": code, "Message": code}, "ResponseMetadata": {"HTTPStatusCode": status}}
        return ClientError(response, "GetObject")

    def translated(kind, cause):  # what s3fs raises: an OSError from S3's answer
        error = kind(cause.response["Error"]["Message"])
        error.__cause__ = cause
        return error

    final = [answer(404, "NoSuchKey"), answer(404, "NoSuchBucket"), answer(403, "AccessDenied"),
             answer(400, "InvalidRequest"), translated(FileNotFoundError, answer(404, "NoSuchBucket")),
             translated(PermissionError, answer(403, "AccessDenied")), translated(OSError, answer(400, "InvalidArgument")),
             ParamValidationError(report="bad bucket name"), NoCredentialsError()]
    healing = [answer(500, "InternalError"), answer(503, "SlowDown"), answer(429, "TooManyRequests"),
               translated(OSError, answer(503, "ServiceUnavailable")), EndpointConnectionError(endpoint_url="http://x")]
    assert [is_transient(e) for e in final] == [False] * len(final)
    assert [is_transient(e) for e in healing] == [True] * len(healing)


def test_a_signed_url_is_one_file_not_a_glob():
    from recipes.core.sources.parquet_files import parquet_entries
    from recipes.multimodal import expand_shards

    shard, table = "https://host/a/shard-000.tar?sig=x&se=2026", "https://host/a/t.parquet?sig=x"
    assert expand_shards(shard) == [shard] and parquet_entries(table) == [table]  # no listing asked for
    assert has_glob("https://host/a/shard-*.tar?sig=x") and has_glob("/data/shard-00?.tar")
    assert not has_glob("https://host/a/shard-000.tar?sig=x")


def _read_in_a_child(url, results):
    results.put(_read_all(url))


def test_a_forked_child_reads_a_url_after_its_parent_did(folder):
    # fsspec before 2025.3.1 hands a forked child the parent's event loop, whose thread stayed behind:
    # the child's first read waited forever (a DataLoader worker over shards, CI's floors pass)
    import multiprocessing

    with FaultyHTTPServer(folder) as server:
        url = server.url("small.jsonl")
        assert _read_all(url) == (folder / "small.jsonl").read_bytes()  # the parent's loop is running now
        context = multiprocessing.get_context("fork")
        results = context.Queue()
        child = context.Process(target=_read_in_a_child, args=(url, results))
        child.start()
        child.join(60)
        hung = child.is_alive()
        if hung:
            child.kill()
        assert not hung, "the forked child's read did not finish"
        assert results.get(timeout=5) == (folder / "small.jsonl").read_bytes()


@pytest.mark.parametrize("version, old", [("2024.2.0", True), ("2025.3.0", True), ("2025.3.1", False),
                                          ("2026.9.0", False), ("2025.10.0", False)])
def test_the_fsspec_releases_that_keep_the_parents_loop(version, old):
    assert storage._fsspec_keeps_the_parents_loop(version) is old
