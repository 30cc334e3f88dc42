"""A dataset written once as tar shards, deterministic and resumable, with a manifest: what every
domain's ``prepare`` shares. The domain lists its samples and says how one is written:

    summary = write_prepared(dest, rows, encode_sample, domain="vision", options={"max_side": 320},
                             source="imagenet/train", samples_per_shard=1000, beside={"classes.txt": names})

``rows`` are ``(key, where, payload)``: a member key, what to call the sample in a message, and what
``encode(payload, where, options)`` (a module's function, so that worker processes get it) turns into
``([(extension, bytes), ...], psnr or None, bytes read)``; a DataError or OSError it raises names the sample.
A row whose key is None is one the source's listing could not read (:func:`recipes.core.streams.collect_skips`):
its payload is the DataError, counted among the skipped (and named) in no shard.
Shards are tar files (:class:`TarShards`, ``key.extension`` members) unless ``run.shards`` says
otherwise: :class:`ParquetShards` writes each sample as a row, its members ``(column, value)``, and
:class:`FileShards` each sample as a file of its own, named by its key (a video re-encoded).

Shard ``k`` holds rows ``k * samples_per_shard`` on, whichever process writes it, so the shards are
byte-identical for any ``workers``. A shard is written under a temporary name and renamed, then its
record goes in ``dest/.prepare/``. A run stopped at any point (``kill -9``, a full disk) and started
again with the same arguments writes only the shards without a record. A destination prepared with
other options is refused unless ``overwrite``. Last comes ``manifest.json``: per shard its samples,
bytes and sha256, the samples skipped and why, the source, the options and the library's version;
:func:`manifest_problems` reads every shard against it.
"""

from __future__ import annotations

import collections
import hashlib
import importlib.metadata
import json
import multiprocessing
import os
import shutil
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from recipes.core.contracts.errors import DataError, SkippedSampleWarning, check_on_error
from recipes.core.sources.prepared_remote import RemoteDest
from recipes.core.sources.shard_writers import FileShards, TarShards
from recipes.core.sources.storage import is_url, open_stream, read_bytes, shown
from recipes.core.sources.tar_samples import SHARD_SUFFIXES
from recipes.core.sources.urls import has_glob

RECORDS = ".prepare"  # dest's folder of the options and one record a shard written
DAMAGED = ("its bytes are not those manifest.json lists (size and sha256): the shard was damaged or changed; "
           "prepare it again")
Encode = Callable[[Any, str, dict[str, Any]], tuple[list[tuple[str, bytes]], float | None, int]]


@dataclass
class PrepareSummary:
    """What :func:`write_prepared` did: samples written and skipped (each with why), bytes read and
    written, the median PSNR of the re-encoded samples against their sources, and the time."""

    shards: list[Path]
    samples: int
    skipped: list[tuple[str, str]]
    bytes_in: int
    bytes_out: int
    reencoded: int
    psnr_median: float | None
    seconds: float
    reused: int = 0  # shards a stopped run had written already
    psnr: list[float] = field(default_factory=list, repr=False)
    unit: str = "shards"  # what a shard is called: "files" for FileShards

    def __str__(self) -> str:
        quality = "" if self.psnr_median is None else f", median PSNR {self.psnr_median:.1f} dB against the originals"
        changed = f", {self.reencoded:,} re-encoded{quality}" if self.reencoded else ""
        more = len(self.skipped) - 20
        return "\n".join([
            f"{self.samples:,} samples in {len(self.shards)} {self.unit} ({self.reused} already written){changed}",
            f"{_size(self.bytes_in)} read, {_size(self.bytes_out)} written "
            f"({self.bytes_out / max(self.bytes_in, 1):.0%}), in {self.seconds:.1f} s",
            f"{len(self.skipped)} skipped" + "".join(f"\n  {where}: {why}" for where, why in self.skipped[:20])
            + (f"\n  ... and {more} more (manifest.json lists every one)" if more > 0 else ""),
        ])


