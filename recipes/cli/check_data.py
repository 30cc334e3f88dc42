"""``recipes check`` for text rows and caption manifests: every row, the captioned images, the lengths.

    report = check_rows(Path("train.jsonl"), tokenizer, text_field="text", max_length=512)
    report = check_captions(Path("captions.jsonl"), tokenizer, image_root=None, max_length=77)

Unlike the datasets, which stop at the first problem of a file (or skip bad rows one warning at a
time), these read everything and report every problem. Text rows and caption manifests go through
the recipes' own readers (:mod:`recipes.text.corpus_files`, :mod:`recipes.multimodal.caption_files`) with
``on_error="skip"``, so a row passes here exactly when the dataset would accept it. COCO instances
files are checked in :mod:`recipes.cli.check_coco` (``check_coco`` is importable from here too).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np

from recipes.cli.check_coco import BOX_TOLERANCE, check_coco  # noqa: F401  (re-exported: importable from here too)
from recipes.cli.check_files import check_manifest as check_files_manifest
from recipes.cli.check_files import inspect_images, summarize_images
from recipes.cli.report import Report, collect_skipped, counts, spread
from recipes.core.contracts.errors import DataError
from recipes.core.sources.paths import resolve_under
from recipes.core.sources.tar_samples import is_shards

COMMON_LENGTHS = (64, 128, 256, 512, 1024, 2048, 4096, 8192)


# ---------------------------------------------------------------- lengths
def length_stats(lengths: np.ndarray, unit: str) -> dict[str, Any]:
    """Count, percentiles and a power-of-two histogram of ``lengths``."""
    lengths = np.asarray(lengths, dtype=np.int64)
    if not len(lengths):
        return {"unit": unit, "count": 0, "min": 0, "p50": 0, "p90": 0, "p99": 0, "max": 0, "histogram": []}
    top = int(lengths.max())
    edges = [0, 1] + [2**k for k in range(1, max(1, top.bit_length()) + 1)]
    histogram = [[low, high, int(((lengths >= low) & (lengths < high)).sum())] for low, high in pairwise(edges)]
    p50, p90, p99 = (int(v) for v in np.percentile(lengths, [50, 90, 99], method="higher"))
    return {"unit": unit, "count": len(lengths), "min": int(lengths.min()), "p50": p50, "p90": p90, "p99": p99,
            "max": top, "histogram": [row for row in histogram if row[2] or row[0] >= int(lengths.min())]}


def truncation(lengths: np.ndarray, max_lengths: Sequence[int]) -> list[dict[str, Any]]:
    """For each max_length: samples it would cut and the share of all tokens lost."""
    lengths = np.asarray(lengths, dtype=np.int64)
    total = max(int(lengths.sum()), 1)
    rows = []
    for limit in max_lengths:
        cut = lengths > limit
        lost = int((lengths[cut] - limit).sum())
        rows.append({"max_length": limit, "samples cut": f"{int(cut.sum())} ({100 * cut.mean():.1f}%)" if len(lengths) else "0",
                     "tokens lost": f"{100 * lost / total:.1f}%"})
    return rows


def _lengths_section(report: Report, texts: list[str], tokenizer: Any, max_length: int | None, *, default: Sequence[int]) -> None:
    if tokenizer is not None:
        from recipes.core.tokens.encoding import encode_texts

        lengths, unit = encode_texts(tokenizer, texts).lengths, "tokens"  # no max_length: the full lengths
    else:
        lengths, unit = np.array([len(text.split()) for text in texts], dtype=np.int64), "words (no tokenizer given)"
    report.summary["lengths"] = length_stats(lengths, unit)
    if tokenizer is None:
        report.summary["truncation"] = "pass --tokenizer to see what max_length cuts"
        return
    if max_length is not None:
        limits = [max_length]
    else:
        top = int(lengths.max()) if len(lengths) else 0
        limits = [n for n in default if n < top] + [n for n in default if n >= top][:1]
    if limits:
        report.summary["truncation"] = truncation(lengths, limits)


# ---------------------------------------------------------------- text rows
def check_rows(path: Path, tokenizer: Any, *, text_field: str = "text", label_field: str | None = None,
               max_length: int | None = None) -> Report:
    """A .txt / .jsonl / .csv / .parquet file: every row UTF-8 with its fields, lengths and truncation."""
    from recipes.core.sources.parquet_files import columns_of, is_parquet, parquet_entries
    from recipes.text.corpus_files import TEXT_FORMATS, check_format, read_rows
    from recipes.text.parquet_corpus import parquet_rows

    report = Report("text", str(path))
    fields = {"text_field": text_field, "label_field": label_field}
    check_format(path, TEXT_FORMATS)  # the formats the datasets read, or a ValueError (exit status 2)
    with collect_skipped(report, path):
        try:  # a problem with the whole file raises: a CSV header or Parquet file without the column
            if is_parquet(path):
                entries = parquet_entries(path)
                report.summary["columns"] = columns_of(entries[0])
                rows = list(parquet_rows(entries, on_error="skip", **fields))
                texts, labels = [text for _, text, _, _ in rows], [label for _, _, label, _ in rows]
            else:
                read = read_rows(path, on_error="skip", **fields)
                texts, labels = read.texts, read.labels
        except DataError as error:
            report.add_error(error, path)
            return report
    report.summary["samples"] = len(texts)
    if path.suffix.lower() == ".jsonl":
        report.summary["fields"] = _jsonl_fields(path)
    if label_field is not None:
        report.summary["labels"] = counts(labels)
    if not texts and not report.problems:
        report.add(path, "holds no sample")
    _lengths_section(report, texts, tokenizer, max_length, default=COMMON_LENGTHS)
    return report


def check_prepared_ids(path: Path, *, max_length: int | None = None) -> Report:
    """The Parquet shards of token ids ``recipes prepare text`` wrote in ``path``, read as
    ``TokenizedTextDataset.from_ids`` reads them (every id checked against the tokenizer beside them),
    their lengths, and each shard against its sha256 in ``manifest.json``."""
    from recipes.text import TokenizedTextDataset

    report = Report("text", str(path))
    check_files_manifest(report, path)  # first: a shard that does not read is named by its sha256 too
    labels = json.loads((path / "manifest.json").read_text(encoding="utf-8")).get("options", {}).get("labels")
    with collect_skipped(report, path):
        try:
            dataset = TokenizedTextDataset.from_ids(str(path / "shard-*.parquet"), path / "tokenizer.json",
                                                    label_field=None if labels is None else "label", on_error="skip")
        except (DataError, FileNotFoundError) as error:
            report.add_error(error, path)
            return report
    report.summary["samples"] = len(dataset)
    if labels is not None:
        report.summary["labels"] = counts(dataset.labels.tolist())
    report.summary["lengths"] = length_stats(dataset.lengths, "tokens")
    if max_length is not None:
        report.summary["truncation"] = truncation(dataset.lengths, [max_length])
    return report


def _jsonl_fields(path: Path) -> dict[str, str]:
    """How many JSON rows hold each field (rows that do not parse are reported by read_rows)."""
    present: dict[str, int] = {}
    objects = 0
    for raw in path.read_bytes().split(b"\n"):
        try:
            row = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError):
            continue
        if isinstance(row, dict):
            objects += 1
            for key in row:
                present[key] = present.get(key, 0) + 1
    return {key: f"{count}/{objects}" for key, count in present.items()}


# ---------------------------------------------------------------- captions
def check_captions(path: Path, tokenizer: Any, *, image_root: Path | None = None, max_length: int | None = 77,
                   workers: int | None = None, progress: bool = True, image_field: str = "image",
                   caption_field: str = "caption") -> Report:
    """A caption manifest or Parquet file: every row valid, every image inside the root (or held
    in the file) and decodable, caption lengths. ``image_field``/``caption_field`` name Parquet columns."""
    report = Report("multimodal", str(path))
    with collect_skipped(report, path):
        try:
            rows = _caption_rows(path, image_field, caption_field, report)
        except DataError as error:
            report.add_error(error, path)
            return report
    root = path.parent if image_root is None else image_root
    captions = [caption for _, _, _, texts in rows for caption in texts]
    report.summary["rows"] = len(rows)
    report.summary["captions"] = f"{len(captions)} ({spread([len(texts) for *_, texts in rows])} per image)"
    items, where, held_in, missing = [], {}, {}, []
    for line, name, data, _ in rows:
        if data is not None:  # held in the file: named by its row
            key = f"{path} {line}"
            items.append((key, None, data))
            where[key], held_in[key] = line, str(path)
            continue
        try:
            file = resolve_under(root, name, source=f"{path} {line}")
        except DataError as error:
            report.add_error(error, path)
            continue
        if not file.is_file():
            missing.append((name, line))
            continue
        items.append((str(file), None))
        where[str(file)] = line
    if missing and not items:  # a wrong root: said once, not once per image (as check_coco does)
        raise FileNotFoundError(f"none of the {len(missing)} images named in {path} is under the image root {root}; "
                                "pass --image-root DIR, the folder the image names are relative to")
    for name, line in missing:
        report.add(path, f"image {name!r} does not exist under {root}", line)
    summarize_images(report, inspect_images(items, workers=workers, progress=progress), where=where, held_in=held_in)
    _lengths_section(report, captions, tokenizer, max_length, default=COMMON_LENGTHS)
    return report


def _caption_rows(path: Path, image_field: str, caption_field: str, report: Report) -> list[tuple[str, str, bytes | None, list[str]]]:
    """``(line or row, image name, image bytes or None, captions)`` for each usable row, read by the
    dataset's own reader with ``on_error="skip"``."""
    from recipes.core.sources.parquet_files import columns_of, is_parquet, parquet_entries
    from recipes.multimodal.caption_files import read_caption_manifest
    from recipes.multimodal.parquet_captions import caption_rows

    if is_parquet(path):
        entries = parquet_entries(path)  # listed once, for the columns and the rows
        report.summary["columns"] = columns_of(entries[0])
        rows = caption_rows(entries, image_field=image_field, caption_field=caption_field, on_error="skip")
        return [(row.where.removeprefix(f"{path} "), row.name, row.data, row.captions) for row in rows]
    manifest = read_caption_manifest(path, on_error="skip")
    return [(manifest.where(row).removeprefix(f"{path} "), name, None, texts)
            for row, (name, texts) in enumerate(zip(manifest.images, manifest.captions))]


