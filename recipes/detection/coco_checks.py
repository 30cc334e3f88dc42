"""The rules of a COCO instances file, in one place: CocoDataset refuses what they find, ``recipes check`` lists it.

    doc = parse_json(data, "instances.json")          # recipes.detection.coco_files
    problems = list(entry_problems(doc))              # top-level keys; each entry's fields and types
    checks = ColumnChecks(columns_of(doc, masks=False))
    problems += checks.problems()                     # ids, references, image sizes and names, boxes
    problems[0].error("instances.json")  # DataError("instances.json, annotation 7: category_id 99 is not in ...")

The dataset raises the first problem (with ``on_error="skip"`` it leaves out what the problem's
``drops`` names, with a warning); the CLI lists every one, in the same words. Two layers, so that
a valid file costs next to nothing extra: :func:`entry_problems` checks parsed JSON, which the
dataset has only when msgspec's schema refused a file or could not parse it (``NaN``), a field at
a time over whole lists, and walks the entries one by one only to name what is wrong;
:class:`ColumnChecks` runs each rule once over whole numpy arrays, whose results (image rows,
XYXY boxes) the index reuses.
"""

from __future__ import annotations

import difflib
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from recipes.core import DataError, storage

SECTIONS = ("images", "annotations", "categories")
LABELS = {"images": "image", "annotations": "annotation", "categories": "category"}
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
MISSING = type("Missing", (), {"__repr__": lambda self: "MISSING"})()  # an extra field an annotation lacks
DEGENERATE = "degenerate: CocoDataset drops it, or refuses it with strict=True"


class Problem(NamedTuple):
    """One thing wrong with a COCO file.

    ``where``: ``"image 7"``, ``"annotation 12"``, ``"category 3"``, ``"images[4]"`` (an entry
    without a usable id) or ``""`` (the file as a whole). ``section`` and ``row``: the entry's
    section and position there, in file order. ``drops``: what ``on_error="skip"`` leaves out:
    ``"image"`` (the entry's image: itself, or an annotation's), ``"annotation"``, ``"box"`` (a
    degenerate box: dropped with one DegenerateBoxWarning, refused with ``strict=True``), or
    ``""`` (nothing: the dataset always raises).
    """

    where: str
    message: str
    section: str = ""
    row: int = -1
    drops: str = ""

    def error(self, source: str | Path, hint: str | None = None) -> DataError:
        """``"<source>, <where>: <message>"`` as a DataError; ``hint`` ends it when raised."""
        text = f"{source}, {self.where}: {self.message}" if self.where else f"{source}: {self.message}"
        return DataError(text, skip_hint=hint)


def is_int64(value: Any) -> bool:
    """A JSON integer (not a boolean) that fits the int64 arrays ids are kept in."""
    return type(value) is int and INT64_MIN <= value <= INT64_MAX


def is_number(value: Any) -> bool:
    """A JSON number (not a boolean) that converts to float64; NaN and infinity included."""
    return type(value) is float or type(value) is int and -sys.float_info.max <= value <= sys.float_info.max


# -- the parsed file --------------------------------------------------------------------------------


def key_problems(doc: Any) -> Iterator[Problem]:
    """The top level: an object with ``images``. A missing key is a problem when the file has a
    near miss ("annotation" for "annotations"): loading it anyway would give a dataset without
    boxes. Without one, ``annotations`` and ``categories`` may be absent (a test-dev
    ``image_info`` file has no annotations)."""
    if not isinstance(doc, dict):
        yield Problem("", f"not a COCO instances file (the top level is {_json_type(doc)}, not an object)")
        return
    for key in SECTIONS:
        if key in doc:
            continue
        near = difflib.get_close_matches(key, [k for k in doc if isinstance(k, str)], n=1)
        if near:
            yield Problem("", f"no '{key}' key at the top level; did you mean {near[0]!r}? (COCO spells it '{key}')")
        elif key == "images":
            yield Problem("", "no 'images' key at the top level: not a COCO instances file")


def top_problems(doc: Any) -> list[Problem]:
    """:func:`key_problems`, and a section that is not an array."""
    top = list(key_problems(doc))
    return top or [
        Problem("", f"'{key}' at the top level is {_json_type(doc[key])}, not an array: not a COCO instances file")
        for key in SECTIONS if key in doc and not isinstance(doc[key], list)
    ]


