"""DiskCache: later reads come from local disk; partial, truncated or corrupt copies are fetched
again; entries appear atomically; the least recently used go past the size limit."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from recipes.core.sources.disk_cache import DiskCache
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


ROOT = Path(__file__).resolve().parents[2]
WRITER = """
import sys, time
from recipes.core.sources.disk_cache import DiskCache
reader = DiskCache(sys.argv[1], limit_bytes=int(sys.argv[3])).open(sys.argv[2])
reader.read(4 * 2**20)
print("copying", flush=True)
time.sleep(120)
"""


def _start_writer(cache_folder, url, limit):
    """A process copying ``url`` into the cache, to stop 4 MiB in (wait for it with _copying)."""
    return subprocess.Popen([sys.executable, "-c", WRITER, str(cache_folder), url, str(limit)], cwd=ROOT,
                            stdout=subprocess.PIPE, text=True)


def _copying(writer):
    assert writer.stdout.readline() == "copying\n"


def _kill(writer):
    writer.send_signal(signal.SIGKILL)
    writer.wait(timeout=30)
    writer.stdout.close()


def _held_bytes(folder):
    return sum(path.stat().st_size for path in folder.iterdir())


def test_a_download_killed_with_sigkill_leaves_nothing_behind_and_the_folder_stays_within_its_limit(folder):
    limit = 11 * 2**20  # two of the three objects
    cache = DiskCache(folder / "cache", limit_bytes=limit)
    with FaultyHTTPServer(folder / "remote") as server:
        a, b, c = (server.url(name) for name in ("a.bin", "b.bin", "c.bin"))
        writers = [_start_writer(folder / "cache", url, limit) for url in (a, c)]  # two jobs, started together
        try:
            for writer in writers:
                _copying(writer)
            cache.evict()
            assert len(list((folder / "cache").glob("*.tmp"))) == 2  # live writers' copies are kept
        finally:
            for writer in writers:
                _kill(writer)  # preempted mid-download
        orphans = list((folder / "cache").glob("*.tmp"))
        assert len(orphans) == 2 and all(path.stat().st_size >= 4 * 2**20 for path in orphans)
        assert _read(cache, b) == (folder / "remote" / "b.bin").read_bytes()
        assert not list((folder / "cache").glob("*.tmp"))  # the dead writers' copies are gone
        for url in (c, a):
            _read(cache, url)
            assert _held_bytes(folder / "cache") <= limit
        assert not list((folder / "cache").glob("*.tmp"))
        assert cache.entry(a).read_bytes() == (folder / "remote" / "a.bin").read_bytes()


def _flip_keeping_mtime(entry):
    """A byte changed in place with the modification time put back: what the cheap check cannot see."""
    stat = entry.stat()
    data = bytearray(entry.read_bytes())
    data[777] ^= 0xFF
    entry.write_bytes(bytes(data))
    os.utime(entry, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def test_verify_refetches_a_copy_damaged_behind_an_unchanged_mtime(folder):
    cache, verifying = DiskCache(folder / "cache"), DiskCache(folder / "cache", verify=True)
    original = (folder / "remote" / "a.bin").read_bytes()
    with FaultyHTTPServer(folder / "remote") as server:
        url = server.url("a.bin")
        _read(cache, url)
        _flip_keeping_mtime(cache.entry(url))
        assert _read(cache, url) != original  # size and mtime as recorded: the cheap check trusts it
        before = _gets(server)
        assert _read(verifying, url) == original
        assert _gets(server) == before + 1  # fetched again, once
        assert cache.entry(url).read_bytes() == original  # and the copy healed
        assert _read(verifying, url) == original and _gets(server) == before + 1


def test_scrub_removes_damaged_entries_and_dead_writers_files_and_names_them(folder):
    cache = DiskCache(folder / "cache")
    with FaultyHTTPServer(folder / "remote") as server:
        a, b, c = (server.url(name) for name in ("a.bin", "b.bin", "c.bin"))
        for url in (a, b, c):
            _read(cache, url)
        _flip_keeping_mtime(cache.entry(a))
        cache.entry(c).with_name(cache.entry(c).name + ".record.json").write_text("{not json")
        (folder / "cache" / "0123-d.bin.99.abc.tmp").write_bytes(b"partial")  # nobody holds its lock
        removed = dict(cache.scrub())
        assert removed == {
            cache.entry(a).name: "content differs from its record (CRC-32)",
            cache.entry(c).name: "unreadable record (JSONDecodeError)",
            "0123-d.bin.99.abc.tmp": "temporary file of a writer that died (a killed download)",
        }
        assert sorted(path.name for path in (folder / "cache").iterdir()) == sorted(
            [cache.entry(b).name, cache.entry(b).name + ".record.json"]
        )
        assert cache.scrub() == []
        before = _gets(server)
        assert _read(cache, a) == (folder / "remote" / "a.bin").read_bytes() and _gets(server) == before + 1


def test_an_empty_unlocked_temporary_file_is_left_alone_for_a_while_then_removed(folder):
    cache = DiskCache(folder / "cache")
    (folder / "cache").mkdir()
    fresh = folder / "cache" / "0123-e.bin.99.abc.tmp"  # a writer may have created it and not locked it yet
    fresh.touch()
    cache.evict()
    assert fresh.exists()
    os.utime(fresh, (1, 1))  # long past: its writer died before writing a byte
    cache.evict()
    assert not fresh.exists()
