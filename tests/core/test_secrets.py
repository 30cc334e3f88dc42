"""Credentials never leave the library: every public path-taking call and CLI command, driven
into each failure it can hit with a URL carrying ``user:password@`` and ``?sig=TOKEN`` and
``storage_options`` carrying a fake key and secret, shows none of them in its message,
warnings, log records, repr, state or full exception chain.

CASES is the table; ``test_every_public_path_argument_has_a_case`` derives the public names
that take a path (an ``os.PathLike`` parameter) and the CLI's PATH commands, so a new one
without a row fails.
"""

from __future__ import annotations

import inspect
import json
import logging
import socket
import traceback
import warnings
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from torch.utils.data import DataLoader, IterableDataset

from recipes.__main__ import build_parser, main
from recipes.domains import DOMAINS
from recipes.core import ClassFolderDataset, ReadOptions, read_image, streams
from recipes.core.caches import (
    BlobFile,
    BlobWriter,
    DiskCache,
    cached_blobs,
    cached_index,
    file_crc32,
    load_index,
    save_index,
)
from recipes.core.imaging import ImagePlan, encode_image, image_size, read_file
from recipes.core.storage import (
    UnderRoot,
    basename,
    cache_folder,
    has_glob,
    join,
    open_stream,
    parent,
    read_bytes,
    resolve_under,
    shown,
    stream_sizes,
    suffix,
)
from recipes.core.tokenizing import TruncatingEncoder, load_tokenizer
from recipes.audio import AudioFolderDataset, AudioShards, SpeechDataset
from recipes.detection import CocoDataset, CocoShards
from recipes.multimodal import ImageTextDataset, ImageTextShards, expand_shards, write_shards
from recipes.vision import prepare as prepare_images
from recipes.multimodal import prepare as prepare_pairs
from recipes.audio import prepare as prepare_clips
from recipes.text import prepare as prepare_ids
from recipes.text import (
    InstructionDataset,
    StreamingTextDataset,
    TokenizeBatch,
    TokenizedTextDataset,
    TokenizeInstructions,
)
from recipes.video import VideoDataset, VideoFolderDataset, VideoOptions
from recipes.vision import ImageFolderDataset, ImageShards, eval_transform
from tests.servers import FaultyHTTPServer, s3_server, upload

PASSWORD, TOKEN, KEY, SECRET = "pa55w0rd", "TOKEN123", "FAKEKEYID42", "FAKESECRET42"
SECRETS = (PASSWORD, TOKEN, KEY, SECRET)
MODULES = ("core", *DOMAINS)  # recipes.<name>.__all__ is the public API


@dataclass
class Where:
    """Where a case's URLs point: ``url(name)`` carries the credentials, ``options`` the fake keys."""

    base: str  # http://127.0.0.1:PORT or s3://bucket
    options: dict[str, Any]
    local: Path  # a local folder for arguments that must be local (image roots, tokenizers, outputs)
    tokenizer: Any

    def url(self, name: str) -> str:
        scheme, rest = self.base.split("://", 1)
        userinfo = f"user:{PASSWORD}@" if scheme == "http" else ""  # s3fs reads no userinfo; its query is tested
        return f"{scheme}://{userinfo}{rest}/{name}?sig={TOKEN}"


def _first(dataset: Any) -> Any:
    """The first sample: where a stream opens its first file, and a map-style dataset its first image."""
    return next(iter(dataset)) if isinstance(dataset, IterableDataset) else dataset[0]


def _after_one(stream: Any) -> Any:
    """``stream`` once it has yielded a sample, so that its state holds a position."""
    _first(stream)
    return stream


def _tok(w: Where, name: str, **options: Any) -> Any:
    make = TokenizedTextDataset.from_ids if "ids_field" in options else TokenizedTextDataset
    return make(w.url(name), w.tokenizer, storage_options=w.options, **options)


def _stream(w: Where, name: str, **options: Any) -> Any:
    make = StreamingTextDataset.from_ids if "ids_field" in options else StreamingTextDataset
    return make(w.url(name), w.tokenizer, storage_options=w.options, **options)


def _pairs(w: Where, name: str, **options: Any) -> Any:
    return ImageTextDataset(w.url(name), w.tokenizer, storage_options=w.options, **options)


def _shards(w: Where, name: str) -> Any:
    return ImageTextShards(w.url(name), w.tokenizer, storage_options=w.options)