def check_lines(options: Any, *, workers: int | None = None, progress: bool = True) -> Report:
    """``recipes check`` of the text rows the CLI's ``options`` name (:func:`check_rows`); lengths in
    tokens with ``--tokenizer`` (or a ``tokenizer.json`` beside the file), else in words. A folder
    that ``recipes prepare text`` wrote: :func:`check_prepared_ids`."""
    if options.path.is_dir() and (options.path / "manifest.json").is_file():
        return check_prepared_ids(options.path, max_length=options.max_length)
    return check_rows(options.path, _optional_tokenizer(options), text_field=options.text_field,
                      label_field=options.label_field, max_length=options.max_length)


def check_manifest(options: Any, *, workers: int | None = None, progress: bool = True) -> Report:
    """``recipes check`` of the caption manifest the CLI's ``options`` name (:func:`check_captions`),
    its captions cut at ``--max-length`` (CLIP's 77 by default); or of tar shards
    (:func:`check_caption_shards`)."""
    if is_shards(options.path):
        return check_caption_shards(options.path, options.tokenizer_path(), progress=progress)
    return check_captions(options.path, _optional_tokenizer(options), image_root=options.image_root,
                          max_length=77 if options.max_length is None else options.max_length,
                          workers=workers, progress=progress, image_field=options.image_field,
                          caption_field=options.caption_field)


