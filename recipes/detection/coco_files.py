"""Read a COCO instances file into flat columns (numpy arrays, not a dict per entry), and its masks.

    columns = read_instances(Path("annotations/instances_val2017.json"), masks=True)
    columns["bbox"]           # float64 [A, 4], XYWH as in the file
    columns["ann_image_ids"]  # int64 [A]
    decode_masks(columns["segments"][:2], 480, 640, source="instances_val2017.json",
                 ann_ids=columns["ann_ids"][:2])   # uint8 [2, 480, 640] (if both are 640x480)

pycocotools' ``COCO()`` (and so torchvision's CocoDetection) keeps the whole file as Python
dicts, polygons included: slow to build, and copied into every DataLoader worker by reference
counting (pytorch issue 13246). Here msgspec decodes the file against a schema that names only
the fields a detection dataset uses, skipping the polygons unless ``masks=True`` asks for them
(then each is kept as its raw JSON bytes, for :func:`decode_masks`). Without msgspec, or for
files that are not strict JSON (Python's ``json.dumps`` writes ``NaN``), the standard library
parses the file instead, and so it does for a file the schema refuses: the rules of
:mod:`recipes.detection.coco_checks` then name its first problem (a :class:`DataError` naming the
file and the entry) in the words ``recipes check`` uses.

The images the file names are read from here too: :func:`image_path` keeps each inside the image
root, and :func:`size_mismatch` says what is wrong with one whose decoded size is not the file's.
"""

from __future__ import annotations

import gc
import json
import os
import warnings
from collections.abc import Sequence
from operator import attrgetter
from typing import Annotated, Any

import numpy as np
from PIL import Image

from recipes.core import DataError, imaging, storage
from recipes.detection.coco_checks import (
    MISSING,
    SECTIONS,
    entry_fields,
    entry_problems,
    key_problems,
    top_problems,
)

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
        name: str | None = None  # missing: the standard library's parse names the category, below

    # UNSET: the key is missing (see key_problems); an image_info file has no annotations
    class _File(msgspec.Struct):
        images: list[_Image] | msgspec.UnsetType = msgspec.UNSET
        annotations: list[_Annotation] | msgspec.UnsetType = msgspec.UNSET
        categories: list[_Category] | msgspec.UnsetType = msgspec.UNSET

    class _SegmentedFile(_File):
        annotations: list[_Segmented] | msgspec.UnsetType = msgspec.UNSET

    _DECODERS = {False: msgspec.json.Decoder(_File), True: msgspec.json.Decoder(_SegmentedFile)}


