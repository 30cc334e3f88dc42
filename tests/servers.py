"""Real servers on 127.0.0.1 for the storage tests: HTTP with Range and injected faults, and S3 (moto).

    with FaultyHTTPServer(folder, fail_every=4, cut_every=5) as server:
        url = server.url("shard-000000.tar")          # http://127.0.0.1:PORT/shard-000000.tar
        ...
        server.faults                                 # {"503": n, "cut": m}
        server.count("HEAD"), server.log              # requests by method; every (method, path) in order
    mark(server.url(""), "epoch-1")                   # from any process: the log shows where a phase begins

    with s3_server() as (endpoint, options):          # moto's ThreadedMotoServer, a bucket "data"
        upload(endpoint, options, folder)             # s3://data/<file name>
    s3_log(caplog)                                    # with caplog.set_level(logging.INFO, logger="werkzeug")

Both bind a free port and stop when the block ends; nothing else on the network is reached.
"""

from __future__ import annotations

import html
import os
import re
import socket
import threading
import urllib.error
import urllib.request
from collections import Counter
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

_RANGE = re.compile(r"bytes=(\d+)-(\d*)$")
_REQUEST_LINE = re.compile(r"([A-Z]+) (/\S*) HTTP/[\d.]+")


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients hang up on a cut body, by design: no traceback on stderr


class FaultyHTTPServer:
    """Serves ``folder`` over HTTP/1.1 with HEAD, GET and single byte ranges (a 416 for one that
    starts at or past the end; bodies sent with ``sendfile``; benchmarks/streams.py serves its
    data with it too, in a child process).

    Faults, counted in ``faults``: the first ``fail_first`` requests and every ``fail_every``-th
    answer 503; every ``cut_every``-th GET (counting GETs only) that is not failed sends its
    headers and half its body, then closes the connection. 0 turns a kind off.

    With ``listing=True`` a GET of a folder answers an HTML index of its files, as
    ``python -m http.server`` does (what fsspec's HTTP glob reads); without it, a 404. Every
    request is logged as ``(method, path)`` in ``log``, in order; a folder's GET is ``("LIST", path)``.
    """

    def __init__(
        self, folder: Path, *, fail_every: int = 0, cut_every: int = 0, fail_first: int = 0, listing: bool = False
    ) -> None:
        self.folder, self.fail_every, self.cut_every, self.fail_first = Path(folder), fail_every, cut_every, fail_first
        self.listing = listing
        self.faults: Counter[str] = Counter()
        self.requests = self.gets = 0
        self.log: list[tuple[str, str]] = []
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

    def count(self, method: str, since: int = 0) -> int:
        """Requests of ``method`` (``"HEAD"``, ``"GET"``, ``"LIST"``) logged from ``log[since]`` on."""
        return sum(seen == method for seen, _ in self.log[since:])

    def _fault(self, method: str, path: str) -> str | None:
        with self._lock:
            self.log.append((method, path))
            self.requests += 1
            self.gets += method == "GET"
            if self.requests <= self.fail_first or self.fail_every and self.requests % self.fail_every == 0:
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
                name = unquote(self.path.split("?")[0])
                path = (server.folder / name.lstrip("/")).resolve()
                inside = path.is_relative_to(server.folder.resolve())
                folder = server.listing and inside and path.is_dir()
                fault = server._fault("LIST" if folder and body else self.command, name)
                if fault == "503":
                    self.send_response(503)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if folder:
                    self._index(path, name, body)
                    return
                if not inside or not path.is_file():
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
                    if start >= size:  # a range that starts at or past the end, as HTTP servers answer it
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{size}")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
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

            def _index(self, path: Path, name: str, body: bool) -> None:
                base = name if name.endswith("/") else name + "/"
                links = "".join(f'<a href="{base}{quote(child.name)}">{html.escape(child.name)}</a>\n'
                                for child in sorted(path.iterdir()) if child.is_file())
                page = f"<html><body>\n{links}</body></html>\n".encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(page)))
                self.end_headers()
                if body:
                    self.wfile.write(page)

        return Handler


class SilentServer:
    """Accepts connections on 127.0.0.1 and never answers a byte, until ``answer_after``
    connections have been held (then each later one is handed to ``then``, a
    :class:`FaultyHTTPServer`, byte for byte). ``accepted`` counts the connections.

        with SilentServer() as server:
            server.url("x.txt")                     # every read of it waits for its timeout
    """

    def __init__(self, *, answer_after: int | None = None, then: FaultyHTTPServer | None = None) -> None:
        self.answer_after, self.then, self.accepted = answer_after, then, 0
        self._socket = socket.create_server(("127.0.0.1", 0))
        self.port = self._socket.getsockname()[1]
        self._held: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}"

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._socket.accept()
            except OSError:  # closed: the block ended
                return
            self.accepted += 1
            if self.answer_after is not None and self.accepted > self.answer_after and self.then is not None:
                threading.Thread(target=self._relay, args=(connection,), daemon=True).start()
            else:
                self._held.append(connection)  # held open, never answered

    def _relay(self, connection: socket.socket) -> None:
        host, port = self.then._server.server_address[:2]
        with connection, socket.create_connection((host, port)) as upstream:
            pipes = [threading.Thread(target=_pipe, args=pair, daemon=True)
                     for pair in ((connection, upstream), (upstream, connection))]
            for pipe in pipes:
                pipe.start()
            for pipe in pipes:
                pipe.join()

    def __enter__(self) -> SilentServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._socket.close()
        for connection in self._held:
            connection.close()


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
        sink.shutdown(socket.SHUT_WR)
    except OSError:
        pass


MARKS = "/__mark__/"


def mark(root_url: str, name: str) -> None:
    """A request the server logs as ``("GET", "/__mark__/<name>")`` (and answers 404): where a phase
    of a run in other processes (ranks, workers) begins, in the log's order."""
    try:
        urllib.request.urlopen(root_url.rstrip("/") + MARKS + name).close()
    except urllib.error.HTTPError:
        pass


def mark_together(root_url: str, name: str) -> None:
    """:func:`mark`, once for all ranks of the process group: every rank has finished the
    phase before it (barrier), rank 0 marks, and no rank starts the next before the mark."""
    import torch.distributed as dist  # here: only the ranks' scripts need a process group

    dist.barrier()
    if dist.get_rank() == 0:
        mark(root_url, name)
    dist.barrier()


def phase(log: list[tuple[str, str]], name: str) -> list[tuple[str, str]]:
    """The requests logged after the mark ``name`` and before the next mark."""
    begin = log.index(("GET", MARKS + name)) + 1
    end = next((i for i in range(begin, len(log)) if log[i][1].startswith(MARKS)), len(log))
    return log[begin:end]


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


def s3_log(caplog: Any) -> list[tuple[str, str]]:
    """Every ``(method, path?query)`` moto's server answered in this process, in order, from its
    access log (werkzeug's, captured by pytest's ``caplog`` at INFO): a LIST is a GET of the bucket."""
    lines = (record.getMessage() for record in caplog.records if record.name == "werkzeug")
    return [(found[1], found[2]) for found in map(_REQUEST_LINE.search, lines) if found]


def upload(endpoint: str, folder: Path, bucket: str = "data") -> None:
    """Put every file of ``folder`` into ``bucket`` under its name."""
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="testing", aws_secret_access_key="testing",
                          region_name="us-east-1")
    for path in sorted(Path(folder).iterdir()):
        if path.is_file():
            client.put_object(Bucket=bucket, Key=path.name, Body=path.read_bytes())