@dataclass(frozen=True)
class PrepareRun:
    """How :func:`write_prepared` runs: ``samples_per_shard`` rows a shard; ``workers`` processes
    (None: the CPU count; 1: this one); ``on_error`` ``"raise"`` (a sample that does not read stops
    the run, named) or ``"skip"`` (left out with a warning, named in the summary and the manifest);
    ``overwrite`` a destination prepared with other options; ``progress``: a progress bar;
    ``shards``: what a shard is (:class:`TarShards`, :class:`ParquetShards` or :class:`FileShards`);
    ``storage_options``: fsspec's, for a destination URL."""

    samples_per_shard: int = 1000
    workers: int | None = None
    on_error: str = "raise"
    overwrite: bool = False
    progress: bool = True
    shards: Any = TarShards()
    storage_options: dict[str, Any] | None = None


def write_prepared(
    dest: str | os.PathLike,
    rows: Sequence[tuple[str, str, Any]],
    encode: Encode,
    *,
    domain: str,
    options: dict[str, Any],
    source: Any,
    beside: dict[str, bytes] | None = None,
    run: PrepareRun = PrepareRun(),
) -> PrepareSummary:
    """Write ``rows`` as ``dest/shard-000000.tar``, ... (see the module docstring), ``encode`` turning
    each into its members; ``dest`` a local folder or a URL (:mod:`recipes.core.sources.prepared_remote`:
    each shard staged locally, then uploaded); ``options``: what ``encode`` reads (a destination
    records them); ``source``: what was read, for the manifest; ``beside``: files written next to
    the shards (``classes.txt``)."""
    remote = RemoteDest(os.fspath(dest), run.storage_options) if is_url(dest) else None
    staging = Path(tempfile.mkdtemp(prefix="recipes-prepare-")) if remote is not None else None
    try:
        return _write_prepared(dest, rows, encode, domain, options, source, beside, run, remote, staging)
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)