def read_instances(
    path: str | os.PathLike,
    *,
    masks: bool,
    extra_fields: Sequence[str] = (),
    raw: bool = False,
    storage_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Decode a COCO instances file into columns.

    Args:
        path: the instances JSON (``images``, ``annotations``, ``categories``), a local path or
            an fsspec URL.
        masks: also return each annotation's ``segmentation`` as raw JSON bytes.
        extra_fields: also return these fields of each annotation, as parsed (:data:`MISSING`
            where an annotation has none); ``recipes.detection.coco_checks`` checks them.
        raw: also return each annotation whole, as raw JSON bytes.
        storage_options: passed to fsspec for a URL (see :mod:`recipes.core.sources.storage`).

    Returns:
        ``image_ids`` int64 [I], ``widths`` / ``heights`` float64 [I], ``file_names`` list[str];
        ``ann_ids``, ``ann_image_ids``, ``ann_category_ids`` int64 [A], ``iscrowd`` bool [A],
        ``bbox`` float64 [A,4] (XYWH), ``area`` float64 [A] (NaN where missing);
        ``category_ids`` int64 [K], ``category_names`` list[str]; ``segments`` list[bytes] or None;
        ``extra``: field -> list [A]; ``raw``: list[bytes] [A] or None. Everything in file order.
    """
    # The parse allocates a container or two per annotation and nothing that can form a cycle;
    # with the collector on, its full passes over the interpreter's heap (torch's modules...)
    # took ~40% of the time on a COCO-sized file.
    data = storage.read_bytes(path, storage_options)
    collecting = gc.isenabled()
    gc.disable()
    try:
        columns = _read(storage.shown(path), data, masks)
        if extra_fields or raw:
            columns.update(_annotation_parts(data, tuple(extra_fields), raw))
        return columns
    finally:
        if collecting:
            gc.enable()


def _annotation_parts(data: bytes, fields: tuple[str, ...], raw: bool) -> dict[str, Any]:
    """``extra`` (each of ``fields`` of every annotation) and ``raw`` (every annotation's JSON, where
    asked for) of a file that :func:`_read` has read, so a valid one."""
    parsed = _msgspec_parts(data, fields, raw) if msgspec is not None else None
    if parsed is None:  # without msgspec, or a file that is not strict JSON (NaN): the standard library's parse
        annotations = json.loads(data).get("annotations", [])
        parsed = annotations, [json.dumps(a).encode() for a in annotations] if raw else None
    parts, rows = parsed
    return {"extra": {f: [part.get(f, MISSING) for part in parts] for f in fields}, "raw": rows}


def _msgspec_parts(data: bytes, fields: tuple[str, ...], raw: bool) -> tuple[list[dict], list[bytes] | None] | None:
    """msgspec's ``(fields of each annotation, each annotation's raw JSON or None)``; None where it
    cannot decode the file."""
    try:
        if raw:
            rows = [bytes(row) for row in _decode_annotations(data, msgspec.Raw)]
            return [msgspec.json.decode(row, type=dict[str, Any]) for row in rows] if fields else [], rows
        found = _decode_annotations(data, _fields_struct(fields))  # the rest of each annotation skipped unread
    except (msgspec.DecodeError, UnicodeDecodeError):
        return None
    pairs = (zip(fields, msgspec.structs.astuple(row)) for row in found)
    return [{name: value for name, value in row if value is not msgspec.UNSET} for row in pairs], None


def _decode_annotations(data: bytes, row_type: Any) -> list[Any]:
    file_type = msgspec.defstruct("_Annotations", [("annotations", list[row_type], [])])
    return msgspec.json.decode(data, type=file_type).annotations


def _fields_struct(fields: tuple[str, ...]) -> Any:
    """A struct of ``fields`` (any JSON value, UNSET where absent), in their order."""
    renamed = {f"f{k}": name for k, name in enumerate(fields)}  # JSON keys need not be identifiers
    return msgspec.defstruct("_Fields", [(key, Any, msgspec.UNSET) for key in renamed], rename=renamed)


def _read(path: str, data: bytes, masks: bool) -> dict[str, Any]:
    """Columns of ``data``; ``path`` names the file in errors."""
    if msgspec is not None:
        columns = _read_fast(path, data, masks)
        if columns is not None:
            return columns
    doc = parse_json(data, path)
    columns = columns_of(doc, masks=masks)
    if columns is None:
        problem = next(entry_problems(doc), None)
        raise problem.error(path) if problem else DataError(f"{path}: not a COCO instances file")
    return columns


def _read_fast(path: str, data: bytes, masks: bool) -> dict[str, Any] | None:
    """msgspec's columns of a valid file; None for the standard library to read the others: files
    that are not strict JSON (NaN, Infinity) and files the schema refuses, whose problem the checks
    name as ``recipes check`` does."""
    try:
        doc = _DECODERS[masks].decode(data)
    # msgspec 0.18 raises UnicodeDecodeError on bytes that are not UTF-8, newer releases DecodeError
    except (msgspec.ValidationError, msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        return None
    images, anns, cats = doc.images, doc.annotations, doc.categories
    if cats is not msgspec.UNSET and not all(isinstance(c.name, str) for c in cats):
        return None
    if msgspec.UNSET in (images, anns, cats):
        try:  # the top-level keys, to name a missing one (the schema skipped the others unread)
            top = msgspec.json.decode(data, type=dict[str, msgspec.Raw])
        except (msgspec.DecodeError, UnicodeDecodeError):  # bytes that are not UTF-8 in a skipped key (msgspec 0.18
            # raises the second)
            return None
        problem = next(key_problems(top), None)
        if problem is not None:
            raise problem.error(path)
    anns = [] if anns is msgspec.UNSET else anns
    segments = [bytes(a.segmentation) for a in anns] if masks else None
    return _struct_columns(images, anns, [] if cats is msgspec.UNSET else cats, segments)


def parse_json(data: bytes, path: str | os.PathLike) -> Any:
    """The standard library's parse of a file's bytes (it reads the ``NaN`` that Python's
    ``json.dumps`` writes), or a DataError naming ``path``."""
    try:
        return json.loads(data)
    except RecursionError:  # nesting deeper than the interpreter's stack (msgspec refuses it too)
        raise DataError(f"{path}: JSON nested too deeply to be a COCO file") from None
    except ValueError as error:  # UnicodeDecodeError included
        raise DataError(f"{path}: not valid JSON ({type(error).__name__}: {error})") from None


def columns_of(doc: Any, *, masks: bool) -> dict[str, Any] | None:
    """:func:`read_instances`' columns of a parsed file, or None when
    :func:`recipes.detection.coco_checks.entry_problems` finds a problem in it."""
    if top_problems(doc):
        return None
    fields = [entry_fields(section, doc.get(section, [])) for section in SECTIONS]
    if None in fields:
        return None
    images, anns, cats = fields
    return {
        "image_ids": np.array(images["id"], np.int64),
        "widths": np.array(images["width"], np.float64),
        "heights": np.array(images["height"], np.float64),
        "file_names": images["file_name"],
        "ann_ids": np.array(anns["id"], np.int64),
        "ann_image_ids": np.array(anns["image_id"], np.int64),
        "ann_category_ids": np.array(anns["category_id"], np.int64),
        "iscrowd": np.array(anns["iscrowd"], np.int64) != 0,
        "bbox": np.array(anns["bbox"], np.float64).reshape(-1, 4),
        "area": np.array(anns["area"], np.float64),  # missing -> None -> NaN
        "category_ids": np.array(cats["id"], np.int64),
        "category_names": cats["name"],
        "segments": [json.dumps(a.get("segmentation")).encode() for a in doc.get("annotations", [])] if masks else None,
    }


def _struct_columns(images: list, anns: list, cats: list, segments: list[bytes] | None) -> dict[str, Any]:
    """The columns of msgspec's structs (the schema saw to the fields and their types)."""
    def column(rows: list, dtype: type, field: str) -> np.ndarray:
        return np.array(list(map(attrgetter(field), rows)), dtype=dtype)

    ints = np.array(list(map(attrgetter("id", "image_id", "category_id", "iscrowd"), anns)), np.int64).reshape(-1, 4)
    return {
        "image_ids": column(images, np.int64, "id"),
        "widths": column(images, np.float64, "width"),
        "heights": column(images, np.float64, "height"),
        "file_names": list(map(attrgetter("file_name"), images)),
        "ann_ids": ints[:, 0],
        "ann_image_ids": ints[:, 1],
        "ann_category_ids": ints[:, 2],
        "iscrowd": ints[:, 3] != 0,
        "bbox": np.array(list(map(attrgetter("bbox"), anns)), np.float64).reshape(-1, 4),
        "area": column(anns, np.float64, "area"),  # missing -> None -> NaN
        "category_ids": column(cats, np.int64, "id"),
        "category_names": list(map(attrgetter("name"), cats)),
        "segments": segments,
    }


