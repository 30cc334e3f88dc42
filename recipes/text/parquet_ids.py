"""Pre-tokenised Parquet: a column of token-id lists read straight into a TokenArray, no tokenizer.

    column = IdsColumn("input_ids", vocab_size=32_000, max_length=512)
    corpus = read_id_corpus(parquet_entries("train-*.parquet"), column)   # tokens, labels, rows
    for chunk in column.chunks(entries, row_counts(entries)): ...       # a row group at a time

``datasets.map``, Ray Data and Spark store token ids as a ``list<int32>`` or ``list<int64>``
column (large and fixed-size lists are read too). A row group's column becomes one flat id array
plus offsets straight from its Arrow buffers: no Python object per row or per id.

What is wrong with a row is a :class:`DataError` naming the file, the row and its row group: a
null or empty list, a null id, an id below 0 or at or over ``vocab_size`` (without one, over what
``uint32`` holds), a label the text path would refuse; every stored id is checked, those that
``max_length`` cuts off too. ``on_error="skip"`` drops the row with a warning. A column of another
type (floats, strings) is the file's problem and always raises, as a missing column does.
``max_length`` cuts as the text path cuts when a tokenizer names the special tokens
(:meth:`recipes.core.tokenizing.TruncatingEncoder.cut_ids`: ``[CLS] ... [SEP]`` kept), else slices.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from recipes.core import DataError, arrays, check_on_error, parquet, skip_or_raise, tokenizing
from recipes.text.corpus_files import check_label
from recipes.text.parquet_corpus import ParquetCorpus, label_array, number_labels

UINT32_IDS = 2**32  # ids a TokenArray holds without a vocab_size to check against
SKIP_HINT = "or pass on_error='skip' to drop the row"


@dataclass
class IdsChunk:
    """The usable rows of one row group: their ids (checked and cut), labels and row numbers."""

    tokens: arrays.TokenArray
    rows: np.ndarray  # int64: each sample's row, counted from 0 across the entries
    labels: np.ndarray | None  # int64, or str where a label is not an integer (numbered by the caller)
    name: str  # the entry, for messages
    group: int | None  # its row group (None for a Dataset)
    shift: int  # row within the entry minus row across the entries
    extras: dict[str, np.ndarray] = field(default_factory=dict)  # extra_fields: int64 or float64 [rows]

    def where(self, index: int) -> str:
        """Sample ``index`` of the chunk in messages: ``"train.parquet row 41 (row group 2)"``."""
        return _where(self.name, int(self.rows[index]) + self.shift, self.group)


class IdsColumn:
    """How to read a token-id column: its name, the label column, the id range, the cut.

    Args:
        field: the list column of ids (``ids_field``).
        label_field: the label column, checked as the text path checks it; None for no labels.
        vocab_size: ids must be below it; None takes the encoder's tokenizer's, else only
            ``uint32`` bounds them.
        max_length: keep at most this many ids a row (None: all).
        encoder: a :class:`recipes.core.tokenizing.TruncatingEncoder` of the tokenizer that wrote the
            ids: it cuts them as it cuts a text (its ``max_length`` and truncation are used).
            None: ``max_length`` slices, ``ids[:max_length]``.
        on_error: ``"raise"`` or ``"skip"``.
        extra_fields: numeric columns kept per row (integers and booleans as int64, floats as
            float64 here, float32 in the dataset); a null or a value that is not a number is a bad row.
    """

    def __init__(
        self,
        field: str = "input_ids",
        *,
        label_field: str | None = None,
        vocab_size: int | None = None,
        max_length: int | None = None,
        encoder: tokenizing.TruncatingEncoder | None = None,
        on_error: str = "raise",
        extra_fields: Sequence[str] = (),
    ) -> None:
        integer = isinstance(vocab_size, (int, np.integer)) and not isinstance(vocab_size, bool)
        if vocab_size is not None and not (integer and vocab_size >= 1):
            raise ValueError(f"vocab_size must be a positive integer or None, got {vocab_size!r}")
        if encoder is None:
            tokenizing.check_truncation(max_length)
        elif max_length != encoder.max_length:
            raise ValueError(f"max_length={max_length} differs from the encoder's {encoder.max_length}")
        if vocab_size is None and encoder is not None:
            vocab_size = encoder.tokenizer.get_vocab_size(with_added_tokens=True)
        self.field, self.label_field, self.max_length, self.encoder = field, label_field, max_length, encoder
        self.extra_fields = tuple(extra_fields)
        self.vocab_size, self.on_error = None if vocab_size is None else int(vocab_size), check_on_error(on_error)
        self.upper = UINT32_IDS if self.vocab_size is None else min(self.vocab_size, UINT32_IDS)
        # the stored dtype: uint16 when every allowed id fits in it, as for tokenised text
        self.dtype = np.dtype(np.uint16 if self.upper <= 2**16 else np.uint32)

    @property
    def columns(self) -> list[str]:
        """The columns read: the ids, the labels if any, and the extra fields."""
        return [name for name in (self.field, self.label_field, *self.extra_fields) if name is not None]

    def check_entry(self, entry: Any, storage_options: dict[str, Any] | None = None) -> None:
        """A DataError naming ``entry`` unless it has the columns and the id column holds integer lists."""
        parquet.check_columns(entry, {"ids_field": self.field, "label_field": self.label_field}, storage_options)
        for name in self.extra_fields:
            parquet.check_columns(entry, {"extra_fields": name}, storage_options)
        if parquet.is_arrow_dataset(entry):
            self.check_footer(entry, None)
        else:
            with parquet.parquet_file(entry, storage_options) as file:
                self.check_footer(entry, file)

    def check_footer(self, entry: Any, file: Any) -> None:
        """A DataError naming ``entry`` unless its id column holds integer lists, read from ``file``, its
        open ``pyarrow.parquet.ParquetFile`` (None for a Dataset); the columns are checked already
        (the ``check`` of :func:`recipes.core.parquet.read_footers`)."""
        name = parquet.entry_name(entry)
        if file is None:
            kind = entry.with_format("arrow", columns=[self.field])[0:0].schema.field(self.field).type
            where = f"{name} rows 0-{entry.num_rows - 1}"
        else:
            kind, meta = file.schema_arrow.field(self.field).type, file.metadata
            # the first row group holds the type as every other does: named as a read of it names it
            where = f"{name} row group 0 (rows 0-{meta.row_group(0).num_rows - 1})" if meta.num_row_groups else name
        _check_type(kind, where, self.field)

    def chunks(self, entries: Sequence[Any], sizes: Sequence[int], **read: Any) -> Iterator[IdsChunk]:
        """An :class:`IdsChunk` per row group that :func:`recipes.core.parquet.iter_tables`
        reads (``read``: its keyword options, the row range and row-group size limit among them)."""
        for part in parquet.iter_tables(entries, self.columns, sizes, **read):
            yield self.read(part)

    def read(self, part: parquet.TablePart) -> IdsChunk:
        """The checked, cut ids and the labels of one row group; bad rows raise, or are skipped with
        a warning each, in row order."""
        column = _one_array(part.table.column(self.field))
        count = len(column)
        _check_type(column.type, _group_where(part, count), self.field)
        values, offsets, null_rows = _flat(column)
        ids = values.fill_null(0).to_numpy() if values.null_count else values.to_numpy()

        def where(k: int) -> str:
            return _where(part.name, part.first + k, part.group)

        problems: dict[int, DataError] = {}  # row in the group -> the first thing wrong with it
        for k, reason in self._id_problems(values, ids, offsets, null_rows):
            if k not in problems:
                problems[k] = DataError(f"{where(k)}: {reason}", skip_hint=SKIP_HINT)
        labels = self._labels(part, where, problems)
        extras = {name: self._extra(part, name, where, problems) for name in self.extra_fields}
        keep = np.ones(count, dtype=bool)
        for k in sorted(problems):
            skip_or_raise(problems[k], self.on_error)
            keep[k] = False
        lengths = np.diff(offsets)
        if not keep.all():
            ids, lengths = ids[np.repeat(keep, lengths)], lengths[keep]
            labels = None if labels is None else labels[keep]
            extras = {name: values[keep] for name, values in extras.items()}
            offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
            np.cumsum(lengths, out=offsets[1:])
        dtype = self.dtype
        if self.vocab_size is None and ids.size and int(ids.max()) < 2**16:
            dtype = np.dtype(np.uint16)  # half the memory: whatever the bound, this group's ids fit
        tokens = arrays.TokenArray(np.array(ids, dtype=dtype), offsets)  # a copy: never a view of Arrow's buffers
        if self.encoder is not None:
            tokens = self.encoder.cut_ids(tokens)
        elif self.max_length is not None:
            tokens = tokenizing.cut_tokens(tokens, self.max_length)
        rows = part.row + np.flatnonzero(keep).astype(np.int64)
        return IdsChunk(tokens, rows, labels, part.name, part.group, part.first - part.row, extras)

    def _id_problems(
        self, values: Any, ids: np.ndarray, offsets: np.ndarray, null_rows: np.ndarray | None
    ) -> Iterator[tuple[int, str]]:
        """``(row, reason)`` for each bad row of a group, a row's first problem first; vectorised
        checks, a Python step only for the rows found bad."""
        field, lengths = self.field, np.diff(offsets)
        for k in np.flatnonzero(null_rows) if null_rows is not None else ():
            yield int(k), f"column {field!r} is null"
        for k in np.flatnonzero(lengths == 0):
            yield int(k), f"column {field!r} holds no ids"
        if values.null_count:
            for k, position in _first_per_row(np.flatnonzero(np.asarray(values.is_null())), offsets):
                yield k, f"the id at position {position - int(offsets[k])} of column {field!r} is null"
        if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= self.upper):
            bound = "what uint32 holds" if self.vocab_size is None else f"vocab_size {self.vocab_size:,}"
            for k, position in _first_per_row(np.flatnonzero((ids < 0) | (ids >= self.upper)), offsets):
                yield k, (f"id {int(ids[position]):,} at position {position - int(offsets[k])} of column {field!r} "
                          f"is out of range: below 0, or at or over {bound}")
        if self.encoder is not None:
            unmarked = self.encoder.unmarked_rows(arrays.TokenArray(ids, offsets))
            head, tail = self.encoder.special_ends() if unmarked.size else ([], [])
            for k in unmarked:
                yield int(k), (f"{int(lengths[k])} ids, over the {self.encoder.limit} the tokenizer cuts to, that do "
                               f"not begin with {head} and end with {tail}, its special tokens: stored without them? "
                               "pass truncation='slice' to cut them as they are")

    def _labels(self, part: parquet.TablePart, where: Any, problems: dict[int, DataError]) -> np.ndarray | None:
        """The group's labels (int64, or str if one is not an integer); bad ones noted in ``problems``."""
        if self.label_field is None:
            return None
        pa = _pyarrow()
        column, name = _one_array(part.table.column(self.label_field)), self.label_field
        if pa.types.is_integer(column.type):  # the common case, without a Python object a row
            values = column.fill_null(0).to_numpy(zero_copy_only=False)
            bad = np.asarray(column.is_null()) | (values > 2**63 - 1 if values.dtype == np.uint64 else False)
            for k in map(int, np.flatnonzero(bad)):
                problems.setdefault(k, _label_error(values[k] if column[k].is_valid else None, where(k), name))
            return values.astype(np.int64)  # a wrapped uint64 belongs to a row dropped above
        labels: list[Any] = []
        for k, value in enumerate(column.to_pylist()):
            try:
                if value is None:  # as the text path words it for Parquet
                    raise _label_error(None, where(k), name)
                labels.append(check_label(value, where(k), name))
            except DataError as error:
                problems.setdefault(k, error)
                labels.append(0)  # dropped with its row
        return label_array(labels)


    def _extra(self, part: parquet.TablePart, name: str, where: Any, problems: dict[int, DataError]) -> np.ndarray:
        """The group's values of extra field ``name``: int64 for integers and booleans, float64 for
        floats; a null, or a column of another type, noted in ``problems`` row by row."""
        pa = _pyarrow()
        column = _one_array(part.table.column(name))
        kind = column.type
        if not (pa.types.is_integer(kind) or pa.types.is_boolean(kind) or pa.types.is_floating(kind)):
            for k, value in enumerate(column.to_pylist()):
                got = "is null" if value is None else f"holds {str(value)[:40]!r}, not a number"
                problems.setdefault(k, DataError(f"{where(k)}: column {name!r} (extra_fields) {got}", skip_hint=SKIP_HINT))
            return np.zeros(len(column), dtype=np.int64)
        for k in map(int, np.flatnonzero(np.asarray(column.is_null()))):
            problems.setdefault(k, DataError(f"{where(k)}: column {name!r} is null", skip_hint=SKIP_HINT))
        values = column.fill_null(False if pa.types.is_boolean(kind) else 0).to_numpy(zero_copy_only=False)
        if pa.types.is_floating(kind):
            return values.astype(np.float64)
        if values.dtype == np.uint64 and values.size and int(values.max()) > 2**63 - 1:
            for k in map(int, np.flatnonzero(values > 2**63 - 1)):
                problems.setdefault(k, DataError(f"{where(k)}: column {name!r} (extra_fields) holds {int(values[k])}, "
                                                 "an integer too large for int64", skip_hint=SKIP_HINT))
        return values.astype(np.int64)


