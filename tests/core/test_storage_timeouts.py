"""A silent server is an error in seconds to minutes, not a hang; retries are logged and counted;
a loader's workers do not outlive a killed training process.

A local socket server accepts connections and never answers (tests.servers.SilentServer): with
the default timeouts and retry deadline a read of it is a DataError within three minutes in all
(checked by arithmetic: a real run takes two), and with a short read timeout and deadline in
storage_options the test sees the same error in about a second.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import psutil
import pytest

from recipes.core.sources import storage

from recipes.core.sources import timeouts
from recipes.core.contracts.errors import DataError
from recipes.core.sources.storage import open_stream, retries_made
from tests.servers import FaultyHTTPServer, SilentServer

ROOT = Path(__file__).resolve().parents[2]
SHORT = {"client_kwargs": {"timeout": aiohttp.ClientTimeout(sock_read=0.5)}}


def test_the_default_timeouts_make_a_silent_server_an_error_within_three_minutes():
    backoffs = sum(storage.BACKOFF_S * 2**fault for fault in range(storage.RETRIES))
    # an attempt makes two requests at most (fsspec's HTTP: a HEAD for the size, then a GET)
    attempt = 2 * (timeouts.CONNECT_TIMEOUT_S + timeouts.READ_TIMEOUT_S)
    worst = timeouts.RETRY_DEADLINE_S + attempt + backoffs  # the deadline, and one attempt it did not foresee
    assert worst < 180, f"{worst:.0f} s"
    assert (storage.RETRIES + 1) * attempt > 180  # what the retries alone would allow: the deadline is needed
    assert timeouts.retry_deadline(None) == timeouts.RETRY_DEADLINE_S and timeouts.retry_deadline({"retry_deadline": 9}) == 9
    assert "retry_deadline" not in timeouts.with_timeouts("https://host/a.tar", {"retry_deadline": 9})  # not fsspec's
    with pytest.raises(ValueError, match=r"storage_options\['retry_deadline'\] must be a number of seconds above 0"):
        timeouts.retry_deadline({"retry_deadline": 0})
    options = timeouts.with_timeouts("https://host/a.tar", {"client_kwargs": {"trust_env": True}})
    chosen = options["client_kwargs"]["timeout"]
    assert options["client_kwargs"]["trust_env"] is True  # the caller's other options stay
    assert (chosen.sock_read, chosen.sock_connect, chosen.total) == (timeouts.READ_TIMEOUT_S,
                                                                     timeouts.CONNECT_TIMEOUT_S, None)
    assert timeouts.with_timeouts("https://host/a.tar", SHORT) == SHORT  # the caller's timeout wins
    assert timeouts.read_timeout("https://host/a.tar", SHORT) == 0.5
    s3 = timeouts.with_timeouts("s3://bucket/a.tar", {"config_kwargs": {"read_timeout": 5}})["config_kwargs"]
    assert s3 == {"read_timeout": 5, "connect_timeout": timeouts.CONNECT_TIMEOUT_S}


def test_a_server_that_never_answers_is_a_data_error_naming_the_url_the_timeout_and_the_attempts():
    with SilentServer() as server:
        url = server.url("shard-0.tar").replace("http://", "http://user:hunter2@") + "?sig=s3cr3t"
        started = time.monotonic()
        with pytest.raises(DataError) as refused:
            open_stream(url, storage_options=SHORT, retries=2, backoff=0.01).read()
        took = time.monotonic() - started
    message = str(refused.value)
    assert f"no byte from {server.url('shard-0.tar')} in 0.5 s, 3 attempts at byte 0" in message, message
    assert "hunter2" not in message and "s3cr3t" not in message and refused.value.__cause__ is None
    assert server.accepted == 3 and took < 10


@pytest.mark.parametrize("size", [None, 4096], ids=["size-unknown", "size-known"])
def test_a_silent_server_is_an_error_within_the_retry_deadline_whatever_the_retries_left(size):
    with SilentServer() as server:
        url = server.url("shard-0.tar")
        started = time.monotonic()
        with pytest.raises(DataError, match=r"no byte from .* in 0.5 s, \d attempts at byte 0, \d\.\d s in all") as refused:
            with open_stream(url, storage_options={**SHORT, "retry_deadline": 1.2}, retries=20, backoff=0.01,
                             size=size) as file:
                file.read()
        took = time.monotonic() - started
    assert "retry_deadline" in str(refused.value)  # the option to raise for a slow server
    # 0.5 s an attempt: a third would pass the 1.2 s deadline, so two are made, not the 21 the retries allow
    assert server.accepted == 2 and took < 1.2 + 0.5 + 0.5, (server.accepted, took)


def test_a_read_that_gets_no_byte_is_retried_and_each_retry_is_logged_and_counted(tmp_path, caplog):
    (tmp_path / "a.bin").write_bytes(bytes(range(256)) * 4)
    caplog.set_level(logging.WARNING, logger="recipes")
    with FaultyHTTPServer(tmp_path) as origin, SilentServer(answer_after=1, then=origin) as server:
        url = server.url("a.bin")
        before = retries_made([url])
        with open_stream(url, storage_options=SHORT, retries=3, backoff=0.01, size=1024) as file:
            assert file.read() == bytes(range(256)) * 4
    assert retries_made([url]) - before == 1 and server.accepted == 2
    [record] = [r for r in caplog.records if r.name.startswith("recipes")]
    assert record.getMessage().startswith(f"retrying {url} at byte 0 after 0.01 s (attempt 2 of 4): ")
    assert "Timeout on reading data from socket" in record.getMessage()


@pytest.mark.slow
def test_loader_workers_exit_within_seconds_of_the_training_process_being_killed_mid_read():
    with SilentServer() as server:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        training = subprocess.Popen([sys.executable, "-m", "tests.core.hanging_loader", server.url("x.bin")],
                                    stdout=subprocess.PIPE, env=env, text=True)
        try:
            workers = [psutil.Process(pid) for pid in json.loads(training.stdout.readline())]
            deadline = time.monotonic() + 30
            while server.accepted < 2 and time.monotonic() < deadline:  # both workers blocked in their read
                time.sleep(0.05)
            assert len(workers) == 2 and server.accepted >= 2
            time.sleep(0.5)
            training.send_signal(signal.SIGKILL)
            training.wait(timeout=10)
            killed = time.monotonic()
            while any(_alive(worker) for worker in workers) and time.monotonic() - killed < 20:
                time.sleep(0.1)
            gone_after = time.monotonic() - killed
        finally:
            training.kill()
            training.wait()
            training.stdout.close()
            for worker in workers:
                if _alive(worker):
                    worker.kill()
    assert gone_after < 5, f"the workers outlived the training process by {gone_after:.1f} s"


def _alive(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
