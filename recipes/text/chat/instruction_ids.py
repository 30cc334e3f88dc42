"""Pre-tokenised instruction data: Parquet columns of token ids and of labels (or a 0/1 mask).

    ids, learned, rows = read_instruction_ids(parquet_entries("sft-*.parquet"), "input_ids", vocab_size=32_000)

What ``datasets.map``, TRL or :class:`recipes.text.TokenizeBatch` write beside the ids: a
``labels`` column (the ids, -100 where nothing is learned: HF's convention, the model shifts
them), or TRL's ``assistant_masks`` / ``completion_mask`` (1 = learned), looked for in that order.
The ids are read and checked as :class:`recipes.text.parquet_ids.IdsColumn` reads them; a label
list of another length than its ids, a label that is neither -100 nor its id, a mask value other
than 0 or 1, or a null is a DataError naming the file, row and row group.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from recipes.core import DataError, parquet, skip_or_raise
from recipes.text.parquet_ids import IdsColumn

LABEL_COLUMNS = ("labels", "assistant_masks", "completion_mask")
SKIP_HINT = "or pass on_error='skip' to drop the row"


def label_column(entries: list[Any], ids_field: str, storage_options: dict[str, Any] | None = None) -> str | None:
    """The first of :data:`LABEL_COLUMNS` the source has; a DataError if it lacks ``ids_field``."""
    present = parquet.columns_of(entries[0], storage_options)
    if ids_field not in present:
        raise DataError(f"{parquet.entry_name(entries[0])}: no column {ids_field!r} (ids_field); its columns are {present}")
    return next((name for name in LABEL_COLUMNS if name in present), None)


def read_instruction_ids(
    entries: list[Any],
    ids_field: str,
    *,
    vocab_size: int | None = None,
    completion_only: bool = True,
    on_error: str = "raise",
    storage_options: dict[str, Any] | None = None,
) -> tuple[list[np.ndarray], list[np.ndarray], list[int]]:
    """Each kept row's ids (int64), learned mask (bool) and row number, in order.

    Without a labels or mask column every id is learned, which ``completion_only=True`` refuses
    (it would train on the prompts): a DataError names the columns looked for.
    """
    name = label_column(entries, ids_field, storage_options)
    if name is None and completion_only:
        raise DataError(f"{parquet.entry_name(entries[0])}: no labels column ({', '.join(LABEL_COLUMNS)}) beside "
                        f"{ids_field!r}; add one, or pass completion_only=False to learn every token")
    if not completion_only:
        name = None
    column = IdsColumn(ids_field, vocab_size=vocab_size, on_error=on_error)
    sizes = parquet.row_counts(entries, storage_options)
    ids_out, learned_out, rows_out = [], [], []
    for part in parquet.iter_tables(entries, column.columns + ([name] if name else []), sizes,
                                    storage_options=storage_options):
        chunk = column.read(part)  # checked ids; bad rows raised or skipped already
        offsets = chunk.tokens.offsets
        local = chunk.rows - part.row  # the kept rows, within this part
        labels = None if name is None else _lists(part.table.column(name))
        for k, row in enumerate(local):
            ids = chunk.tokens.ids[offsets[k] : offsets[k + 1]].astype(np.int64)
            learned = np.ones(len(ids), dtype=bool)
            if labels is not None:
                try:
                    learned = _learned(labels[row], ids, name, chunk.where(k))
                except DataError as error:
                    skip_or_raise(error, on_error)
                    continue
            ids_out.append(ids)
            learned_out.append(learned)
            rows_out.append(int(chunk.rows[k]))
    return ids_out, learned_out, rows_out


def _lists(column: Any) -> list[np.ndarray | None]:
    """A list column's rows as int64 arrays (None: a null row, or one holding a null), read once per
    row group from its Arrow buffers: no Python int per value. Other types go through Python lists."""
    import pyarrow as pa

    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    listed = pa.types.is_list(array.type) or pa.types.is_large_list(array.type)
    kind = array.type.value_type if listed else None
    if kind is None or not (pa.types.is_integer(kind) or pa.types.is_boolean(kind)):  # as _learned reads them
        return [None if row is None or None in row else row for row in array.to_pylist()]
    values = array.values  # the whole child: the offsets already count the array's own offset
    numbers = values.fill_null(False if pa.types.is_boolean(kind) else 0).to_numpy(zero_copy_only=False)
    numbers = numbers.astype(np.int64, copy=False)
    offsets = np.asarray(array.offsets, dtype=np.int64)
    nulls = np.zeros(len(values) + 1, dtype=np.int64)
    if values.null_count:
        np.cumsum(np.asarray(values.is_null()), out=nulls[1:])
    held = (nulls[offsets[1:]] - nulls[offsets[:-1]]) > 0
    absent = np.asarray(array.is_null()) | held
    return [None if absent[k] else numbers[offsets[k] : offsets[k + 1]] for k in range(len(array))]


def _learned(values: np.ndarray | list[Any] | None, ids: np.ndarray, name: str, where: str) -> np.ndarray:
    """Which ids of a row are learned, from its labels or mask; a DataError saying what is wrong."""
    if values is None:
        raise DataError(f"{where}: column {name!r} is null or holds a null", skip_hint=SKIP_HINT)
    if len(values) != len(ids):
        raise DataError(f"{where}: {len(values)} values in {name!r} for {len(ids)} ids", skip_hint=SKIP_HINT)
    array = np.asarray(values, dtype=np.int64)
    if name == "labels":
        learned = array != -100
        wrong = np.flatnonzero(learned & (array != ids))
        if wrong.size:
            k = int(wrong[0])
            raise DataError(f"{where}: label {array[k]} at position {k} is neither -100 nor its id {ids[k]} (labels "
                            "are the ids, -100 where nothing is learned; the model shifts them)", skip_hint=SKIP_HINT)
        return learned
    wrong = np.flatnonzero((array != 0) & (array != 1))
    if wrong.size:
        raise DataError(f"{where}: {name!r} holds {array[wrong[0]]} at position {wrong[0]}; a mask is 0 or 1",
                        skip_hint=SKIP_HINT)
    return array == 1
