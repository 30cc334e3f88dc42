"""Read a COCO instances file into flat columns, fast: numpy arrays instead of a dict per entry.

    columns = read_instances(Path("annotations/instances_val2017.json"), masks=False)
    columns["bbox"]           # float64 [A, 4], XYWH as in the file
    columns["ann_image_ids"]  # int64 [A]

pycocotools' ``COCO()`` (and so torchvision's CocoDetection) keeps the whole file as Python
dicts, polygons included: slow to build, and copied into every DataLoader worker by reference
counting (pytorch issue 13246). Here msgspec decodes the file against a schema that names only
the fields a detection dataset uses, so it skips the polygons unless ``masks=True`` asks for them
(then each is kept as its raw JSON bytes); ~10x faster than ``COCO()`` on a COCO-sized file (see
benchmarks/detection.py). Without msgspec, or for files that are not strict JSON (Python's
``json.dumps`` writes ``NaN``), the standard library parses the file instead.

Only the file's shape is checked here (fields present, types, 4-number boxes): a problem is a
:class:`DataError` naming the file (and, with msgspec, the JSON path of the entry). Whether the
ids, categories and boxes make sense is for the dataset to decide.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Callable
from operator import attrgetter, itemgetter
from pathlib import Path
from typing import Annotated, Any

import numpy as np

from recipes.core.errors import DataError

try:
    import msgspec
except ImportError:  # pragma: no cover - the tests monkeypatch this to None instead
    msgspec = None


if msgspec is not None:
    # the ids end up in int64 arrays: a larger one is a validation error naming its JSON path
    Int64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]

    class _Image(msgspec.Struct):
        id: Int64
        file_name: str
        width: float
        height: float

    class _Annotation(msgspec.Struct):
        id: Int64
        image_id: Int64
        category_id: Int64
        bbox: tuple[float, float, float, float]
        area: float | None = None
        iscrowd: Int64 | bool = 0

    class _Segmented(_Annotation):
        segmentation: msgspec.Raw = msgspec.Raw(b"null")  # kept as raw JSON, decoded per item

    class _Category(msgspec.Struct):
        id: Int64
        name: str = ""

    class _File(msgspec.Struct):
        images: list[_Image]
        annotations: list[_Annotation] = msgspec.field(default_factory=list)
        categories: list[_Category] = msgspec.field(default_factory=list)

    class _SegmentedFile(_File):
        annotations: list[_Segmented] = msgspec.field(default_factory=list)

    _DECODERS = {False: msgspec.json.Decoder(_File), True: msgspec.json.Decoder(_SegmentedFile)}


def read_instances(path: Path, *, masks: bool) -> dict[str, Any]:
    """Decode a COCO instances file into columns.

    Args:
        path: the instances JSON (``images``, ``annotations``, ``categories``).
        masks: also return each annotation's ``segmentation`` as raw JSON bytes.

    Returns:
        ``image_ids`` int64 [I], ``widths`` / ``heights`` float64 [I], ``file_names`` list[str];
        ``ann_ids``, ``ann_image_ids``, ``ann_category_ids`` int64 [A], ``iscrowd`` bool [A],
        ``bbox`` float64 [A,4] (XYWH), ``area`` float64 [A] (NaN where missing);
        ``category_ids`` int64 [K], ``category_names`` list[str]; ``segments`` list[bytes] or None.
        Everything in file order.
    """
    # The parse allocates a container or two per annotation and nothing that can form a cycle;
    # with the collector on, its full passes over the interpreter's heap (torch's modules...)
    # took ~40% of the time on a COCO-sized file.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _read(path, masks)
    finally:
        if collecting:
            gc.enable()


def _read(path: Path, masks: bool) -> dict[str, Any]:
    data = path.read_bytes()
    if msgspec is not None:
        try:
            doc = _DECODERS[masks].decode(data)
        except msgspec.ValidationError as error:
            raise DataError(f"{path}: {error}") from None
        except msgspec.DecodeError:
            doc = None  # not strict JSON (NaN, Infinity): the standard library accepts those
        except RecursionError:
            raise DataError(f"{path}: JSON nested too deeply to be a COCO file") from None
        if doc is not None:
            segments = [bytes(a.segmentation) for a in doc.annotations] if masks else None
            return _columns(doc.images, doc.annotations, doc.categories, attrgetter, segments, path)
    try:
        doc = json.loads(data)
        images, anns, cats = doc["images"], doc.get("annotations", []), doc.get("categories", [])
    # RecursionError: nesting deeper than the interpreter's stack (msgspec refuses it too)
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as error:
        raise DataError(f"{path}: not a COCO instances file ({type(error).__name__}: {error})") from None
    try:
        anns = [{"area": None, "iscrowd": 0, **a} for a in anns]
        cats = [{"name": "", **c} for c in cats]
        segments = [json.dumps(a.get("segmentation")).encode() for a in anns] if masks else None
        return _columns(images, anns, cats, itemgetter, segments, path)
    except (KeyError, TypeError, ValueError, OverflowError) as error:  # Overflow: an id past int64
        raise DataError(
            f"{path}: an image, annotation or category lacks a field or has the wrong type "
            f"({type(error).__name__}: {error})"
        ) from None


def _columns(images, anns, cats, getter: Callable, segments: list[bytes] | None, path: Path) -> dict[str, Any]:
    def column(rows: list, dtype: type, field: str) -> np.ndarray:
        values = np.array(list(map(getter(field), rows)), dtype=dtype)
        if values.shape != (len(rows),):
            raise DataError(f"{path}: every '{field}' must be a single number")
        return values

    ints = np.array(list(map(getter("id", "image_id", "category_id", "iscrowd"), anns)), np.int64).reshape(-1, 4)
    boxes = np.array(list(map(getter("bbox"), anns)), np.float64)
    boxes = boxes.reshape(0, 4) if not anns else boxes
    if boxes.shape != (len(anns), 4):
        raise DataError(f"{path}: every bbox must hold 4 numbers [x, y, width, height]")
    return {
        "image_ids": column(images, np.int64, "id"),
        "widths": column(images, np.float64, "width"),
        "heights": column(images, np.float64, "height"),
        "file_names": list(map(getter("file_name"), images)),
        "ann_ids": ints[:, 0],
        "ann_image_ids": ints[:, 1],
        "ann_category_ids": ints[:, 2],
        "iscrowd": ints[:, 3] != 0,
        "bbox": boxes,
        "area": column(anns, np.float64, "area"),  # missing -> None -> NaN
        "category_ids": column(cats, np.int64, "id"),
        "category_names": list(map(getter("name"), cats)),
        "segments": segments,
    }