def _clips(w: Where, name: str) -> Any:
    return AudioShards(w.url(name), storage_options=w.options)


def _images(w: Where, name: str) -> Any:
    return ImageShards(w.url(name), storage_options=w.options)


def _boxes(w: Where, name: str) -> Any:
    return CocoShards(w.url(name), storage_options=w.options)


def _coco(w: Where, name: str, *, url_root: bool = False) -> Any:
    return CocoDataset(w.url("images") if url_root else w.local, w.url(name), storage_options=w.options)


def _write(w: Where, name: str) -> Any:
    return write_shards(w.url(name), w.local / "out", storage_options=w.options)


def _cli(*argv: str | Path) -> Any:
    return main([str(part) for part in argv])


# (id, public name, the server its URLs point at, the call). Servers: "http" serves the files
# FILES writes, "closed" is a port nobody listens on, "s3" is moto with a bucket "data".
# Each row's call fails with secrets in play, except: "-repr" and "-state" rows return what is
# inspected for its repr and state, "-skip" rows warn and go on.
CASES = [
    ("tokenized-unsupported", "TokenizedTextDataset", "http", lambda w: _tok(w, "t.xml")),
    ("tokenized-404", "TokenizedTextDataset", "http", lambda w: _tok(w, "gone.jsonl")),
    ("tokenized-closed", "TokenizedTextDataset", "closed", lambda w: _tok(w, "t.jsonl")),
    ("tokenized-missing-field", "TokenizedTextDataset", "http", lambda w: _tok(w, "rows.jsonl", text_field="body")),
    ("tokenized-missing-column", "TokenizedTextDataset", "http", lambda w: _tok(w, "nocol.parquet")),
    ("tokenized-parquet-404", "TokenizedTextDataset", "http", lambda w: _tok(w, "gone.parquet")),
    ("tokenized-repr", "TokenizedTextDataset", "http", lambda w: _tok(w, "rows.jsonl")),
    ("tokenized-ids-bad-id", "TokenizedTextDataset", "http", lambda w: _tok(w, "ids.parquet", ids_field="input_ids")),
    ("tokenized-ids-skip", "TokenizedTextDataset", "http",
     lambda w: _tok(w, "ids.parquet", ids_field="input_ids", on_error="skip")),
    ("tokenized-skip", "TokenizedTextDataset", "http", lambda w: _tok(w, "bad_line.jsonl", on_error="skip")),
    ("tokenized-nobucket", "TokenizedTextDataset", "s3-nobucket", lambda w: _tok(w, "rows.jsonl")),
    ("tokenized-s3-404", "TokenizedTextDataset", "s3", lambda w: _tok(w, "gone.jsonl")),
    ("tokenized-s3-403", "TokenizedTextDataset", "s3-403", lambda w: _tok(w, "rows.jsonl")),
    ("tokenizer-url", "TokenizedTextDataset", "http",
     lambda w: TokenizedTextDataset(w.local / "rows.jsonl", w.url("t.json"))),
    ("ray-tokenizer-url", "TokenizeBatch", "http", lambda w: TokenizeBatch(w.url("t.json"))),
    ("ray-chat-tokenizer-url", "TokenizeInstructions", "http", lambda w: TokenizeInstructions(w.url("t.json"))),
    ("chats-404", "InstructionDataset", "http", lambda w: InstructionDataset(w.url("gone.jsonl"), w.tokenizer,
                                                                          storage_options=w.options)),
    ("chats-repr", "InstructionDataset", "http",
     lambda w: InstructionDataset(w.url("rows.jsonl"), w.tokenizer, storage_options=w.options)),
    ("streaming-unsupported", "StreamingTextDataset", "http", lambda w: _stream(w, "t.xml")),
    ("streaming-404", "StreamingTextDataset", "http", lambda w: _stream(w, "gone.jsonl")),
    ("streaming-closed", "StreamingTextDataset", "closed", lambda w: _stream(w, "t.jsonl")),
    ("streaming-missing-column", "StreamingTextDataset", "http", lambda w: _stream(w, "nocol.parquet")),
    ("streaming-ids-bad-id", "StreamingTextDataset", "http", lambda w: list(_stream(w, "ids.parquet", ids_field="input_ids"))),
    ("streaming-state", "StreamingTextDataset", "http", lambda w: _after_one(_stream(w, "rows.jsonl"))),
    ("streaming-skip", "StreamingTextDataset", "http", lambda w: list(_stream(w, "bad_line.jsonl", on_error="skip"))),
    ("streaming-s3-404", "StreamingTextDataset", "s3", lambda w: _stream(w, "gone.jsonl")),
    ("streaming-index-dir-404", "ReadOptions", "http",
     lambda w: _stream(w, "gone.jsonl", read_options=ReadOptions(index_dir=w.local / "index"))),
    ("pairs-unsupported", "ImageTextDataset", "http", lambda w: _pairs(w, "c.xml")),
    ("pairs-404", "ImageTextDataset", "http", lambda w: _pairs(w, "gone.jsonl")),
    ("pairs-closed", "ImageTextDataset", "closed", lambda w: _pairs(w, "c.jsonl")),
    ("pairs-bad-json", "ImageTextDataset", "http", lambda w: _pairs(w, "bad.json")),
    ("pairs-missing-column", "ImageTextDataset", "http", lambda w: _pairs(w, "nocol.parquet")),
    ("pairs-missing-image", "ImageTextDataset", "http", lambda w: _first(_pairs(w, "pairs.jsonl"))),
    ("pairs-skip", "ImageTextDataset", "http", lambda w: _first(_pairs(w, "pairs.jsonl", on_error="skip"))),
    ("pairs-local-root", "ImageTextDataset", "http",
     lambda w: _first(_pairs(w, "pairs.jsonl", image_root=w.local / "nowhere"))),
    ("shards-nothing-matched", "ImageTextShards", "http", lambda w: _shards(w, "none/x-*.tar")),
    ("shards-404", "ImageTextShards", "http", lambda w: _first(_shards(w, "gone-000.tar"))),
    ("shards-404-in-a-worker", "ImageTextShards", "http",
     lambda w: next(iter(DataLoader(_shards(w, "gone-000.tar"), batch_size=None, num_workers=1)))),
    ("shards-closed", "ImageTextShards", "closed", lambda w: _first(_shards(w, "x-000.tar"))),
    ("shards-glob-closed", "ImageTextShards", "closed", lambda w: _shards(w, "x-*.tar")),
    ("shards-bad-tar", "ImageTextShards", "http", lambda w: _first(_shards(w, "bad-000.tar"))),
    ("shards-state", "ImageTextShards", "http", lambda w: _shards(w, "x-{000..001}.tar")),
    ("shards-s3-nothing-matched", "ImageTextShards", "s3", lambda w: _shards(w, "none-*.tar")),
    ("shards-s3-404", "ImageTextShards", "s3", lambda w: _first(_shards(w, "gone-000.tar"))),
    ("clip-shards-404", "AudioShards", "http", lambda w: _first(_clips(w, "gone-000.tar"))),
    ("clip-shards-closed", "AudioShards", "closed", lambda w: _first(_clips(w, "x-000.tar"))),
    ("clip-shards-bad-tar", "AudioShards", "http", lambda w: _first(_clips(w, "bad-000.tar"))),
    ("clip-shards-nothing-matched", "AudioShards", "http", lambda w: _clips(w, "none/x-*.tar")),
    ("clip-shards-state", "AudioShards", "http", lambda w: _clips(w, "x-{000..001}.tar")),
    ("image-shards-404", "ImageShards", "http", lambda w: _first(_images(w, "gone-000.tar"))),
    ("image-shards-closed", "ImageShards", "closed", lambda w: _first(_images(w, "x-000.tar"))),
    ("image-shards-bad-tar", "ImageShards", "http", lambda w: _first(_images(w, "bad-000.tar"))),
    ("image-shards-nothing-matched", "ImageShards", "http", lambda w: _images(w, "none/x-*.tar")),
    ("image-shards-state", "ImageShards", "http", lambda w: _images(w, "x-{000..001}.tar")),
    ("box-shards-404", "CocoShards", "http", lambda w: _first(_boxes(w, "gone-000.tar"))),
    ("box-shards-closed", "CocoShards", "closed", lambda w: _first(_boxes(w, "x-000.tar"))),
    ("box-shards-bad-tar", "CocoShards", "http", lambda w: _first(_boxes(w, "bad-000.tar"))),
    ("box-shards-state", "CocoShards", "http", lambda w: _boxes(w, "x-{000..001}.tar")),
    ("listed-nothing-matched", "listed_shards", "http",
     lambda w: streams.listed_shards(w.url("none/x-*.tar"), w.options, max_member_bytes=2**20)),
    ("is-shards-repr", "is_shards", "http", lambda w: streams.is_shards(w.url("x-000.tar"))),  # answers, raises nothing
    ("prepare-url", "prepare", "http", lambda w: prepare_images(w.url("photos"), w.local / "prepared")),
    ("prepare-pairs-url", "prepare", "http", lambda w: prepare_pairs(w.url("rows.jsonl"), w.local / "prepared")),
    ("prepare-clips-url", "prepare", "http", lambda w: prepare_clips(w.url("rows.jsonl"), w.local / "prepared")),
    ("prepare-ids-url", "prepare", "http", lambda w: prepare_ids(w.url("rows.jsonl"), w.local / "prepared", None)),
    ("write-prepared-url", "write_prepared", "http",
     lambda w: streams.write_prepared(w.url("out"), [], None, domain="vision", options={}, source="x")),
    ("manifest-problems-url", "manifest_problems", "http", lambda w: streams.manifest_problems(w.url("out"))),
    ("local-folder-url", "local_folder", "http", lambda w: streams.local_folder(w.url("out"), "prepare")),
    ("clip-manifest-url", "SpeechDataset", "http", lambda w: SpeechDataset(w.url("rows.jsonl"))),
    ("clip-folder-url", "AudioFolderDataset", "http", lambda w: AudioFolderDataset(w.url("train"))),
    ("footage-folder-url", "VideoFolderDataset", "http", lambda w: VideoFolderDataset(w.url("train"))),
    ("footage-manifest-url", "VideoDataset", "http", lambda w: VideoDataset(w.url("rows.jsonl"))),
    ("footage-index-url", "VideoOptions", "http", lambda w: VideoOptions(index_dir=w.url("index"))),
    ("expand-nothing-matched", "expand_shards", "http",
     lambda w: expand_shards(w.url("none/x-*.tar"), w.options)),
    ("writer-404", "write_shards", "http", lambda w: _write(w, "gone.parquet")),
    ("writer-missing-column", "write_shards", "http", lambda w: _write(w, "nocol.parquet")),
    ("writer-closed", "write_shards", "closed", lambda w: _write(w, "c.parquet")),
    ("coco-url-root", "CocoDataset", "http", lambda w: _coco(w, "bad.json", url_root=True)),
    ("coco-404", "CocoDataset", "http", lambda w: _coco(w, "gone.json")),
    ("coco-bad-json", "CocoDataset", "http", lambda w: _coco(w, "bad.json")),
    ("coco-missing-image", "CocoDataset", "http", lambda w: _first(_coco(w, "one.json"))),
    ("coco-closed", "CocoDataset", "closed", lambda w: _coco(w, "a.json")),
    ("coco-s3-nobucket", "CocoDataset", "s3-nobucket", lambda w: _coco(w, "a.json")),
    ("class-folder-url", "ClassFolderDataset", "http", lambda w: ClassFolderDataset(w.url("train"), ".jpg")),
    ("folder-url", "ImageFolderDataset", "http",
     lambda w: ImageFolderDataset(w.url("train"))),
    ("read-image-404", "read_image", "http", lambda w: read_image(w.url("gone.jpg"), storage_options=w.options)),
    ("read-image-closed", "read_image", "closed", lambda w: read_image(w.url("a.jpg"))),
    ("read-image-s3-403", "read_image", "s3-403", lambda w: read_image(w.url("a.jpg"), storage_options=w.options)),
    ("image-size-url", "image_size", "http", lambda w: image_size(w.url("a.jpg"))),
    ("read-bytes-404", "read_bytes", "http", lambda w: read_bytes(w.url("gone.jpg"), w.options)),
    ("encode-image-404", "encode_image", "http",
     lambda w: encode_image(w.url("gone.jpg"), None, ImagePlan(eval_transform(32)), eval_transform(32))),
    ("shown-repr", "shown", "http", lambda w: shown(w.url("a.jpg"))),
    ("basename-repr", "basename", "http", lambda w: basename(w.url("images/a.jpg"))),
    ("load-tokenizer-url", "load_tokenizer", "http", lambda w: load_tokenizer(w.url("tokenizer.json"))),
    ("truncating-encoder-url", "TruncatingEncoder", "http", lambda w: TruncatingEncoder(w.url("tokenizer.json"))),
    ("read-file-404", "read_file", "http", lambda w: read_file(w.url("gone.jpg"), w.options)),
    ("open-stream-404", "open_stream", "http", lambda w: open_stream(w.url("gone.bin"), storage_options=w.options)),
    ("stream-sizes-404", "stream_sizes", "http", lambda w: stream_sizes([w.url("gone.bin")], w.options)),
    ("parent-then-read-404", "parent", "http", lambda w: read_bytes(f"{parent(w.url('a/gone.jpg'))}/b.jpg", w.options)),
    ("join-then-read-404", "join", "http", lambda w: read_bytes(join(w.url("a"), "gone.jpg"), w.options)),
    ("suffix-repr", "suffix", "http", lambda w: suffix(w.url("a.JPG"))),
    ("has-glob-repr", "has_glob", "http", lambda w: has_glob(w.url("x-*.tar"))),
    ("file-crc32-url", "file_crc32", "http", lambda w: file_crc32(w.url("gone.bin"))),
    ("blob-file-repr", "BlobFile", "http", lambda w: BlobFile(w.url("gone.blob"), np.zeros(2, dtype=np.int64))),
    ("blob-writer-url", "BlobWriter", "http", lambda w: BlobWriter(w.url("blobs"))),
    ("cached-blobs-repr", "cached_blobs", "http", lambda w: cached_blobs(w.url("cache"), "key")),
    ("disk-cache-url", "DiskCache", "http", lambda w: DiskCache(w.url("cache"))),
    ("under-root-repr", "UnderRoot", "http", lambda w: UnderRoot(w.url("images"))),
    ("cache-folder-url", "cache_folder", "http", lambda w: cache_folder(w.url("cache"))),
    ("cached-index-url", "cached_index", "http", lambda w: cached_index(w.url("index"), "kind", ["a"], dict)),
    ("load-index-repr", "load_index", "http", lambda w: load_index(w.url("index"), "kind", ["a"])),
    ("save-index-url", "save_index", "http",
     lambda w: save_index(w.url("index"), "kind", ["a"], {"x": np.zeros(1)})),
    ("resolve-under-url", "resolve_under", "http", lambda w: resolve_under(w.url("images"), "../up.jpg")),
    ("cli-check-url", "cli check", "http", lambda w: _cli("check", "text", w.url("rows.jsonl"))),
    ("cli-check-tokenizer-url", "cli check", "http",
     lambda w: _cli("check", "text", w.local / "rows.jsonl", "--tokenizer", w.url("tokenizer.json"))),
    ("cli-check-root-url", "cli check", "http",
     lambda w: _cli("check", "detection", w.local / "a.json", "--image-root", w.url("images"))),
    ("cli-show-url", "cli show", "http", lambda w: _cli("show", "text", w.url("rows.jsonl"), "-o", w.local / "o.png")),
    ("cli-bench-url", "cli bench", "http", lambda w: _cli("bench", "text", w.url("rows.jsonl"), "--seconds", "1")),
]


