"""A training-ready copy of an image folder: each image re-encoded once at a bounded size, in the shards
:class:`ImageShards` reads, with a manifest. Every later epoch decodes fewer pixels.

    summary = prepare("imagenet/train", "prepared/", max_side=320, workers=16)
    print(summary)                                     # written, skipped and why, bytes, PSNR, time
    shards = ImageShards("prepared/", classes="prepared/classes.txt", transform=train_transform(224))

The source is read as :func:`write_shards` reads it: an image folder or a CSV / JSONL of
``path,label``. An image whose longer side is over ``max_side``, or that is not a JPEG, is
decoded as the loaders decode it (EXIF turns, CMYK, palette and 16-bit PNG, the bomb limit), its
longer side resized to ``max_side`` (antialiased, never enlarged), and written as a JPEG of
``quality``. A JPEG within the bound keeps its bytes. ``max_side=0`` keeps every file's bytes.

Shard ``k`` holds source rows ``k * samples_per_shard`` on, whichever worker writes it, so the
shards are byte-identical for any ``workers``. A shard is written under a temporary name and
renamed, then a record of it goes in ``DEST/.prepare/``. A run stopped at any point (``kill -9``,
a full disk) and started again with the same arguments writes only the shards without a record.
A destination prepared with other options is refused unless ``overwrite=True``. Last comes
``manifest.json``: per shard its samples, bytes and sha256, the samples skipped and why, the
source, the options and the library's version.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import io
import json
import math
import multiprocessing
import os
import statistics
import tarfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from PIL import Image
from torchvision.transforms.v2 import functional as F
from tqdm import tqdm

from recipes.core import DataError, SkippedSampleWarning, check_on_error, decode_image, imaging
from recipes.vision.shard_writer import EXTENSION_OF_FORMAT, add_member, source_rows

__all__ = ["PrepareSummary", "manifest_problems", "prepare", "psnr", "reencoded"]

RECORDS = ".prepare"  # DEST's folder of the options and one record a shard written


@dataclass
class PrepareSummary:
    """What :func:`prepare` did: samples written and skipped (each with why), bytes read and written,
    the median PSNR of the re-encoded images against the originals resized alike, and the time."""

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

    def __str__(self) -> str:
        quality = "" if self.psnr_median is None else f", median PSNR {self.psnr_median:.1f} dB against the originals"
        lines = [
            f"{self.samples:,} samples in {len(self.shards)} shards ({self.reused} already written), "
            f"{self.reencoded:,} re-encoded{quality}",
            f"{_size(self.bytes_in)} read, {_size(self.bytes_out)} written "
            f"({self.bytes_out / max(self.bytes_in, 1):.0%}), in {self.seconds:.1f} s",
            f"{len(self.skipped)} skipped" + "".join(f"\n  {where}: {why}" for where, why in self.skipped[:20])
            + (f"\n  ... and {len(self.skipped) - 20} more (manifest.json lists every one)" if len(self.skipped) > 20
               else ""),
        ]
        return "\n".join(lines)


def _size(count: int) -> str:
    return f"{count / 2**20:,.1f} MiB" if count >= 2**20 else f"{count / 2**10:,.1f} KiB"


def prepare(
    source: str | os.PathLike,
    dest: str | os.PathLike,
    *,
    max_side: int = 0,
    quality: int = 90,
    samples_per_shard: int = 1000,
    image_root: str | os.PathLike | None = None,
    workers: int | None = None,
    on_error: str = "raise",
    overwrite: bool = False,
    progress: bool = True,
) -> PrepareSummary:
    """Write ``source`` as shards of images at most ``max_side`` on their longer side (see the module docstring).

    Args:
        source: an image folder, or a ``.csv`` / ``.jsonl`` manifest of ``path,label``.
        dest: the folder to write (made if missing): ``shard-000000.tar``, ..., ``classes.txt``, ``manifest.json``.
        max_side: the longest side an image keeps; 0 keeps every file's bytes.
        quality: the JPEG quality of a re-encoded image (1-95).
        samples_per_shard: source rows a shard holds (fewer where some were skipped).
        image_root: a manifest's paths are relative to it (default: its folder).
        workers: processes writing shards (default: the CPU count); 1 writes in this process.
        on_error: ``"raise"``: an image that does not read stops the run, named; ``"skip"``: it is
            left out with a warning, and named in the summary and the manifest.
        overwrite: replace a destination prepared with other options.
        progress: show a progress bar (samples/s and time left).
    """
    start = time.perf_counter()
    check_on_error(on_error)
    if isinstance(max_side, bool) or not isinstance(max_side, int) or max_side < 0:
        raise ValueError(f"max_side must be an int >= 0 (0 keeps the files' bytes), got {max_side!r}")
    if isinstance(quality, bool) or not isinstance(quality, int) or not 1 <= quality <= 95:
        raise ValueError(f"quality must be an int in [1, 95] (PIL's JPEG range), got {quality!r}")
    if isinstance(samples_per_shard, bool) or not isinstance(samples_per_shard, int) or samples_per_shard < 1:
        raise ValueError(f"samples_per_shard must be an int >= 1, got {samples_per_shard!r}")
    options = {"max_side": max_side, "quality": quality, "samples_per_shard": samples_per_shard}
    classes, rows = source_rows(source, image_root, on_error, owner="prepare")
    rows = list(rows)
    out = Path(dest)
    records = _claimed(out, {"domain": "vision", "options": options}, overwrite)
    if classes is not None:
        (out / "classes.txt").write_text("".join(f"{name}\n" for name in classes), encoding="utf-8")
    chunks = [rows[first : first + samples_per_shard] for first in range(0, len(rows), samples_per_shard)]
    tasks = [(str(out), number, [(number * samples_per_shard + k, *row) for k, row in enumerate(chunk)], options,
              on_error) for number, chunk in enumerate(chunks)]
    done = {number: _record(records, number) for number in range(len(tasks))}
    done = {number: record for number, record in done.items() if record is not None and _whole(out, record)}
    todo = [task for task in tasks if task[1] not in done]
    bar = tqdm(total=len(rows), initial=sum(len(tasks[n][2]) for n in done), unit="img", desc="prepare vision",
               disable=not progress, smoothing=0.1)
    with bar:
        for record in _run(todo, workers):
            done[record["number"]] = record
            bar.update(record["samples"] + len(record["skipped"]))
    shard_records = [done[number] for number in range(len(tasks))]
    for record in shard_records:
        for where, why in record["skipped"]:
            warnings.warn(f"{where}: {why}; skipped", SkippedSampleWarning, stacklevel=2)
    _write_manifest(out, source, options, classes, shard_records)
    psnr = [value for record in shard_records for value in record["psnr"]]
    return PrepareSummary(
        shards=[out / record["name"] for record in shard_records],
        samples=sum(record["samples"] for record in shard_records),
        skipped=[tuple(pair) for record in shard_records for pair in record["skipped"]],
        bytes_in=sum(record["bytes_in"] for record in shard_records),
        bytes_out=sum(record["bytes"] for record in shard_records),
        reencoded=len(psnr), psnr_median=statistics.median(psnr) if psnr else None,
        seconds=time.perf_counter() - start, reused=len(tasks) - len(todo), psnr=psnr,
    )


def reencoded(data: bytes, where: str, max_side: int, quality: int) -> tuple[bytes, str, float | None]:
    """``(bytes, extension, PSNR)`` of an image as :func:`prepare` writes it: its own bytes (PSNR None)
    when ``max_side`` is 0 or it is a JPEG within it, else a JPEG of the decoded image, its longer side
    resized to ``max_side``, and its PSNR in dB against that resized image."""
    kind = imaging.open_image(data, source=where)
    if max_side == 0 or (kind.format == "JPEG" and max(kind.size) <= max_side):
        if kind.format not in EXTENSION_OF_FORMAT:
            raise DataError(f"{where}: a {kind.format} image, which a shard does not hold; prepare with max_side > 0")
        return data, EXTENSION_OF_FORMAT[kind.format], None
    image = decode_image(data, source=where)
    height, width = image.shape[-2:]
    if max(height, width) > max_side:
        scale = max_side / max(height, width)
        size = [max(1, round(height * scale)), max(1, round(width * scale))]
        image = F.resize(image, size, antialias=True)
    buffer = io.BytesIO()
    Image.fromarray(image.permute(1, 2, 0).contiguous().numpy()).save(buffer, "JPEG", quality=quality)
    encoded = buffer.getvalue()
    return encoded, "jpg", psnr(decode_image(encoded, source=where), image)


def psnr(a: torch.Tensor, b: torch.Tensor) -> float:
    """The peak signal-to-noise ratio of two uint8 images, in dB (inf when equal)."""
    mse = torch.mean((a.double() - b.double()) ** 2).item()
    return math.inf if mse == 0 else 10 * math.log10(255**2 / mse)


def manifest_problems(dest: str | os.PathLike) -> tuple[int, list[tuple[str, str]]]:
    """``(shards listed, [(shard, problem)])``: each shard of ``dest/manifest.json`` read whole against
    its size and sha256 there (``recipes check vision DEST``)."""
    out = Path(dest)
    listed = json.loads((out / "manifest.json").read_text(encoding="utf-8"))["shards"]
    problems = []
    for entry in tqdm(listed, desc="sha256 of the shards", unit="shard", disable=len(listed) < 10):
        path = out / entry["name"]
        if not path.is_file():
            problems.append((str(path), "listed in manifest.json, and missing"))
        elif path.stat().st_size != entry["bytes"] or _sha256(path) != entry["sha256"]:
            problems.append((str(path), "its bytes are not those manifest.json lists (size and sha256): the shard "
                             "was damaged or changed; prepare it again"))
    return len(listed), problems


def _write_shard(task: tuple[str, int, list[tuple[int, str, str, int]], dict[str, int], str]) -> dict[str, Any]:
    """Write one shard (``task``: dest, its number, its rows, the options, on_error) and its record."""
    dest, number, rows, options, on_error = task
    torch.set_num_threads(1)
    out = Path(dest)
    name = f"shard-{number:06d}.tar"
    partial = out / f"{name}.{os.getpid()}.tmp"
    record: dict[str, Any] = {"number": number, "name": name, "samples": 0, "skipped": [], "bytes_in": 0, "psnr": []}
    with tarfile.open(partial, "w", format=tarfile.PAX_FORMAT) as tar:
        for row, where, file, label in rows:
            try:
                data = Path(file).read_bytes()
                record["bytes_in"] += len(data)
                encoded, extension, quality = reencoded(data, where, options["max_side"], options["quality"])
            except (DataError, OSError) as error:
                error = error if isinstance(error, DataError) else DataError(f"{where}: cannot read it ({error})")
                if on_error == "raise":
                    raise error
                record["skipped"].append([where, str(error).removeprefix(f"{where}: ")])
                continue
            add_member(tar, f"{row:09d}.{extension}", encoded)
            add_member(tar, f"{row:09d}.cls", f"{label}\n".encode())
            record["samples"] += 1
            if quality is not None:
                record["psnr"].append(quality)
    record["sha256"], record["bytes"] = _sha256(partial), partial.stat().st_size
    os.replace(partial, out / name)
    _write_json(out / RECORDS / f"{name}.json", record)  # after the shard: a record means a whole shard
    return record


def _run(tasks: list[Any], workers: int | None) -> Any:
    """The records of ``tasks`` as they finish, in ``workers`` processes (1: this one)."""
    workers = (os.cpu_count() or 1) if workers is None else workers
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an int >= 1, got {workers!r}")
    if workers == 1 or len(tasks) <= 1:
        yield from map(_write_shard, tasks)
        return
    with multiprocessing.Pool(min(workers, len(tasks))) as pool:
        yield from pool.imap_unordered(_write_shard, tasks)


def _claimed(out: Path, claim: dict[str, Any], overwrite: bool) -> Path:
    """``out``'s records folder, made for ``claim`` (domain and options); other options are refused
    unless ``overwrite``, which removes what they wrote. Temporary files of a stopped run are removed."""
    records = out / RECORDS
    given = records / "options.json"
    if given.exists():
        earlier = json.loads(given.read_text(encoding="utf-8"))
        if earlier != claim and not overwrite:
            was = earlier.get("options", {})
            changed = [f"{name}={was.get(name)!r}" for name, now in claim["options"].items() if was.get(name) != now]
            raise ValueError(f"{out} was prepared with other options ({', '.join(changed) or earlier}); pass "
                             "overwrite=True (--overwrite) to replace it, or another destination")
        if earlier != claim:
            for path in [*out.glob("shard-*.tar"), *records.glob("*.json"), out / "manifest.json"]:
                path.unlink(missing_ok=True)
    for path in [*out.glob("*.tmp"), *records.glob("*.tmp")]:  # a stopped run's, never under a final name
        path.unlink()
    records.mkdir(parents=True, exist_ok=True)
    _write_json(given, claim)
    return records


def _record(records: Path, number: int) -> dict[str, Any] | None:
    path = records / f"shard-{number:06d}.tar.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _whole(out: Path, record: dict[str, Any]) -> bool:
    """Whether the record's shard is there with its size (its sha256 is ``recipes check``'s to read)."""
    path = out / record["name"]
    return path.is_file() and path.stat().st_size == record["bytes"]


def _write_manifest(out: Path, source: Any, options: dict[str, int], classes: list[str] | None,
                    records: list[dict[str, Any]]) -> None:
    try:  # the library that wrote it; a copy of this recipe without the package installed has none
        version = importlib.metadata.version("dataloader-recipes")
    except importlib.metadata.PackageNotFoundError:
        version = None
    manifest = {
        "domain": "vision", "version": version, "source": os.fspath(source), "options": options,
        "classes": classes, "samples": sum(record["samples"] for record in records),
        "shards": [{name: record[name] for name in ("name", "samples", "bytes", "sha256")} for record in records],
        "skipped": [pair for record in records for pair in record["skipped"]],
    }
    _write_json(out / "manifest.json", manifest)


def _write_json(path: Path, value: Any) -> None:
    partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    partial.write_text(json.dumps(value, indent=1) + "\n", encoding="utf-8")
    os.replace(partial, path)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(2**20), b""):
            digest.update(block)
    return digest.hexdigest()
