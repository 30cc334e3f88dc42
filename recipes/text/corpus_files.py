"""Samples from line-oriented data files (.txt, .jsonl, .csv), each tagged with its line number.

    rows = read_rows("reviews.jsonl", text_field="text", label_field="stars", on_error="skip")
    rows.texts[0], rows.labels[0], rows.lines[0]        # 'Great pan.', 5, 1
    labels, names = label_ids(rows.labels)              # ints as given, or strings numbered
    parse_line(b'{"text": "hi"}\\n', "a.jsonl byte 0", json_row=True)   # ('hi', None)

Formats, chosen by the suffix:
- ``.txt``: a line a sample, the line itself is the text (its ``\\n`` / ``\\r\\n`` removed).
- ``.jsonl``: a JSON object a line; the text (and label) are fields of it.
- ``.csv``: a header row naming the columns, read with the :mod:`csv` module, so a quoted
  field may hold commas, quotes and line breaks; the line number is where the record starts.

Blank lines (empty or only whitespace) are not samples in .txt and .jsonl: they separate paragraphs
or end the file, so they are passed over silently and never counted as samples; the kept samples
carry their real line numbers. Everything else that is wrong with a line is a :class:`DataError`
naming the file and line: bytes that are not UTF-8, JSON that does not parse or is not an object, a
missing, non-string or empty text field, a missing or non-scalar label, a text over ``max_chars``
characters (:func:`read_rows`); a missing field is reported with the fields the row does have.
``on_error="skip"`` drops such a line with a warning; a CSV header without the named columns (the
error lists the header) is a problem with the whole file and always raises. So is a field that no
line has: a wrong ``text_field``/``label_field`` is one error, not a warning for every line and
nothing kept (:func:`warn_skipped`).
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import operator
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from recipes.core import DataError, check_on_error, skip_or_raise, storage
  # noqa: F401  (the default, importable from here too)

ROW_FORMATS = (".txt", ".jsonl", ".csv")
TEXT_FORMATS = (*ROW_FORMATS, ".parquet")  # what the text datasets read: these rows, or Parquet columns
_INTEGER = re.compile(r"[+-]?\d+")


@dataclass
class Rows:
    """What :func:`read_rows` kept: texts, raw labels (None without a label field), line numbers."""

    path: Path | str  # a local path, or the URL it was read from
    texts: list[str] = field(default_factory=list)
    labels: list[Any] | None = None
    lines: list[int] = field(default_factory=list)
    extras: dict[str, list[Any]] = field(default_factory=dict)  # extra_fields: a value per kept sample each


def check_format(path: str | os.PathLike, formats: Sequence[str] = ROW_FORMATS) -> str:
    """Return the lower-case suffix of ``path``, or raise ValueError listing ``formats`` (a local
    folder is said to be one)."""
    if not storage.is_url(path) and os.path.isdir(path):
        raise ValueError(f"{path} is a folder; expected a file, one of {list(formats)}")
    suffix = storage.suffix(path)
    if suffix not in formats:
        raise ValueError(f"{storage.shown(path)}: unsupported file type {suffix!r}; expected one of {list(formats)}")
    return suffix


def read_rows(
    path: str | os.PathLike,
    *,
    text_field: str = "text",
    label_field: str | None = None,
    on_error: str = "raise",
    data: bytes | None = None,
    storage_options: dict[str, Any] | None = None,
    max_chars: int | None = None,
    extra_fields: Sequence[str] = (),
) -> Rows:
    """Read every sample of a .txt, .jsonl or .csv file; see the module docstring.

    Args:
        path: the file; its suffix picks the format.
        text_field, label_field: field names for .jsonl and .csv (a .txt file has no label).
        on_error: ``"raise"`` or ``"skip"`` (drop bad lines with a warning).
        data: the file's bytes if already read (e.g. to hash them for a cache key).
        storage_options: passed to fsspec when ``path`` is a URL (see :mod:`recipes.core.sources.storage`).
        max_chars: refuse a text longer than this many characters (None: no limit). Datasets pass
            their ``max_line_chars`` when there is no ``max_length``: tokenising a text whole costs
            memory in proportion to it (about 100 bytes a character).
        extra_fields: numeric fields kept per sample in ``rows.extras`` (:func:`extra_value`).
    """
    check_on_error(on_error)
    path = path if storage.is_url(path) else Path(path)
    suffix, name = check_format(path), storage.shown(path)
    for option, given in (("label_field", label_field is not None), ("extra_fields", bool(extra_fields))):
        if suffix == ".txt" and given:
            raise ValueError(f"{name}: a .txt file has no fields; {option} needs a .jsonl or .csv file")
    if data is None:
        data = storage.read_bytes(path, storage_options)
    data = data.removeprefix(codecs.BOM_UTF8)  # spreadsheets write one; it is not part of the text
    rows = Rows(path, labels=[] if label_field is not None else None, extras={name: [] for name in extra_fields})
    skipped: list[DataError] = []  # warned at the end, once it is known whether any line has the fields
    if suffix == ".csv":
        numbered = _csv_records(name, data, text_field, label_field, extra_fields)
    else:
        numbered = enumerate(data.split(b"\n"), start=1)
    fields = {"text_field": text_field, "label_field": label_field, "max_chars": max_chars}
    for number, raw in numbered:
        where = f"{name} line {number}"
        try:
            record = raw if suffix == ".csv" else decode_line(raw, where, json_row=suffix == ".jsonl")
            if record is None:
                continue  # a blank line
            if suffix == ".txt":
                check_length(record, where, "the line", max_chars)
                row = record, None
            else:
                row = check_fields(record, where, **fields)
            extras = [extra_value(record, where, extra, text=suffix == ".csv") for extra in extra_fields]
        except DataError as error:
            if on_error == "raise":
                raise
            skipped.append(error)
            continue
        rows.texts.append(row[0])
        rows.lines.append(number)
        if rows.labels is not None:
            rows.labels.append(row[1])
        for extra, value in zip(extra_fields, extras):
            rows.extras[extra].append(value)
    warn_skipped(skipped, kept=len(rows.texts))
    return rows


class MissingField(DataError):
    """A JSON object or CSV record without the field that ``option`` names."""

    def __init__(self, where: str, name: str, option: str, fields: list[str]) -> None:
        super().__init__(f"{where}: no {name!r} field (fields: {fields}); pass {option}=... to name another")
        self.where, self.name, self.option, self.fields = where, name, option, fields


def warn_skipped(skipped: list[DataError], *, kept: int) -> None:
    """Warn each skipped line of a file, in order; but if none was ``kept`` and every one lacked a
    field, that is a wrong ``text_field``/``label_field``, not messy data: one :class:`DataError`
    naming the field and the fields the first line has. It needs the whole file: a stream reader,
    which sees only its share, warns line by line (``recipes.text.StreamingTextDataset``)."""
    if skipped and not kept and all(isinstance(error, MissingField) for error in skipped):
        first = skipped[0]
        raise DataError(
            f"{first.where}: no {first.name!r} field in any of the {len(skipped)} lines read (the first "
            f"has {first.fields}); pass {first.option}=... to name another (on_error='skip' drops bad lines, "
            "not a wrong field name)"
        )
    for error in skipped:
        skip_or_raise(error, "skip")


def _csv_records(name: str, data: bytes, text_field: str, label_field: str | None, extra_fields: Sequence[str] = ()):
    # surrogateescape keeps undecodable bytes as lone surrogates: check_fields then names the
    # record that holds them instead of failing the whole file
    reader = csv.DictReader(io.StringIO(data.decode("utf-8", "surrogateescape"), newline=""))
    columns = reader.fieldnames or []
    wanted = [("text_field", text_field), ("label_field", label_field), *(("extra_fields", f) for f in extra_fields)]
    missing = [(option, field) for option, field in wanted if field is not None and field not in columns]
    if missing:
        options = dict.fromkeys(option for option, _ in missing)
        raise DataError(
            f"{name}: the header has no column {[field for _, field in missing]} (columns: {columns}); "
            f"pass {' / '.join(f'{option}=...' for option in options)} naming existing columns"
        )
    number = reader.line_num + 1
    for record in reader:
        yield number, record
        number = reader.line_num + 1  # a quoted field may span several physical lines


def parse_line(
    raw: bytes,
    where: str,
    *,
    json_row: bool,
    text_field: str = "text",
    label_field: str | None = None,
    max_chars: int | None = None,
) -> tuple[str, Any] | None:
    """One raw line -> ``(text, label)``, or None for a blank line.

    Args:
        raw: the line's bytes, with or without its ``\\n`` / ``\\r\\n``.
        where: names the line in error messages, e.g. ``"data.txt line 3"``.
        json_row: parse the line as a JSON object and read its fields (.jsonl), else the line
            is the text and the label is None (.txt).
        max_chars: refuse a text longer than this many characters (None: no limit).
    """
    line = decode_line(raw, where, json_row=json_row)
    if line is None or not json_row:
        if line is not None:
            check_length(line, where, "the line", max_chars)
        return None if line is None else (line, None)
    return check_fields(line, where, text_field=text_field, label_field=label_field, max_chars=max_chars)


def decode_line(raw: bytes, where: str, *, json_row: bool) -> Any:
    """One raw line as UTF-8 text (``json_row=False``) or the JSON value it holds; None for a blank
    line; a DataError naming ``where`` for bytes that are not UTF-8 or JSON that does not parse."""
    raw = raw.removesuffix(b"\n").removesuffix(b"\r")
    try:
        line = raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as error:
        bad = raw[error.start : error.start + 4]
        raise DataError(
            f"{where}: not valid UTF-8 (bytes {bad!r} at column {error.start}); re-encode the file as UTF-8",
            skip_hint="or pass on_error='skip' to drop the line",
        ) from None
    if not line.strip():
        return None  # blank lines hold no sample (module docstring)
    if not json_row:
        return line
    try:
        return json.loads(line)
    except json.JSONDecodeError as error:
        raise DataError(f"{where}: not valid JSON ({error.msg} at column {error.colno})") from None
    # ValueError: an integer of more than 4300 digits; RecursionError: absurdly deep nesting
    except (ValueError, RecursionError) as error:
        raise DataError(f"{where}: not valid JSON ({type(error).__name__}: {str(error)[:100]})") from None


def check_length(text: str, where: str, what: str, max_chars: int | None) -> None:
    """A DataError if ``text`` is longer than ``max_chars`` characters (None: no limit)."""
    if max_chars is not None and len(text) > max_chars:
        raise DataError(
            f"{where}: {what} holds {len(text):,} characters, over the {max_chars:,} tokenised whole without "
            "max_length; pass max_length=... (only a bounded prefix is then tokenised) or max_line_chars=... "
            "to raise the limit"
        )


def check_fields(
    record: Any, where: str, *, text_field: str, label_field: str | None, max_chars: int | None = None
) -> tuple[str, Any]:
    """``(text, label)`` from a JSON object or CSV record, or a DataError naming ``where``."""
    if not isinstance(record, dict):
        raise DataError(f"{where}: expected a JSON object, got {type(record).__name__}")
    text = record.get(text_field)
    if text is None:
        raise _no_field(record, where, text_field, "text_field")
    if not isinstance(text, str):
        raise DataError(f"{where}: field {text_field!r} is {type(text).__name__}, not a string")
    if not is_unicode(text):
        raise DataError(f"{where}: field {text_field!r} is not valid UTF-8 / Unicode (lone surrogate)")
    if not text.strip():
        raise DataError(f"{where}: field {text_field!r} is empty")
    check_length(text, where, f"field {text_field!r}", max_chars)
    if label_field is None:
        return text, None
    if label_field not in record:
        raise _no_field(record, where, label_field, "label_field")
    return text, check_label(record[label_field], where, label_field)


def check_label(label: Any, where: str, label_field: str) -> int | str:
    """``label`` if it can be a class label (an int64 integer or a string), else a DataError naming ``where``."""
    if label is None or label == "":
        raise DataError(f"{where}: field {label_field!r} holds no label")
    if isinstance(label, bool) or not isinstance(label, (int, str)) or not is_unicode(str(label)):
        raise DataError(f"{where}: label {label!r} is neither an integer nor a string")
    if _out_of_int64(label):
        raise DataError(f"{where}: label {str(label)[:40]!r} is an integer too large for int64")
    return label


def extra_value(record: dict[str, Any], where: str, name: str, *, text: bool = False) -> int | float:
    """The number that field ``name`` of ``record`` holds (an ``extra_fields`` field; a boolean counts
    as 0 or 1), or a DataError naming ``where`` and the field: for a missing or null field, or a
    value that is not a number or an integer int64 cannot hold (``text``: a CSV cell, whose digits
    are read as an integer, else as a float)."""
    if record.get(name) is None:
        raise _no_field(record, where, name, "extra_fields")
    value = record[name]
    if text and isinstance(value, str):
        try:
            value = int(value) if _INTEGER.fullmatch(value.strip()) else float(value)
        except ValueError:
            pass
    if isinstance(value, bool):
        return int(value)
    if not isinstance(value, (int, float)) or isinstance(value, int) and not -(2**63) <= value < 2**63:
        what = "an integer too large for int64" if isinstance(value, int) else "not a number"
        raise DataError(f"{where}: {name!r} (extra_fields): {str(value)[:40]!r}, {what}")
    return value


RESERVED_KEYS = ("input_ids", "index", "label", "labels", "attention_mask", "lengths", "position_ids", "cu_seqlens",
             "max_seqlen")  # what the text items and batches name themselves: no extra field may


def check_extra_fields(extra_fields: Sequence[str]) -> tuple[str, ...]:
    """``extra_fields`` as a tuple of distinct names, or a ValueError saying what is wrong with it."""
    if isinstance(extra_fields, str) or not all(isinstance(name, str) and name for name in extra_fields):
        raise ValueError(f"extra_fields must be a tuple of field names, like ('weight',), got {extra_fields!r}")
    extra_fields = tuple(extra_fields)
    clashing = [name for name in extra_fields if name in RESERVED_KEYS]
    if clashing or len(set(extra_fields)) != len(extra_fields):
        what = f"{clashing[0]!r} is a key of the items or batches" if clashing else "a name is repeated"
        raise ValueError(f"extra_fields={extra_fields!r}: {what}; name each field once, apart from {list(RESERVED_KEYS)}")
    return extra_fields


def extra_arrays(extras: dict[str, Sequence[int | float]]) -> dict[str, np.ndarray]:
    """Each extra field's values as one array: int64 where every value is an integer, else float32."""
    arrays = {}
    for name, values in extras.items():
        integers = all(isinstance(value, int) for value in values)
        arrays[name] = np.asarray(values, dtype=np.int64 if integers else np.float32).reshape(-1)
    return arrays