def read_id_corpus(
    entries: list[Any],
    column: IdsColumn,
    *,
    storage_options: dict[str, Any] | None = None,
    max_row_group_bytes: int = parquet.MAX_ROW_GROUP_BYTES,
) -> ParquetCorpus:
    """Every usable row of ``entries`` (from :func:`recipes.core.parquet.parquet_entries`),
    its labels numbered as the text path numbers them (integers kept, else sorted names)."""
    for entry in entries:
        column.check_entry(entry, storage_options)
    sizes = parquet.row_counts(entries, storage_options)
    parts, label_parts, row_parts = [], [], []
    extra_parts: dict[str, list[np.ndarray]] = {name: [] for name in column.extra_fields}
    options = {"storage_options": storage_options, "max_row_group_bytes": max_row_group_bytes}
    for chunk in column.chunks(entries, sizes, **options):
        parts.append(chunk.tokens)
        row_parts.append(chunk.rows)
        if chunk.labels is not None:
            label_parts.append(chunk.labels)
        for name, values in chunk.extras.items():
            extra_parts[name].append(values)
    labels, names = number_labels(label_parts) if column.label_field is not None else (None, None)
    rows = np.concatenate(row_parts) if row_parts else np.zeros(0, dtype=np.int64)
    small = all(part.ids.dtype == np.uint16 for part in parts)  # every group's ids fit in 16 bits
    extras = {name: _joined_numbers(values) for name, values in extra_parts.items()}
    tokens = arrays.concat_tokens(parts, np.dtype(np.uint16) if small else column.dtype)
    return ParquetCorpus(tokens, labels, names, rows, extras)