def image_path(root: str | os.PathLike, real_root: str, name: str, source: str) -> str:
    """The file of image ``name`` under ``root`` (``real_root``: its ``os.path.realpath`` and a
    separator, resolved once), refused by :func:`recipes.core.storage.resolve_under` naming ``source``
    where a link or a ``..`` leads out of it."""
    # A one-component name that is not a symlink stays inside the root (COCO's flat folders: one
    # lstat). Otherwise follow links with os.path.realpath, cheaper than pathlib's resolve().
    path = real_root + name
    if "/" not in name and os.sep not in name and not os.path.islink(path):
        return path
    path = os.path.realpath(path)
    if path.startswith(real_root):
        return path
    return storage.resolve_under(root, name, source=source)


def size_mismatch(path: str, ann_file: str, image_id: int, size: tuple[int, int], decoded: tuple[int, int]) -> str:
    """What is wrong where image ``image_id`` (``path``) decodes to ``decoded`` (W, H) but ``ann_file``
    gives ``size``, and whether the annotations were drawn on an EXIF-rotated photo's stored pixels.
    COCO sizes describe the pixels as loaded; the dataset applies EXIF orientation (as detectron2
    does, where torchvision's CocoDetection does not), so such a photo's boxes would be misplaced.
    A 180-degree turn keeps the size and cannot be caught this way."""
    (width, height), (got_width, got_height) = size, decoded
    message = (f"{path}: decoded image is {got_width}x{got_height} (WxH) but {ann_file} gives image {image_id} as "
               f"{width}x{height}; its boxes would be misplaced")
    try:
        with Image.open(path) as stored:
            stored_size = stored.size
        upright_size = imaging.image_size(path)
    except (OSError, DataError):
        return message
    if stored_size == (width, height) and upright_size != stored_size:
        message += (". The file is stored sideways with an EXIF orientation tag, and the annotations were drawn "
                    "on the stored pixels: rotate the image upright and its annotations with it, or strip the tag")
    return message


