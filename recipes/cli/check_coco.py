"""``recipes check`` for a COCO instances file and the images it names.

    report = check_coco(Path("instances_val2017.json"), Path("val2017"))

Unlike :class:`recipes.detection.CocoDataset`, which stops at the first problem of a file, this
reads everything and reports every problem. The file is read with the standard library (it parses
the ``NaN`` that ``json.dumps`` writes) and checked for the same things the dataset refuses, plus
boxes outside their image; the images are decoded in worker processes (:mod:`recipes.cli.check_files`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from recipes.cli.check_files import inspect_images, summarize_images
from recipes.cli.report import Report, spread
from recipes.core.errors import DataError
from recipes.core.paths import resolve_under
from recipes.detection.coco_files import check_keys

BOX_TOLERANCE = 1.0  # pixels a box may stick out of its image (rounding in annotation tools)


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
    report.summary["annotations"] = f"{len(data['annotations'])} ({crowd} crowd), {spread(boxes)} per image"
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