def _write_prepared(dest: Any, rows: Sequence[tuple[str, str, Any]], encode: Encode, domain: str,
                    options: dict[str, Any], source: Any, beside: dict[str, bytes] | None, run: PrepareRun,
                    remote: RemoteDest | None, staging: Path | None) -> PrepareSummary:
    """:func:`write_prepared` into ``dest`` (local), or through ``staging`` to ``remote``."""
    samples_per_shard, workers, on_error = run.samples_per_shard, run.workers, run.on_error
    start = time.perf_counter()
    check_on_error(on_error)
    if isinstance(samples_per_shard, bool) or not isinstance(samples_per_shard, int) or samples_per_shard < 1:
        raise ValueError(f"samples_per_shard must be an int >= 1, got {samples_per_shard!r}")
    if isinstance(run.shards, FileShards) and samples_per_shard != 1:
        raise ValueError(f"FileShards write a file a sample: samples_per_shard must be 1, got {samples_per_shard}")
    workers = (os.cpu_count() or 1) if workers is None else workers
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an int >= 1, got {workers!r}")
    options = {**options, "samples_per_shard": samples_per_shard}
    listed = [_named(error) for key, _, error in rows if key is None]  # what the source's listing dropped
    rows = [row for row in rows if row[0] is not None]
    out = Path(dest) if staging is None else staging
    if remote is not None:
        remote.pull_records(out / RECORDS, RECORDS)  # the claim and the records an earlier run left there
    claim = {"domain": domain, "source": os.path.abspath(source), "options": options}
    records, removed = _claimed(out, claim, run.overwrite, shown(dest))
    if remote is not None:
        if removed:  # overwritten: what the earlier run wrote there
            remote.remove([*removed, *(f"{RECORDS}/{name}.json" for name in removed), "manifest.json"])
        remote.put(records / "options.json", f"{RECORDS}/options.json")
    for name, data in (beside or {}).items():
        (out / name).write_bytes(data)
        if remote is not None:
            remote.put(out / name, name)
    chunks = [list(rows[first : first + samples_per_shard]) for first in range(0, len(rows), samples_per_shard)]
    names = [run.shards.name(number, [key for key, _, _ in chunk]) for number, chunk in enumerate(chunks)]
    twice = next((name for name, count in collections.Counter(names).items() if count > 1), None)
    if twice is not None:
        raise ValueError(f"two samples would be written to {out / twice}: give each its own key")
    tasks = [(str(out), number, name, chunk, encode, options, on_error, run.shards, remote)
             for number, (name, chunk) in enumerate(zip(names, chunks))]
    done = {number: _record(records, name) for number, name in enumerate(names)}
    there = None if remote is None else remote.sizes()
    done = {number: record for number, record in done.items() if record is not None and _whole(out, record, there)}
    todo = [task for task in tasks if task[1] not in done]
    bar = tqdm(total=len(rows), initial=sum(len(chunks[number]) for number in done), unit="sample",
               desc=f"prepare {domain}", disable=not run.progress, smoothing=0.1)
    with bar:
        for record in _run(todo, workers):
            done[record["number"]] = record
            bar.update(record["samples"] + len(record["skipped"]))
    written = [done[number] for number in range(len(tasks))]
    files = [record for record in written if record["sha256"] is not None]  # all but skipped FileShards samples
    skipped = [list(pair) for pair in listed] + [pair for record in written for pair in record["skipped"]]
    for where, why in skipped:
        warnings.warn(f"{where}: {why}; skipped", SkippedSampleWarning, stacklevel=3)
    _write_json(out / "manifest.json", lines="shards", value={
        "domain": domain, "version": _version(), "source": os.fspath(source), "options": options,
        "samples": sum(record["samples"] for record in written),
        "shards": [{name: record.get(name) for name in ("name", "samples", "bytes", "sha256")} | record.get("entry", {})
                   for record in files],
        "skipped": skipped,
    })
    if remote is not None:
        remote.put(out / "manifest.json", "manifest.json")  # last: a manifest means every shard is there
    psnr = [value for record in written for value in record["psnr"]]
    return PrepareSummary(
        shards=[out / record["name"] if remote is None else remote.where(record["name"]) for record in files],
        samples=sum(record["samples"] for record in written),
        skipped=[tuple(pair) for pair in skipped],
        bytes_in=sum(record["bytes_in"] for record in written), bytes_out=sum(record["bytes"] for record in written),
        reencoded=len(psnr), psnr_median=statistics.median(psnr) if psnr else None,
        seconds=time.perf_counter() - start, reused=len(tasks) - len(todo), psnr=psnr,
        unit="files" if isinstance(run.shards, FileShards) else "shards",
    )


def manifest_problems(dest: str | os.PathLike) -> tuple[int, list[tuple[str, str]]]:
    """``(shards listed, [(shard, problem)])``: each shard of ``dest/manifest.json`` read whole against
    its size and sha256 there (``recipes check`` of a prepared folder)."""
    out = local_folder(dest, "manifest_problems")
    listed = json.loads((out / "manifest.json").read_text(encoding="utf-8"))["shards"]
    problems = []
    for entry in tqdm(listed, desc="sha256 of the shards", unit="shard", disable=len(listed) < 10):
        path = out / entry["name"]
        if not path.is_file():
            problems.append((str(path), "listed in manifest.json, and missing"))
        elif path.stat().st_size != entry["bytes"] or _sha256(path) != entry["sha256"]:
            problems.append((str(path), DAMAGED))
    return len(listed), problems


def prepared_listing(paths: Any, storage_options: dict[str, Any] | None = None) -> list[dict[str, Any]] | None:
    """The shards of ``manifest.json`` in the folder ``paths`` names (local, or a URL), each with its
    name made a path or URL under it; None where ``paths`` is not one folder with such a manifest, or
    the manifest has no sample starts (an older one)."""
    if not isinstance(paths, (str, os.PathLike)):
        return None
    folder = os.fspath(paths)
    if folder.lower().endswith(SHARD_SUFFIXES) or has_glob(folder) or "{" in folder:
        return None
    if not is_url(folder) and not os.path.isdir(folder):
        return None
    where = folder.rstrip("/") + "/manifest.json" if is_url(folder) else os.path.join(folder, "manifest.json")
    try:
        listed = json.loads(read_bytes(where, storage_options))["shards"]
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError) as error:
        raise DataError(f"{shown(where)}: not a manifest recipes prepare wrote ({error})") from None
    if not listed or any(not isinstance(entry.get("starts"), list) for entry in listed):
        return None
    if is_url(folder):
        return [entry | {"path": folder.rstrip("/") + "/" + entry["name"]} for entry in listed]
    listed = [entry | {"path": os.path.join(folder, entry["name"])} for entry in listed]
    if any(not os.path.isfile(entry["path"]) or os.path.getsize(entry["path"]) != entry["bytes"] for entry in listed):
        return None  # changed since: listed and indexed from the shards themselves
    return listed