def entry_problems(doc: Any) -> Iterator[Problem]:
    """Everything msgspec's schema in :mod:`recipes.detection.coco_files` refuses, named: the
    top level (a file whose top level is wrong yields that alone), then each image, annotation
    and category, its fields and their types."""
    top = top_problems(doc)
    yield from top
    if top:
        return
    for section in SECTIONS:
        entries = doc.get(section, [])
        if entry_fields(section, entries) is None:  # some entry is wrong: walk them to name each
            for row, entry in enumerate(entries):
                yield from _entry_problems(section, row, entry)


def entry_fields(section: str, entries: list) -> dict[str, list] | None:
    """Each field of a section's entries as one list, in file order (``area``: None where
    missing, ``iscrowd``: 0), when every entry passes the checks :func:`entry_problems` makes;
    None when one does not. A field at a time over whole lists: a fraction of the walk's time,
    so the standard library's read of a valid file pays little for being checked."""
    if set(map(type, entries)) - {dict}:
        return None
    names = _FIELDS[section]
    fields = {"id": [e.get("id") for e in entries]} | {name: [e.get(name) for e in entries] for name, _ in names}
    if section == "annotations":
        fields["iscrowd"] = [e.get("iscrowd", 0) for e in entries]
    passes = _all_int64(fields["id"]) and all(_PASSES[check](fields[name]) for name, check in names)
    return fields if passes else None


def _all_int64(values: list) -> bool:
    return not values or set(map(type, values)) == {int} and INT64_MIN <= min(values) and max(values) <= INT64_MAX


def _all_numbers(values: list) -> bool:
    kinds = set(map(type, values))
    return kinds <= {int, float} and (int not in kinds or all(is_number(v) for v in values if type(v) is int))


def _all_names(values: list) -> bool:
    return set(map(type, values)) <= {str} and all(n.isascii() or _encodes(n) for n in values)


def _encodes(name: str) -> bool:
    try:
        name.encode("utf-8")
        return True
    except UnicodeEncodeError:  # a lone surrogate ("\ud800"), which JSON can spell and no file name holds
        return False


def wrong_fields(section: str, entry: Any) -> list[str]:
    """The fields of one entry that :func:`entry_problems` names; ``["id"]`` for one that is not an object."""
    if not isinstance(entry, dict):
        return ["id"]
    wrong = [] if is_int64(entry.get("id")) else ["id"]
    return wrong + [field for field, check in _FIELDS[section] if check(field, entry)]


def _entry_problems(section: str, row: int, entry: Any) -> Iterator[Problem]:
    if not isinstance(entry, dict):
        yield Problem(f"{section}[{row}]", f"an entry must be an object, got {_shown(entry)}", section, row)
        return
    ident = entry.get("id")
    where = f"{LABELS[section]} {ident}" if is_int64(ident) else f"{section}[{row}]"
    if "id" not in entry:
        yield Problem(where, f"no 'id': {_shown(entry, 80)}", section, row)
    elif not is_int64(ident):
        yield Problem(where, _not_int64("id", ident), section, row)
    for field, check in _FIELDS[section]:
        message = check(field, entry)
        if message:
            yield Problem(where, message, section, row)


def _integer(field: str, entry: dict) -> str | None:
    if field not in entry:
        return f"no '{field}'"
    return None if is_int64(entry[field]) else _not_int64(field, entry[field])


def _not_int64(field: str, value: Any) -> str:
    if type(value) is int:
        return f"'{field}' {_shown(value)} does not fit in 64 bits"
    return f"'{field}' must be an integer, got {_shown(value)}"


def _number(field: str, entry: dict) -> str | None:
    if field not in entry:
        return f"no '{field}'"
    return None if is_number(entry[field]) else f"'{field}' must be a number, got {_shown(entry[field])}"


def _file_name(field: str, entry: dict) -> str | None:
    name = entry.get(field)
    if name is None:
        return f"no '{field}'"
    if not isinstance(name, str):
        return f"'{field}' must be a string, got {_shown(name)}"
    return None if name.isascii() or _encodes(name) else f"'{field}' {_shown(name)} is not valid Unicode"