def decode_masks(segments: Sequence[bytes], height: int, width: int, *, source: str, ann_ids: Sequence[int]) -> np.ndarray:
    """Segmentations as :func:`read_instances` keeps them -> uint8 masks [N, H, W], 1 inside.

    Each is polygons or an RLE (``counts`` a list or a compressed string), turned into one RLE
    as pycocotools' ``COCO.annToRLE`` does, so the masks equal ``COCO.annToMask``'s. A segment
    that is neither is a :class:`DataError` naming ``source`` and the annotation id.
    """
    from pycocotools import mask as coco_mask

    if not segments:
        return np.zeros((0, height, width), dtype=np.uint8)
    rles = []
    for raw, ann_id in zip(segments, ann_ids):
        try:
            rle = _to_rle(coco_mask, json.loads(raw), height, width)
        except (TypeError, ValueError, KeyError, IndexError) as error:
            rle = f"cannot decode segmentation {raw[:60]!r} ({error})"
        if isinstance(rle, str):
            raise DataError(f"{source}, annotation {ann_id}: {rle}")
        rles.append(rle)
    with warnings.catch_warnings():
        # pycocotools (2.0.11) builds every decoded array through an __array__ without numpy 2's
        # copy argument, whichever public call decodes (one RLE or a list); nothing we pass avoids it.
        warnings.filterwarnings(
            "ignore", "__array__ implementation doesn't accept a copy keyword", DeprecationWarning, r"pycocotools\.mask"
        )
        masks = coco_mask.decode(rles)  # [H, W, N], Fortran order
    return np.ascontiguousarray(masks.transpose(2, 0, 1))


def _to_rle(coco_mask: Any, segmentation: Any, height: int, width: int) -> dict | str:
    """One RLE from polygons or an RLE, or the reason there is none.

    pycocotools checks nothing it is given: a NaN or far-off polygon point makes it allocate for
    every pixel step of the edge (gigabytes), and runs that do not cover the image exactly make
    ``decode`` read or write past its buffer. Both are refused here first.
    """
    if isinstance(segmentation, list) and segmentation:
        problem = _polygon_problem(segmentation, height, width)
        return problem or coco_mask.merge(coco_mask.frPyObjects(segmentation, height, width))
    if isinstance(segmentation, dict) and list(segmentation.get("size", ())) == [height, width]:
        counts = segmentation["counts"]
        runs = _compressed_runs(counts) if isinstance(counts, str) else counts
        if runs is None or not all(type(run) is int and run >= 0 for run in runs):
            return f"RLE counts are not a list of runs or a COCO run string: {str(counts)[:60]!r}"
        if sum(runs) != height * width:
            return f"RLE counts sum to {sum(runs)}, not {height}x{width} = {height * width}"
        return segmentation if isinstance(counts, str) else coco_mask.frPyObjects(segmentation, height, width)
    return f"segmentation must be polygons or an RLE of size [{height}, {width}], got {json.dumps(segmentation)[:60]!r}"


def _polygon_problem(polygons: list, height: int, width: int) -> str | None:
    """Why these polygons cannot be drawn on a ``width`` x ``height`` image, or None.

    Points may stray outside the image (annotators' polygons do, by a pixel or so), but not by
    more than the image's own size.
    """
    for polygon in polygons:
        if not isinstance(polygon, list) or not all(type(value) in (int, float) for value in polygon):
            return f"a polygon must be a list of numbers, got {json.dumps(polygon)[:60]!r}"
        for x, y in zip(polygon[0::2], polygon[1::2]):
            if not (-width <= x <= 2 * width and -height <= y <= 2 * height):  # False for NaN too
                return f"polygon point ({x}, {y}) lies far outside the {width}x{height} image"
    return None


def _compressed_runs(text: str) -> list[int] | None:
    """The run lengths of a COCO compressed RLE string (pycocotools' ``rleFrString``), or None.

    Each run is a little-endian base-32 number in characters ``'0'`` + 0..63 (0x20 = more to
    come, 0x10 in the last one = negative), added to the run two before it from the fourth run on.
    """
    runs: list[int] = []
    position = 0
    while position < len(text):
        value = shift = 0
        while True:
            if position == len(text):
                return None  # cut inside a number
            code = ord(text[position]) - 48
            if not 0 <= code < 64:
                return None
            value |= (code & 0x1F) << shift
            position, shift = position + 1, shift + 5
            if not code & 0x20:
                if code & 0x10:
                    value -= 1 << shift
                break
        runs.append(value + runs[-2] if len(runs) > 2 else value)
    return runs