def check_caption_shards(path: Path, tokenizer: Any, *, progress: bool = True) -> Report:
    """Tar shards (a shard, or a folder of them) as :class:`recipes.multimodal.ImageTextShards` reads
    them: each sample's image decoded with ``strict_decode`` and its captions read, in this process;
    each sample the reader would skip is a problem named by shard and key. A ``manifest.json``
    (``recipes prepare``) has each shard's bytes checked against its sha256."""
    from tqdm.auto import tqdm

    from recipes.core import ReadOptions, StreamOrder
    from recipes.multimodal.shards import ImageTextShards

    report = Report("multimodal", str(path))
    with collect_skipped(report, path):
        shards = ImageTextShards(str(path), tokenizer, on_error="skip", order=StreamOrder(seed=0, rank=0, world_size=1),
                                 read_options=ReadOptions(strict_decode=True))
        decoded = sum(1 for _ in tqdm(shards, disable=not progress, desc="decoding shards", unit="img"))
    report.summary["shards"] = len(shards.shards)
    check_files_manifest(report, path)
    report.summary["decoded"] = f"{decoded} samples"
    return report


def _optional_tokenizer(options: Any) -> Any:
    from recipes.core.tokens.encoding import load_tokenizer

    try:
        return load_tokenizer(options.tokenizer_path())
    except ValueError:
        return None  # lengths are then counted in words


def check_footage(options: Any, *, workers: int | None = None, progress: bool = True) -> Report:
    """``recipes check`` of the videos the CLI's ``options`` name: every file indexed and decoded at
    its first, middle and last frame, and a summary (``recipes.video.check.check_videos``)."""
    from recipes.video.check import check_videos  # here: TorchCodec's video decoder loads only for video

    report = check_videos(options.path, Report("video", str(options.path)))
    prepared = options.path.parent  # recipes prepare video writes DEST/videos/ and DEST/manifest.json
    if options.path.name == "videos" and (prepared / "manifest.json").is_file():
        check_files_manifest(report, prepared, unit="files")
    return report