def verify_shards(listed: list[dict[str, Any]], storage_options: dict[str, Any] | None = None) -> None:
    """Read each shard of :func:`prepared_listing` whole against its manifest's size and sha256; a
    DataError names the first that disagrees."""
    for entry in tqdm(listed, desc="sha256 of the shards", unit="shard", disable=len(listed) < 10):
        if _digest(entry["path"], storage_options) != (entry["bytes"], entry["sha256"]):
            raise DataError(f"{shown(entry['path'])}: {DAMAGED}")


def local_folder(path: str | os.PathLike, owner: str) -> Path:
    """``path`` as a local Path; a URL is refused, named without its credentials (prepared shards are
    written to local disk, then copied to object storage if they are to be read from there)."""
    text = os.fspath(path)
    if "://" in text:
        raise ValueError(f"{owner} writes and reads a local folder, not {shown(text)}: prepare locally, then copy "
                         "the folder to where it is read from")
    return Path(text)


def _write_shard(task: tuple[str, int, str, list[tuple[str, str, Any]], Encode, dict[str, Any], str, Any, Any]
                 ) -> dict[str, Any]:
    """Write one shard (``task``: dest, its number and name, its rows, encode, the options, on_error,
    what a shard is, the remote destination or None) and its record; a remote one uploads both."""
    dest, number, name, rows, encode, options, on_error, shards, remote = task
    torch.set_num_threads(1)  # one process a shard: a thread each
    out = Path(dest)
    partial = out / f"{name}.{os.getpid()}.tmp"
    partial.parent.mkdir(parents=True, exist_ok=True)
    record: dict[str, Any] = {"number": number, "name": name, "samples": 0, "skipped": [], "bytes_in": 0, "psnr": []}
    shard = shards.open(partial)
    try:
        for key, where, payload in rows:
            try:
                members, psnr, read = encode(payload, where, options)
            except (DataError, OSError) as error:
                error = error if isinstance(error, DataError) else DataError(f"{where}: cannot read it ({error})")
                if on_error == "raise":
                    raise error
                record["skipped"].append([where, str(error).removeprefix(f"{where}: ")])
                continue
            shard.add(key, members)
            record["samples"] += 1
            record["bytes_in"] += read
            if psnr is not None:
                record["psnr"].append(psnr)
    finally:
        shard.close()
    if not partial.exists():  # a FileShards sample skipped: no file, and a record that says so
        record.update(sha256=None, bytes=0, entry={})
    else:
        record["bytes"], record["sha256"] = _digest(partial)
        record["entry"] = shards.entry(partial)
        os.replace(partial, out / name)
        if remote is not None:
            remote.put(out / name, name)
            (out / name).unlink()  # staged: the local disk holds a shard a worker at a time
    _write_json(out / RECORDS / f"{name}.json", record)  # after the shard: a record means a whole shard
    if remote is not None:
        remote.put(out / RECORDS / f"{name}.json", f"{RECORDS}/{name}.json")
    return record


def _run(tasks: list[Any], workers: int) -> Any:
    """The records of ``tasks`` as they finish, in ``workers`` processes (1: this one)."""
    if workers == 1 or len(tasks) <= 1:
        yield from map(_write_shard, tasks)
        return
    with multiprocessing.Pool(min(workers, len(tasks))) as pool:
        yield from pool.imap_unordered(_write_shard, tasks)