def _joined_numbers(parts: list[np.ndarray]) -> np.ndarray:
    """One extra field's row groups end to end: int64 where every group's is, else float32 (as
    :func:`recipes.text.corpus_files.extra_arrays` types a text file's values)."""
    if parts and all(part.dtype == np.int64 for part in parts):
        return np.concatenate(parts)
    return np.concatenate(parts).astype(np.float32) if parts else np.zeros(0, dtype=np.int64)


def ids_type_problem(kind: Any) -> str | None:
    """What is wrong with an Arrow type as a column of token ids, or None for a list of integers."""
    pa = _pyarrow()
    if not (pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind)):
        return f"holds {kind}, not lists of token ids"
    if not pa.types.is_integer(kind.value_type):
        return f"holds lists of {kind.value_type}, not of integer token ids"
    return None


def _check_type(kind: Any, where: str, field: str) -> None:
    problem = ids_type_problem(kind)
    if problem is not None:
        raise DataError(
            f"{where}: column {field!r} {problem}; name the column of ids with ids_field=..., or cast it "
            "(pyarrow.compute.cast(column, pyarrow.list_(pyarrow.int32())))"
        )


def _where(name: str, row: int, group: int | None) -> str:
    return f"{name} row {row}" + ("" if group is None else f" (row group {group})")