def _box(field: str, entry: dict) -> str | None:
    if field not in entry:
        return f"no '{field}'"
    box = entry[field]
    if isinstance(box, list) and len(box) == 4 and all(map(is_number, box)):
        return None
    return f"bbox {_shown(box)} is not 4 numbers [x, y, width, height]"


def _optional_number(field: str, entry: dict) -> str | None:
    value = entry.get(field)
    return None if value is None or is_number(value) else f"'{field}' must be a number or null, got {_shown(value)}"


def _crowd(field: str, entry: dict) -> str | None:
    value = entry.get(field, 0)
    return None if type(value) is bool or is_int64(value) else f"'{field}' must be an integer, got {_shown(value)}"


def _name(field: str, entry: dict) -> str | None:
    name = entry.get(field)
    if name is None:
        return f"no '{field}'"
    return None if isinstance(name, str) else f"'{field}' must be a string, got {_shown(name)}"


# the fields after 'id' that each entry must have (or may, when optional), and their checks
_FIELDS = {
    "images": (("file_name", _file_name), ("width", _number), ("height", _number)),
    "annotations": (("image_id", _integer), ("category_id", _integer), ("bbox", _box), ("area", _optional_number),
                    ("iscrowd", _crowd)),
    "categories": (("name", _name),),
}
# the same checks over one field's values, all entries at once (entry_fields)
_PASSES = {
    _integer: _all_int64,
    _number: _all_numbers,
    _file_name: _all_names,
    _name: lambda values: set(map(type, values)) <= {str},
    _box: lambda boxes: (set(map(type, boxes)) <= {list} and set(map(len, boxes)) <= {4}
                         and _all_numbers([v for box in boxes for v in box])),
    _optional_number: lambda values: _all_numbers([v for v in values if v is not None]),
    _crowd: lambda values: (set(map(type, values)) <= {int, bool}
                            and (not values or INT64_MIN <= min(values) and max(values) <= INT64_MAX)),
}


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    kinds = {dict: "an object", list: "an array", str: "a string", int: "a number", float: "a number"}
    return kinds.get(type(value), type(value).__name__)


def _shown(value: Any, most: int = 60) -> str:
    try:
        text = repr(value)
    except RecursionError:  # nesting the JSON parser took, one frame from the limit
        return "(nested too deeply to show)"
    return text if len(text) <= most else text[: most - 3] + "..."


# -- the columns ------------------------------------------------------------------------------------