def public_path_takers() -> set[str]:
    """Every public name with an ``os.PathLike`` parameter, and ``cli <command>`` for each command taking PATH."""
    names = set()
    for module in MODULES:
        package = import_module(f"recipes.{module}")
        members = [(name, getattr(package, name)) for name in package.__all__]
        # recipes.core's namespaces (storage, caches, ...): their names, as the facade's own
        members += [(inner, getattr(value, inner)) for _, value in members if inspect.ismodule(value) for inner in value.__all__]
        for name, value in members:
            try:
                parameters = inspect.signature(value).parameters.values()
            except (TypeError, ValueError):  # exception classes and constants
                continue
            if any("PathLike" in str(parameter.annotation) for parameter in parameters):
                names.add(name)
    commands = next(a for a in build_parser()._actions if a.dest == "command").choices  # noqa: SLF001 - argparse's
    names |= {f"cli {name}" for name, parser in commands.items()
              if any(action.dest == "path" for action in parser._actions)}  # noqa: SLF001
    return names


def test_every_public_path_argument_has_a_case():
    covered = {target for _, target, _, _ in CASES}
    assert public_path_takers() - covered == set(), "add a row to CASES for each new public path argument"
    assert covered - public_path_takers() == set()


def _files(folder: Path) -> None:
    """What the http server (and the bucket) hold: one file per kind of failure."""
    (folder / "rows.jsonl").write_text('{"text": "hello world"}\n{"text": "one more line"}\n')
    (folder / "pairs.jsonl").write_text('{"image": "missing.jpg", "caption": "a photo"}\n')
    (folder / "bad_line.jsonl").write_text('{"text": "kept"}\n{"text": \n')
    (folder / "bad.json").write_text('{"images": [{"id": 1, "file_name": ')
    (folder / "a.json").write_text(json.dumps({"images": [], "annotations": [], "categories": []}))
    pq.write_table(pa.table({"other": ["x", "y"]}), folder / "nocol.parquet")
    pq.write_table(pa.table({"input_ids": pa.array([[5, 6], [1, -2]], pa.list_(pa.int32()))}), folder / "ids.parquet")
    image = {"id": 1, "file_name": "missing.jpg", "width": 8, "height": 8}
    (folder / "one.json").write_text(json.dumps({"images": [image], "annotations": [], "categories": []}))
    (folder / "bad-000.tar").write_bytes(b"not a tar header " * 64)
    (folder / "x-000.tar").write_bytes(b"")
    (folder / "x-001.tar").write_bytes(b"")


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def servers(tmp_path_factory, tokenizer):
    folder = tmp_path_factory.mktemp("served")
    _files(folder)
    local = tmp_path_factory.mktemp("local")
    _files(local)
    http_options = {"headers": {"X-Key": KEY, "X-Secret": SECRET}}  # sent with every request
    with FaultyHTTPServer(folder) as http, s3_server() as (endpoint, options):
        upload(endpoint, folder)
        s3_options = dict(options, key=KEY, secret=SECRET)
        yield {
            "http": Where(http.url("").rstrip("/"), http_options, local, tokenizer),
            "closed": Where(f"http://127.0.0.1:{_closed_port()}", http_options, local, tokenizer),
            "s3": Where("s3://data", s3_options, local, tokenizer),
            "s3-nobucket": Where("s3://nobucket", s3_options, local, tokenizer),
            "s3-403": Where("s3://data", s3_options, local, tokenizer),
        }


