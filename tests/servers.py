"""Real servers on 127.0.0.1 for the storage tests: HTTP with Range and injected faults, and S3 (moto).

    with FaultyHTTPServer(folder, fail_every=4, cut_every=5) as server:
        url = server.url("shard-000000.tar")          # http://127.0.0.1:PORT/shard-000000.tar
        ...
        server.faults                                 # {"503": n, "cut": m}

    with s3_server() as (endpoint, options):          # moto's ThreadedMotoServer, a bucket "data"
        upload(endpoint, options, folder)             # s3://data/<file name>

Both bind a free port and stop when the block ends; nothing else on the network is reached.
"""

from __future__ import annotations

import os
import re
import socket
import threading
from collections import Counter
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote

_RANGE = re.compile(r"bytes=(\d+)-(\d*)$")


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients hang up on a cut body, by design: no traceback on stderr


class FaultyHTTPServer:
    """Serves ``folder`` over HTTP/1.1 with HEAD, GET and single byte ranges (bodies sent with
    ``sendfile``; benchmarks/streams.py serves its data with it too, in a child process).

    Faults, counted in ``faults``: every ``fail_every``-th request answers 503; every
    ``cut_every``-th GET (counting GETs only) that is not failed sends its headers and half its
    body, then closes the connection. 0 turns a kind off.
    """

    def __init__(self, folder: Path, *, fail_every: int = 0, cut_every: int = 0) -> None:
        self.folder, self.fail_every, self.cut_every = Path(folder), fail_every, cut_every
        self.faults: Counter[str] = Counter()
        self.requests = self.gets = 0
        self._lock = threading.Lock()
        self._server = _QuietServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def url(self, name: str) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/{name}"

    def __enter__(self) -> FaultyHTTPServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()
        if os.environ.get("SHOW_FAULTS"):  # SHOW_FAULTS=1 pytest -s ...: what each server injected
            print(f"\n[FaultyHTTPServer] {self.requests} requests ({self.gets} GET): {dict(self.faults)}")

    def _fault(self, method: str) -> str | None:
        with self._lock:
            self.requests += 1
            self.gets += method == "GET"
            if self.fail_every and self.requests % self.fail_every == 0:
                self.faults["503"] += 1
                return "503"
            if method == "GET" and self.cut_every and self.gets % self.cut_every == 0:
                self.faults["cut"] += 1
                return "cut"
        return None

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_HEAD(self) -> None:
                self._answer(body=False)

            def do_GET(self) -> None:
                self._answer(body=True)

            def _answer(self, body: bool) -> None:
                fault = server._fault(self.command)
                if fault == "503":
                    self.send_response(503)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                path = (server.folder / unquote(self.path.lstrip("/").split("?")[0])).resolve()
                if not path.is_relative_to(server.folder.resolve()) or not path.is_file():
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                size = path.stat().st_size
                start, stop, status = 0, size, 200
                match = _RANGE.match(self.headers.get("Range", ""))
                if match:
                    start = int(match[1])
                    stop = min(size, int(match[2]) + 1) if match[2] else size
                    status = 206
                self.send_response(status)
                self.send_header("Content-Length", str(max(0, stop - start)))
                self.send_header("Accept-Ranges", "bytes")
                if status == 206:
                    self.send_header("Content-Range", f"bytes {start}-{stop - 1}/{size}")
                self.end_headers()
                if not body or stop <= start:
                    return
                with open(path, "rb") as file:
                    try:
                        if fault == "cut" and stop - start > 1:
                            self.close_connection = True
                            file.seek(start)
                            self.wfile.write(file.read((stop - start) // 2))
                            self.wfile.flush()
                            self.connection.shutdown(socket.SHUT_RDWR)
                        else:
                            self.connection.sendfile(file, start, stop - start)
                    except OSError:  # the client hung up first (curl at the end of a shard)
                        self.close_connection = True

        return Handler


@contextmanager
def s3_server(bucket: str = "data"):
    """moto's S3 server on a free port with an empty ``bucket``: yields ``(endpoint, storage_options)``."""
    import boto3
    from moto.server import ThreadedMotoServer

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    credentials = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing", "region_name": "us-east-1"}
    try:
        boto3.client("s3", endpoint_url=endpoint, **credentials).create_bucket(Bucket=bucket)
        options = {"key": "testing", "secret": "testing", "endpoint_url": endpoint,
                   "client_kwargs": {"region_name": "us-east-1"}}
        yield endpoint, options
    finally:
        server.stop()


def upload(endpoint: str, folder: Path, bucket: str = "data") -> None:
    """Put every file of ``folder`` into ``bucket`` under its name."""
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="testing", aws_secret_access_key="testing",
                          region_name="us-east-1")
    for path in sorted(Path(folder).iterdir()):
        if path.is_file():
            client.put_object(Bucket=bucket, Key=path.name, Body=path.read_bytes())
