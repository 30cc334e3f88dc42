"""``recipes check`` for annotation and text files: COCO instances, text rows, caption manifests.

    report = check_coco(Path("instances_val2017.json"), Path("val2017"))
    report = check_rows(Path("train.jsonl"), tokenizer, text_field="text", max_length=512)
    report = check_captions(Path("captions.jsonl"), tokenizer, image_root=None, max_length=77)

Unlike the datasets, which stop at the first problem of a file (or skip bad rows one warning at a
time), these read everything and report every problem. Text rows and caption manifests go through
the recipes' own readers (:mod:`recipes.core.corpus_files`, :mod:`recipes.core.caption_files`) with
``on_error="skip"``, so a row passes here exactly when the dataset would accept it. A COCO file is
read with the standard library (it parses the ``NaN`` that ``json.dumps`` writes) and checked for
the same things :class:`recipes.detection.CocoDataset` refuses, plus boxes outside their image.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np

from recipes.cli.check_files import inspect_images, summarize_images
from recipes.cli.report import Report, collect_skipped, counts
from recipes.core.coco_files import check_keys
from recipes.core.errors import DataError
from recipes.core.paths import resolve_under

COMMON_LENGTHS = (64, 128, 256, 512, 1024, 2048, 4096, 8192)
BOX_TOLERANCE = 1.0  # pixels a box may stick out of its image (rounding in annotation tools)


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
        from recipes.core.tokens import encode_texts

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
    """A .txt / .jsonl / .csv file: every line UTF-8 with its fields, lengths and truncation."""
    from recipes.core.corpus_files import read_rows

    report = Report("text", str(path))
    with collect_skipped(report, path):
        try:
            rows = read_rows(path, text_field=text_field, label_field=label_field, on_error="skip")
        except DataError as error:  # a problem with the whole file (a CSV header without the column)
            report.add_error(error, path)
            return report
    report.summary["samples"] = len(rows.texts)
    if path.suffix.lower() == ".jsonl":
        report.summary["fields"] = _jsonl_fields(path)
    if rows.labels is not None:
        report.summary["labels"] = counts(rows.labels)
    if not rows.texts and not report.problems:
        report.add(path, "holds no sample")
    _lengths_section(report, rows.texts, tokenizer, max_length, default=COMMON_LENGTHS)
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
                   workers: int | None = None, progress: bool = True) -> Report:
    """A caption manifest: every row valid, every image inside the root and decodable, caption lengths."""
    from recipes.core.caption_files import read_caption_manifest

    report = Report("multimodal", str(path))
    with collect_skipped(report, path):
        try:
            manifest = read_caption_manifest(path, on_error="skip")
        except DataError as error:
            report.add_error(error, path)
            return report
    root = path.parent if image_root is None else image_root
    captions = [caption for row in manifest.captions for caption in row]
    report.summary["rows"] = len(manifest)
    report.summary["captions"] = f"{len(captions)} ({_spread([len(row) for row in manifest.captions])} per image)"
    items, where, missing = [], {}, []
    for row, name in enumerate(manifest.images):
        try:
            file = resolve_under(root, name, source=manifest.where(row))
        except DataError as error:
            report.add_error(error, path)
            continue
        if not file.is_file():
            missing.append((name, manifest.where(row).removeprefix(f"{path} ")))
            continue
        items.append((str(file), None))
        where[str(file)] = manifest.where(row).removeprefix(f"{path} ")
    if missing and not items:  # a wrong root: said once, not once per image (as check_coco does)
        raise FileNotFoundError(f"none of the {len(missing)} images named in {path} is under the image root {root}; "
                                "pass --image-root DIR, the folder the image names are relative to")
    for name, line in missing:
        report.add(path, f"image {name!r} does not exist under {root}", line)
    summarize_images(report, inspect_images(items, workers=workers, progress=progress), where=where)
    _lengths_section(report, captions, tokenizer, max_length, default=COMMON_LENGTHS)
    return report


def _spread(values: Sequence[int]) -> str:
    return f"{min(values)}-{max(values)}" if values and min(values) != max(values) else str(values[0] if values else 0)


# ---------------------------------------------------------------- COCO instances
def check_coco(path: Path, image_root: Path, *, workers: int | None = None, progress: bool = True) -> Report:
    """A COCO instances file and its images; see the module docstring.

    Raises:
        FileNotFoundError: ``image_root`` does not exist, or holds none of the file's images: a
            wrong root, said once instead of once per image.
    """
    if not image_root.is_dir():
        state = "is not a folder" if image_root.exists() else "does not exist"
        raise FileNotFoundError(f"image root {image_root} {state}; {_ROOT_HINT.format(path=path)}")
    report = Report("detection", str(path))
    try:
        data = json.loads(path.read_bytes())
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        report.add(path, f"not valid JSON ({error})")
        return report
    try:
        check_keys(path, data)
    except DataError as error:
        report.add_error(error, path)
        return report
    data.setdefault("annotations", [])  # an image_info file (test-dev) has none
    data.setdefault("categories", [])
    wrong = [key for key in ("images", "annotations", "categories") if not isinstance(data[key], list)]
    if wrong:
        report.add(path, f"{wrong} at the top level must be lists: not a COCO instances file")
        return report
    report.summary["image root"] = str(image_root)
    categories = _check_categories(report, path, data["categories"])
    sizes, items, where, missing = _check_image_entries(report, path, image_root, data["images"])
    if missing and not items:
        raise FileNotFoundError(
            f"none of the {len(missing)} image files named in {path} is under the image root {image_root}; "
            + _ROOT_HINT.format(path=path)
        )
    for image, name, file in missing:
        report.add(path, f"file_name {name!r}: {file} does not exist", image)
    per_category, per_image, crowd = _check_annotations(report, path, data["annotations"], categories, sizes)
    report.summary["images"] = f"{len(sizes)} ({sum(1 for i in sizes if not per_image.get(i))} without annotations)"
    boxes = [per_image.get(i, 0) for i in sizes]
    report.summary["annotations"] = f"{len(data['annotations'])} ({crowd} crowd), {_spread(boxes)} per image"
    report.summary["categories"] = {f"{categories[c]} ({c})": n for c, n in sorted(per_category.items(), key=lambda kv: -kv[1])}
    summarize_images(report, inspect_images(items, workers=workers, progress=progress), where=where)
    return report


_ROOT_HINT = "pass --image-root DIR, the folder the file_name entries of {path} are relative to"


def _identified(report: Report, path: Path, entries: list[Any], section: str, label: str) -> Iterator[tuple[dict, str]]:
    """The entries of ``section`` that are objects with an integer id, each id once, with
    ``"<label> <id>"`` for messages; the others are reported as problems."""
    seen: set[int] = set()
    for position, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), int):
            report.add(path, f"{section}[{position}] has no integer 'id': {str(entry)[:80]}")
            continue
        where = f"{label} {entry['id']}"
        if entry["id"] in seen:
            report.add(path, f"the id appears more than once in '{section}'", where)
            continue
        seen.add(entry["id"])
        yield entry, where


def _check_categories(report: Report, path: Path, entries: list[Any]) -> dict[int, str]:
    names = {}
    for entry, category in _identified(report, path, entries, "categories", "category"):
        name = entry.get("name")
        if not isinstance(name, str):
            report.add(path, "has no 'name'" if name is None else f"name {name!r} is not a string", category)
            name = str(entry["id"])
        names[entry["id"]] = name
    return names


def _check_image_entries(
    report: Report, path: Path, root: Path, entries: list[Any]
) -> tuple[dict[int, tuple[float, float]], list[tuple[str, tuple[int, int]]], dict[str, str], list[tuple[str, Any, Path]]]:
    """Sizes by image id, the files to decode with their expected sizes and where they are
    named, and the ``(image, file_name, path)`` of each file that does not exist."""
    sizes: dict[int, tuple[float, float]] = {}
    items, where, missing = [], {}, []
    for entry, image in _identified(report, path, entries, "images", "image"):
        width, height = entry.get("width"), entry.get("height")
        if not all(isinstance(v, (int, float)) and v >= 1 and v % 1 == 0 for v in (width, height)):
            report.add(path, f"width {width!r} and height {height!r} must be positive whole numbers", image)
            width = height = None
        sizes[entry["id"]] = (width, height) if width is not None else (math.inf, math.inf)
        name = entry.get("file_name")
        try:
            file = resolve_under(root, name, source=f"{path}, {image}")
        except DataError as error:
            report.add_error(error, path)
            continue
        if not file.is_file():
            missing.append((image, name, file))
            continue
        expected = (int(width), int(height)) if width is not None else None
        items.append((str(file), expected))
        where[str(file)] = image
    return sizes, items, where, missing


def _check_annotations(
    report: Report, path: Path, entries: list[Any], categories: dict[int, str], sizes: dict[int, tuple[float, float]]
) -> tuple[dict[int, int], dict[int, int], int]:
    per_category: dict[int, int] = {}
    per_image: dict[int, int] = {}
    crowd = 0
    for entry, annotation in _identified(report, path, entries, "annotations", "annotation"):
        image_id, category = entry.get("image_id"), entry.get("category_id")
        if image_id not in sizes:
            report.add(path, f"image_id {image_id!r} is not in 'images'", annotation)
        if category not in categories:
            report.add(path, f"category_id {category!r} is not in 'categories' {sorted(categories)}", annotation)
        else:
            per_category[category] = per_category.get(category, 0) + 1
        per_image[image_id] = per_image.get(image_id, 0) + 1
        crowd += bool(entry.get("iscrowd", 0))
        reason = _box_problem(entry.get("bbox"), sizes.get(image_id))
        if reason:
            report.add(path, reason, annotation)
    return per_category, per_image, crowd


def _box_problem(box: Any, size: tuple[float, float] | None) -> str | None:
    if not isinstance(box, list) or len(box) != 4 or not all(isinstance(v, (int, float)) for v in box):
        return f"bbox {box!r} is not 4 numbers [x, y, width, height]"
    x, y, w, h = box
    if not all(math.isfinite(v) for v in box):
        return f"bbox {box} holds NaN or infinity"
    if w <= 0 or h <= 0:
        return f"bbox {box} has a non-positive width or height (degenerate; CocoDataset drops it)"
    if size is not None and math.isfinite(size[0]):
        width, height = size
        if x < -BOX_TOLERANCE or y < -BOX_TOLERANCE or x + w > width + BOX_TOLERANCE or y + h > height + BOX_TOLERANCE:
            return f"bbox {box} (x, y, w, h) reaches outside its {width:g}x{height:g} image"
    return None