def _around(text: str) -> str:
    """Each line that shows a secret, for the failure message."""
    return "\n".join(line[:400] for line in text.splitlines() if any(s in line for s in SECRETS))


def _chain(error: BaseException | None) -> list[BaseException]:
    """The error and the causes and contexts a traceback shows behind it."""
    seen: list[BaseException] = []
    while error is not None and error not in seen:
        seen.append(error)
        if error.__cause__ is not None:
            error = error.__cause__
        else:
            error = None if error.__suppress_context__ else error.__context__
    return seen


def _ours_or_loud(record: logging.LogRecord) -> bool:
    """A record the library logs, or any warning a default logging set-up prints (not the test servers')."""
    server = record.name.startswith(("werkzeug", "moto"))
    return record.name.startswith("recipes") or (record.levelno >= logging.WARNING and not server)


@pytest.mark.parametrize("kind, call", [pytest.param(kind, call, id=name) for name, _, kind, call in CASES])
def test_no_secret_in_any_message(kind, call, servers, quick_retries, caplog, capsys, request, monkeypatch):
    if kind == "s3-403":  # moto checks signatures from now on; the fake key is unknown: 403
        monkeypatch.setattr("moto.settings.INITIAL_NO_AUTH_ACTION_COUNT", 0)
    where = servers[kind]
    shown_texts: list[str] = []
    caplog.set_level(logging.DEBUG)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = call(where)
        except (Exception, SystemExit) as error:  # noqa: BLE001 - every failure is inspected
            shown_texts.append("".join(traceback.format_exception(error, chain=True)))
            shown_texts += [f"{type(e).__name__}: {e} {e!r} {e.args!r}" for e in _chain(error)]
            failed = True
            # torch re-raises a worker's error from a frame that holds it: without its traceback, the
            # loader's worker stops as the test ends, not 5 s into a later garbage collection
            error.__traceback__ = None
        else:
            failed = False
            shown_texts.append(repr(result))
            if hasattr(result, "state_dict"):
                shown_texts.append(repr(result.state_dict()))
    shown_texts += [str(w.message) for w in caught]
    shown_texts += [record.getMessage() for record in caplog.records if _ours_or_loud(record)]
    out, err = capsys.readouterr()
    shown_texts += [out, err]
    everything = "\n".join(shown_texts)
    assert [s for s in SECRETS if s in everything] == [], _around(everything)
    name = request.node.callspec.id
    assert failed != name.endswith(("-repr", "-state", "-skip")), everything
    assert caught or not name.endswith("-skip"), "the case was meant to warn"
