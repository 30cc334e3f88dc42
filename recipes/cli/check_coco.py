"""``recipes check`` for a COCO instances file and the images it names.

    report = check_coco(Path("instances_val2017.json"), Path("val2017"))

Where :class:`recipes.detection.CocoDataset` raises the first problem of a file, this lists every
one, in the same words: both run the rules of :mod:`recipes.detection.coco_checks`. Then what
only a look at the images can tell: symlinks out of the root, missing files, boxes outside their
image, and each image decoded in worker processes (:mod:`recipes.cli.check_files`).
"""

from __future__ import annotations

import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from recipes.cli.check_files import check_manifest, inspect_images, summarize_images
from recipes.cli.report import Report, spread
from recipes.core.contracts.errors import DataError
from recipes.core.sources.paths import resolve_under
from recipes.core.sources.tar_samples import is_shards
from recipes.detection.coco_checks import ColumnChecks, Problem, entry_problems, wrong_fields
from recipes.detection.coco_files import columns_of, parse_json

BOX_TOLERANCE = 1.0  # pixels a box may stick out of its image (rounding in annotation tools)
STAND_IN_NAME = "(stand-in)"  # an image's file_name already reported wrong: passes the checks, never opened


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
        doc = parse_json(path.read_bytes(), path)
    except DataError as error:
        report.add_error(error, path)
        return report
    problems = list(entry_problems(doc))
    if any(not problem.section for problem in problems):  # the top level is wrong: nothing more to check
        _add(report, path, problems)
        return report
    report.summary["image root"] = str(image_root)
    columns, unsized, unnamed = _usable(doc, problems)
    checks = ColumnChecks(columns)
    column_problems = list(checks.problems())
    _add(report, path, problems + column_problems)
    # an image whose file_name the checks refused is never opened
    unnamed |= {problem.row for problem in column_problems if problem.section == "images" and problem.drops == "image"}
    sized = checks.good_sizes.copy()
    sized[sorted(unsized)] = False
    items, where = _image_files(report, path, image_root, columns, sized, unnamed)
    _boxes_outside(report, path, columns, checks, sized)
    _summarize(report, doc, columns, checks)
    summarize_images(report, inspect_images(items, workers=workers, progress=progress), where=where)
    return report


_ROOT_HINT = "pass --image-root DIR, the folder the file_name entries of {path} are relative to"


def _add(report: Report, path: Path, problems: list[Problem]) -> None:
    for problem in problems:
        report.add(path, problem.message, problem.where)


def _usable(doc: dict[str, Any], problems: list[Problem]) -> tuple[dict[str, Any], set[int], set[int]]:
    """The file's columns with what the entry checks reported set aside, so that the column checks
    name each problem once: an annotation with a wrong field is left out; an image or category
    with a usable id stays (its annotations refer to something), with a stand-in for each wrong
    field. Returns the columns and the images (positions there) whose size or name is a stand-in."""
    flagged = {(problem.section, problem.row) for problem in problems}
    unsized, unnamed = set(), set()
    images = []
    for row, entry in enumerate(doc["images"]):
        if ("images", row) in flagged:
            wrong = wrong_fields("images", entry)
            if "id" in wrong:
                continue
            entry = dict(entry)
            if "width" in wrong or "height" in wrong:
                entry["width"] = entry["height"] = 1.0
                unsized.add(len(images))
            if "file_name" in wrong:
                entry["file_name"] = STAND_IN_NAME
                unnamed.add(len(images))
        images.append(entry)
    categories = []
    for row, entry in enumerate(doc.get("categories", [])):
        if ("categories", row) in flagged:
            if "id" in wrong_fields("categories", entry):
                continue
            entry = {**entry, "name": str(entry["id"])}
        categories.append(entry)
    annotations = [entry for row, entry in enumerate(doc.get("annotations", [])) if ("annotations", row) not in flagged]
    columns = columns_of({"images": images, "annotations": annotations, "categories": categories}, masks=False)
    assert columns is not None, "stand-ins pass the entry checks"
    return columns, unsized, unnamed


def _image_files(
    report: Report, path: Path, root: Path, columns: dict[str, Any], sized: np.ndarray, unnamed: set[int]
) -> tuple[list[tuple[str, tuple[int, int] | None]], dict[str, str]]:
    """The image files to decode with their expected sizes, and where the file names each; a
    symlink out of the root or a missing file is a problem."""
    items, where, missing = [], {}, []
    for k, (image_id, name) in enumerate(zip(columns["image_ids"].tolist(), columns["file_names"])):
        if k in unnamed:
            continue
        image = f"image {image_id}"
        try:
            file = resolve_under(root, name, source=f"{path}, {image}")
        except DataError as error:  # a symlink out of the root (the checks refused the other names)
            report.add_error(error, path)
            continue
        if not file.is_file():
            missing.append((image, name, file))
            continue
        items.append((str(file), (int(columns["widths"][k]), int(columns["heights"][k])) if sized[k] else None))
        where[str(file)] = image
    if missing and not items:
        raise FileNotFoundError(
            f"none of the {len(missing)} image files named in {path} is under the image root {root}; "
            + _ROOT_HINT.format(path=path)
        )
    for image, name, file in missing:
        report.add(path, f"file_name {name!r}: {file} does not exist", image)
    return items, where