class ColumnChecks:
    """The rules about ids, references, image sizes and names, and boxes, over whole columns.

    Built from :func:`recipes.detection.coco_files.read_instances` columns. What the rules compute
    the index uses too: ``image_order`` (image positions in id order); per annotation, ``found``
    and ``image_rows`` (its image's place in that order, meaningless where not found), ``known``
    and ``category_rows`` (the same in ``category_ids``, sorted), ``boxes`` (XYXY float32,
    computed as torchvision's wrapper does: the same boxes to the bit) and ``good_boxes``
    (finite, with a positive width and height); per image, ``good_sizes``.
    """

    def __init__(self, columns: dict[str, Any]) -> None:
        self.columns = columns
        image_ids = columns["image_ids"]
        self.image_order = np.argsort(image_ids, kind="stable")
        self.image_rows, self.found = _lookup(image_ids[self.image_order], columns["ann_image_ids"])
        self.category_ids = np.sort(columns["category_ids"])
        self.category_rows, self.known = _lookup(self.category_ids, columns["ann_category_ids"])
        boxes = columns["bbox"].astype(np.float32)
        boxes[:, 2:] += boxes[:, :2]
        self.boxes = boxes
        self.good_boxes = np.isfinite(boxes).all(1) & (boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1])
        widths, heights = columns["widths"], columns["heights"]
        self.good_sizes = (widths >= 1) & (heights >= 1) & (widths % 1 == 0) & (heights % 1 == 0)

    def problems(self) -> Iterator[Problem]:
        """Each problem, rule by rule: repeated ids (categories, images), image sizes and names,
        repeated annotation ids, annotations of no image, of an unknown category, degenerate boxes."""
        columns = self.columns
        image_ids, ann_ids = columns["image_ids"], columns["ann_ids"]
        yield from _repeated(columns["category_ids"], "categories")
        yield from _repeated(image_ids, "images", self.image_order)
        for k in np.flatnonzero(~self.good_sizes).tolist():
            width, height = columns["widths"][k], columns["heights"][k]
            message = f"width {width:g} and height {height:g} must be positive whole numbers"
            yield Problem(f"image {image_ids[k]}", message, "images", k)
        yield from self._name_problems()
        yield from _repeated(ann_ids, "annotations")
        orphans = np.flatnonzero(~self.found).tolist()
        for k in orphans:
            message = f"image_id {columns['ann_image_ids'][k]} is not in 'images' ({len(orphans)} annotation(s) do)"
            yield Problem(f"annotation {ann_ids[k]}", message, "annotations", k, drops="annotation")
        unknown = np.flatnonzero(~self.known).tolist()
        for k in unknown:
            message = (f"category_id {columns['ann_category_ids'][k]} is not in 'categories' "
                       f"{np.unique(self.category_ids).tolist()} ({len(unknown)} annotation(s) do)")
            if self.found[k]:
                message += f"; image {columns['ann_image_ids'][k]} cannot be used"
            yield Problem(f"annotation {ann_ids[k]}", message, "annotations", k, drops="image")
        for k in np.flatnonzero(~self.good_boxes).tolist():
            yield Problem(f"annotation {ann_ids[k]}", _box_message(columns["bbox"][k].tolist()), "annotations", k,
                          drops="box")
        for field, values in columns.get("extra", {}).items():
            yield from _extra_problems(field, values, ann_ids)

    def image_of(self, row: int) -> int:
        """The position in 'images' (file order) of the image of annotation ``row`` (found)."""
        return int(self.image_order[self.image_rows[row]])

    def _name_problems(self) -> Iterator[Problem]:
        image_ids = self.columns["image_ids"]
        for k, name in enumerate(self.columns["file_names"]):
            # a cheap screen first: names without these characters pass check_relative
            if not name or "\x00" in name or ".." in name or ":" in name or name[0] in "/\\":
                if not name:
                    message = "'file_name' is empty"
                else:
                    try:
                        storage.check_relative(name)
                        continue
                    except DataError as error:
                        message = str(error)
                yield Problem(f"image {image_ids[k]}", message, "images", k, drops="image")


def _extra_problems(field: str, values: list, ann_ids: np.ndarray) -> Iterator[Problem]:
    """A missing or non-numeric value of an ``extra_fields`` field: its annotation's image cannot be used."""
    for k, value in enumerate(values):
        if type(value) is bool or is_number(value):
            continue
        got = "no such field" if value is MISSING else f"{_shown(value)}, not a number"
        yield Problem(f"annotation {ann_ids[k]}", f"'{field}' (extra_fields): {got}", "annotations", k,
                      drops="image")


def _repeated(ids: np.ndarray, section: str, order: np.ndarray | None = None) -> Iterator[Problem]:
    """Each entry whose id an earlier one in ``section`` has (``order``: a stable argsort of ids)."""
    ordered = np.sort(ids) if order is None else ids[order]
    if len(ids) < 2 or not (ordered[1:] == ordered[:-1]).any():
        return
    order = np.argsort(ids, kind="stable") if order is None else order
    ordered = ids[order]
    for k in np.sort(order[1:][ordered[1:] == ordered[:-1]]).tolist():
        yield Problem(f"{LABELS[section]} {ids[k]}", f"the id appears more than once in '{section}'", section, k)


def _box_message(box: list[float]) -> str:
    width, height = box[2:]
    if not all(map(math.isfinite, box)):
        why = "holds NaN or infinity"
    elif width <= 0 or height <= 0:
        why = "has a non-positive width or height"
    else:  # x + width rounds to x, or overflows, in float32
        why = "has a width or height that float32 coordinates cannot hold"
    return f"bbox {box} {why} ({DEGENERATE})"


def _lookup(sorted_ids: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions of ``ids`` in ``sorted_ids`` and whether each was found."""
    position = np.minimum(np.searchsorted(sorted_ids, ids), max(len(sorted_ids) - 1, 0))
    found = sorted_ids[position] == ids if len(sorted_ids) else np.zeros(len(ids), bool)
    return position, found
