"""DiskCache: later reads come from local disk; partial, truncated or corrupt copies are fetched
again; entries appear atomically; the least recently used go past the size limit."""

import os

import pytest

from recipes.core.disk_cache import DiskCache
from tests.servers import FaultyHTTPServer


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "remote").mkdir()
    for name in ("a.bin", "b.bin", "c.bin"):
        (tmp_path / "remote" / name).write_bytes(os.urandom(5 * 2**20 + 321))
    return tmp_path


def _read(cache, url, start=0):
    with cache.open(url, start=start) as file:
        return file.read()


def _gets(server):
    return server.gets


def test_the_second_read_comes_from_disk_and_equals_the_object(folder):
    cache = DiskCache(folder / "cache")
    with FaultyHTTPServer(folder / "remote") as server:
        url = server.url("a.bin")
        first = _read(cache, url)
        fetched = _gets(server)
        asked = server.requests
        second, middle = _read(cache, url), _read(cache, url, start=12345)
        assert _gets(server) == fetched and server.requests == asked  # the remote is not even asked its size
    original = (folder / "remote" / "a.bin").read_bytes()
    assert first == second == original and middle == original[12345:]
    assert cache.entry(url).read_bytes() == original
    assert not list((folder / "cache").glob("*.tmp"))


@pytest.mark.parametrize("damage", ["truncated", "flipped", "no-record"])
def test_a_damaged_copy_is_fetched_again(folder, damage):
    cache = DiskCache(folder / "cache")
    with FaultyHTTPServer(folder / "remote") as server:
        url = server.url("b.bin")
        _read(cache, url)
        entry = cache.entry(url)
        data = bytearray(entry.read_bytes())
        if damage == "truncated":
            entry.write_bytes(data[:-10])
        elif damage == "flipped":
            data[4096] ^= 0xFF
            entry.write_bytes(bytes(data))
        else:
            entry.with_name(entry.name + ".record.json").unlink()
        before = _gets(server)
        assert _read(cache, url) == (folder / "remote" / "b.bin").read_bytes()
        assert _gets(server) > before  # fetched again
        assert entry.read_bytes() == (folder / "remote" / "b.bin").read_bytes()  # and the copy mended


def test_a_read_stopped_short_leaves_no_entry(folder):
    cache = DiskCache(folder / "cache")
    with FaultyHTTPServer(folder / "remote") as server:
        url = server.url("a.bin")
        with cache.open(url) as file:
            file.read(1000)
    assert not cache.entry(url).exists() and not list((folder / "cache").iterdir())


def test_the_least_recently_used_entries_go_past_the_limit(folder):
    cache = DiskCache(folder / "cache", limit_bytes=11 * 2**20)  # two of the three objects
    with FaultyHTTPServer(folder / "remote") as server:
        a, b, c = (server.url(name) for name in ("a.bin", "b.bin", "c.bin"))
        _read(cache, a)
        _read(cache, b)
        os.utime(cache.entry(b), (1, 1))  # b: long unused
        _read(cache, a)  # a: used again
        _read(cache, c)
    assert cache.entry(a).exists() and cache.entry(c).exists() and not cache.entry(b).exists()
    assert not cache.entry(b).with_name(cache.entry(b).name + ".record.json").exists()


def test_revalidate_fetches_an_object_rewritten_in_place(folder):
    cache, checking = DiskCache(folder / "cache"), DiskCache(folder / "cache", revalidate=True)
    with FaultyHTTPServer(folder / "remote") as server:
        url = server.url("c.bin")
        _read(cache, url)
        (folder / "remote" / "c.bin").write_bytes(b"rewritten")
        assert _read(cache, url) != b"rewritten"  # immutable by default: the copy is trusted
        assert _read(checking, url) == b"rewritten"  # the size changed: fetched again
        assert _read(cache, url) == b"rewritten"  # and the copy replaced