def _group_where(part: parquet.TablePart, count: int) -> str:
    rows = f"rows {part.first}-{part.first + count - 1}"
    return f"{part.name} {rows}" if part.group is None else f"{part.name} row group {part.group} ({rows})"


def _pyarrow() -> Any:
    parquet.require_pyarrow()  # its ImportError names the pip command
    import pyarrow

    return pyarrow


def _one_array(column: Any) -> Any:
    """An Arrow Array of a Table's column (a copy only if it came in several chunks) or a RecordBatch's."""
    if not hasattr(column, "chunks"):
        return column
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


def _flat(column: Any) -> tuple[Any, np.ndarray, np.ndarray | None]:
    """``(values, offsets, null rows)`` of a list array: the Arrow values the rows span, int64
    offsets into them from 0, and a bool mask of null rows (None without nulls)."""
    pa = _pyarrow()
    count = len(column)
    if pa.types.is_fixed_size_list(column.type):
        size = column.type.list_size
        offsets = np.arange(count + 1, dtype=np.int64) * size
        values = column.values.slice(column.offset * size, count * size)  # .values ignores a slice's offset
    else:
        offsets = np.asarray(column.offsets, dtype=np.int64)  # a slice's offsets point into the whole values
        values = column.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
        offsets = offsets - offsets[0]
    null_rows = np.asarray(column.is_null()) if column.null_count else None
    return values, offsets, null_rows


def _first_per_row(positions: np.ndarray, offsets: np.ndarray) -> list[tuple[int, int]]:
    """``(row, position)``: each row holding some of the flat, sorted ``positions``, and its first one."""
    rows = np.searchsorted(offsets, positions, side="right") - 1
    unique, first = np.unique(rows, return_index=True)
    return [(int(row), int(positions[i])) for row, i in zip(unique, first)]


def _label_error(value: Any, where: str, name: str) -> DataError:
    if value is None:
        return DataError(f"{where}: column {name!r} is null; drop the row", skip_hint="or pass on_error='skip'")
    return DataError(f"{where}: label {str(value)[:40]!r} is an integer too large for int64")