def _claimed(out: Path, claim: dict[str, Any], overwrite: bool, dest: str) -> tuple[Path, list[str]]:
    """``(out's records folder, made for claim, the files removed)``: ``claim`` is the domain, source
    and options; another source or other options are refused (naming ``dest``) unless ``overwrite``,
    which removes what they wrote. Temporary files of a stopped run are removed."""
    records = out / RECORDS
    given = records / "options.json"
    removed: list[str] = []
    if given.exists():
        earlier = json.loads(given.read_text(encoding="utf-8"))
        if earlier != claim and not overwrite:
            was = earlier.get("options", {})
            changed = [f"{name}={was.get(name)!r}" for name, now in claim["options"].items() if was.get(name) != now]
            if earlier.get("source") != claim["source"]:
                changed.insert(0, f"source {earlier.get('source')!r}")
            raise ValueError(f"{dest} was prepared with other options ({', '.join(changed) or earlier}); pass "
                             "overwrite=True (--overwrite) to replace it, or another destination")
        if earlier != claim:  # what the earlier run wrote: each record's file, then the record
            for record in [path for path in records.rglob("*.json") if path != given]:
                written = json.loads(record.read_text(encoding="utf-8")).get("name")
                if isinstance(written, str) and ".." not in Path(written).parts:
                    (out / written).unlink(missing_ok=True)
                    removed.append(written)
                record.unlink()
            (out / "manifest.json").unlink(missing_ok=True)
    for path in [*out.rglob("*.tmp")]:  # a stopped run's, never under a final name
        path.unlink()
    records.mkdir(parents=True, exist_ok=True)
    _write_json(given, claim)
    return records, removed


def _record(records: Path, name: str) -> dict[str, Any] | None:
    try:
        return json.loads((records / f"{name}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _whole(out: Path, record: dict[str, Any], there: dict[str, int] | None = None) -> bool:
    """Whether the record's shard is there (locally, or among the remote sizes ``there``) with its size (its sha256 is
    :func:`manifest_problems`' to read), or, for a file whose sample was skipped, is not there."""
    if there is not None:
        size = there.get(record["name"])
        return size is None if record.get("sha256") is None else size == record["bytes"]
    path = out / record["name"]
    if record.get("sha256") is None:
        return not path.exists()
    return path.is_file() and path.stat().st_size == record["bytes"]


def _version() -> str | None:
    try:  # the library that wrote it; a copy of a recipe without the package installed has none
        return importlib.metadata.version("dataloader-recipes")
    except importlib.metadata.PackageNotFoundError:
        return None


def _write_json(path: Path, value: Any, lines: str | None = None) -> None:
    """``value`` as JSON, written under a temporary name and renamed; the list ``value[lines]`` an
    item a line (a manifest's shards, each with its sample starts)."""
    text = json.dumps(value, indent=1)
    if lines is not None:
        head = json.dumps({key: item for key, item in value.items() if key != lines}, indent=1)
        items = ",\n".join(f"  {json.dumps(item)}" for item in value[lines])
        text = f"{head[:-2]},\n {json.dumps(lines)}: [\n{items}\n ]\n}}"
    partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    partial.parent.mkdir(parents=True, exist_ok=True)
    partial.write_text(text + "\n", encoding="utf-8")
    os.replace(partial, path)


def _sha256(path: Path) -> str:
    return _digest(path)[1]


def _digest(path: str | os.PathLike, storage_options: dict[str, Any] | None = None) -> tuple[int, str]:
    """``(size, sha256)`` of a local file or a remote object, read once as :func:`open_stream` reads."""
    digest, size = hashlib.sha256(), 0
    with open_stream(path, storage_options=storage_options) as file:
        for block in iter(lambda: file.read(2**20), b""):
            digest.update(block)
            size += len(block)
    return size, digest.hexdigest()


def _named(error: DataError) -> tuple[str, str]:
    """``(where, why)`` of a listing's error, whose message is ``"<where>: <why>"``."""
    where, _, why = str(getattr(error, "reason", error)).partition(": ")
    return (where, why) if why else ("the source", where)


def _size(count: int) -> str:
    return f"{count / 2**20:,.1f} MiB" if count >= 2**20 else f"{count / 2**10:,.1f} KiB"