def _boxes_outside(
    report: Report, path: Path, columns: dict[str, Any], checks: ColumnChecks, sized: np.ndarray
) -> None:
    """Boxes (not degenerate, of an image with a usable size) that stick out of their image by
    more than BOX_TOLERANCE: the dataset keeps them, but the annotation tool or its export erred."""
    image = checks.image_order[checks.image_rows]  # each annotation's image, in file order
    width, height = columns["widths"][image], columns["heights"][image]
    x, y, w, h = columns["bbox"].T
    tolerance = BOX_TOLERANCE
    outside = (x < -tolerance) | (y < -tolerance) | (x + w > width + tolerance) | (y + h > height + tolerance)
    for k in np.flatnonzero(outside & checks.found & checks.good_boxes & sized[image]).tolist():
        reason = f"bbox {columns['bbox'][k].tolist()} (x, y, w, h) reaches outside its {width[k]:g}x{height[k]:g} image"
        report.add(path, reason, f"annotation {columns['ann_ids'][k]}")


def _summarize(report: Report, doc: dict[str, Any], columns: dict[str, Any], checks: ColumnChecks) -> None:
    per_image = np.bincount(checks.image_rows[checks.found], minlength=len(columns["image_ids"]))
    report.summary["images"] = f"{len(per_image)} ({int((per_image == 0).sum())} without annotations)"
    crowd = int(columns["iscrowd"].sum())
    report.summary["annotations"] = (
        f"{len(doc.get('annotations', []))} ({crowd} crowd), {spread(per_image.tolist())} per image"
    )
    names: dict[int, str] = {}
    for category_id, name in zip(columns["category_ids"].tolist(), columns["category_names"]):
        names.setdefault(category_id, name)  # a repeated id is a problem named above; its first name counts
    rows = checks.category_rows[checks.known]
    counts = np.bincount(rows, minlength=len(checks.category_ids))
    seen, first = np.unique(rows, return_index=True)
    by_count = {}  # most annotations first; ties in the order the annotations show them
    for row, _ in sorted(zip(seen.tolist(), first.tolist()), key=lambda pair: (-counts[pair[0]], pair[1])):
        category_id = int(checks.category_ids[row])
        by_count[f"{names[category_id]} ({category_id})"] = int(counts[row])
    report.summary["categories"] = by_count


def check_instances(options: Any, *, workers: int | None = None, progress: bool = True) -> Report:
    """``recipes check`` of the COCO file the CLI's ``options`` name, over the images of its image root
    (``--image-root``, else ``images/`` beside it, else its folder: as bench and show open it); or of
    the tar shards there (:func:`check_coco_shards`)."""
    from recipes.detection.demo import image_root, shard_folder

    if is_shards(options.path):
        names = shard_folder(options.path) / "categories.json"
        return check_coco_shards(options.path, names if names.is_file() else None, progress=progress)
    return check_coco(options.path, image_root(options), workers=workers, progress=progress)


def check_coco_shards(path: Path, categories: Path | None = None, *, progress: bool = True) -> Report:
    """Tar shards (a shard, or a folder of them) as :class:`recipes.detection.CocoShards` reads them:
    each sample's image decoded with ``strict_decode`` and its target built with
    ``strict_annotations`` (a degenerate box is a problem, not a warning), in this process; each
    sample the reader would skip is a problem named by shard and key. ``categories`` (the
    ``categories.json`` :func:`recipes.detection.write_shards` writes) names the ids labels may take."""
    from tqdm.auto import tqdm

    from recipes.core import ReadOptions, SkippedSampleWarning, StreamOrder
    from recipes.detection.shards import CocoShards

    report = Report("detection", str(path))
    strict = ReadOptions(strict_decode=True, strict_annotations=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", SkippedSampleWarning)
        shards = CocoShards(str(path), categories=categories, on_error="skip",
                            order=StreamOrder(seed=0, rank=0, world_size=1), read_options=strict)
        images, labels = 0, Counter()
        for _, target in tqdm(shards, disable=not progress, desc="decoding shards", unit="img"):
            images += 1
            labels.update(target["labels"].tolist())
    for warning in caught:
        if issubclass(warning.category, SkippedSampleWarning):
            where, _, reason = str(warning.message).removeprefix("skipped: ").partition(": ")
            report.add(where, reason)
    names = shards.categories or {}
    report.summary["shards"] = len(shards.shards)
    check_manifest(report, path)
    report.summary["decoded"] = f"{images} images, {sum(labels.values())} boxes"
    by_category = {names.get(label, f"id {label}"): labels[label] for label in sorted(labels)}
    report.summary["boxes by category"] = by_category or "none"
    return report