def _no_field(record: dict, where: str, name: str, option: str) -> MissingField:
    return MissingField(where, name, option, sorted(str(key) for key in record))


def _out_of_int64(label: int | str) -> bool:
    """An integer label (or CSV digits) that the int64 label array cannot hold."""
    if isinstance(label, str):
        digits = label.strip()
        if not _INTEGER.fullmatch(digits):
            return False  # a name, numbered later
        if len(digits) > 24:
            return True  # (int() of thousands of digits is slow, then refused by Python)
        label = int(digits)
    return not -(2**63) <= label < 2**63


def is_unicode(text: str) -> bool:
    """True unless ``text`` holds a lone surrogate (bad bytes read with surrogateescape, or a JSON
    ``\\ud800`` escape): such text cannot be encoded, so no tokenizer accepts it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def integer_label(label: Any) -> int | None:
    """``label`` as an int if it is one (CSV gives ``"2"``), else None."""
    if isinstance(label, int) and not isinstance(label, bool):
        return label
    if isinstance(label, str) and _INTEGER.fullmatch(label.strip()):
        return int(label)
    return None


def label_ids(labels: Sequence[Any]) -> tuple[np.ndarray, list[str] | None]:
    """Raw labels -> int64 ids and the label names.

    Integers (and integer strings, as CSV gives them) are kept as they are and the names are
    None. Otherwise every label is read as a string and numbered by its position in the sorted
    list of distinct names, so the numbering depends only on the set of labels, not their order.
    """
    as_ints = [integer_label(label) for label in labels]
    if None not in as_ints:
        return np.asarray(as_ints, dtype=np.int64).reshape(-1), None
    names = sorted({str(label) for label in labels})
    number = {name: i for i, name in enumerate(names)}
    return np.asarray([number[str(label)] for label in labels], dtype=np.int64), names


def sample_index(index: int, count: int, name: str) -> int:
    """``index`` as a position in ``count`` samples of ``name`` (negative counts from the end); an
    IndexError names the dataset otherwise."""
    index = operator.index(index)
    if index < 0:
        index += count
    if not 0 <= index < count:
        raise IndexError(f"index {index} is out of range for {count} samples of {name}")
    return index
