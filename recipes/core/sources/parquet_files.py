"""Parquet sources read row group by row group with pyarrow: files, lists, globs, URLs, or a Hugging Face Dataset.

    entries = parquet_entries("data/train-*.parquet")          # Hub-style shards, in name order
    sizes = row_counts(entries)                                 # from the footers, nothing decoded
    for row, where, record in iter_rows(entries, ["text", "label"], sizes):
        record["text"], where                                   # 'Great pan.', 'train-00000-of-00002.parquet row 0'
    for part in iter_tables(entries, ["input_ids"], sizes): ...   # Arrow, a row group at a time

A source is a ``.parquet`` path or fsspec URL, a glob of them (``*``, ``?``, ``[``), a list of
those, or a Hugging Face ``datasets.Dataset``. A Dataset is read through its public Arrow view
(``with_format("arrow")``), in batches, never row by row, and ``datasets`` is never imported here.
Rows are numbered from 0, across the entries in order (``row``); messages name the file and
the row within it. Only one row group's values are Python objects at a time, so a file of any
size reads in flat memory. A column that a file lacks is a :class:`DataError` naming the file
and listing the columns it has. A row group whose footer declares more than
``max_row_group_bytes`` (``MAX_ROW_GROUP_BYTES``, 256 MiB, by default) uncompressed in the
columns read, 8 bytes a value at least, is a :class:`DataError` naming the file and the row
group, before it is read: a 16 KB file can declare 400 MB of one repeated byte, a 121 KB one 67M
nulls, and reading either costs gigabytes.

pyarrow is an extra (``pip install ".[parquet]"`` from a clone, or ``pip install pyarrow``); without it the first Parquet read says so.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from recipes.core.contracts.errors import DataError
from recipes.core.contracts.read_options import MAX_ROW_GROUP_BYTES
from recipes.core.sources.storage import SIZE_THREADS, glob_sizes, has_glob, is_url, open_stream, shown, stream_size, suffix

PARQUET_SUFFIX = ".parquet"
TABLE_BATCH_ROWS = 1024  # rows per batch of an in-memory Arrow table (it has no row groups of its own)


def require_pyarrow() -> Any:
    """``pyarrow.parquet``, or an ImportError that names the pip command."""
    try:
        import pyarrow.parquet as pq
    except ImportError as error:
        raise ImportError(f'reading Parquet needs pyarrow, which is missing ({error}): pip install pyarrow') from None
    return pq


def is_arrow_dataset(source: Any) -> bool:
    """A Hugging Face ``datasets.Dataset`` (Arrow-backed), recognised without importing ``datasets``."""
    return type(source).__module__.split(".")[0] == "datasets" and callable(getattr(source, "with_format", None))


def is_parquet(source: Any) -> bool:
    """True for a ``.parquet`` path, URL or glob, a non-empty list of them, or a ``datasets.Dataset``."""
    if is_arrow_dataset(source):
        return True
    if isinstance(source, (str, os.PathLike)):
        return suffix(source) == PARQUET_SUFFIX
    return isinstance(source, (list, tuple)) and bool(source) and all(is_parquet(item) for item in source)


def parquet_entries(source: Any, storage_options: dict[str, Any] | None = None) -> list[Any]:
    """The files of ``source`` in order (globs expanded and sorted), or ``[dataset]`` for a Dataset.

    Raises:
        FileNotFoundError: a local file is missing, or a glob matches nothing.
    """
    return parquet_listing(source, storage_options)[0]


def parquet_listing(source: Any, storage_options: dict[str, Any] | None = None) -> tuple[list[Any], list[int | None]]:
    """``(entries, sizes)``: :func:`parquet_entries`, and each entry's size in bytes where a glob's
    listing gave it (an object store's), None elsewhere: :func:`read_footers` asks no size it has."""
    if is_arrow_dataset(source):
        return [source], [None]
    items = [source] if isinstance(source, (str, os.PathLike)) else list(source)
    entries: list[Any] = []
    sizes: list[int | None] = []
    for item in items:
        if not is_arrow_dataset(item) and has_glob(item):
            found, listed = _expand_glob(os.fspath(item), storage_options)
        elif is_arrow_dataset(item) or is_url(item):
            found, listed = [item], [None]
        elif not Path(item).is_file():
            raise FileNotFoundError(f"Parquet file {item} does not exist")
        else:
            found, listed = [Path(item)], [None]
        entries.extend(found)
        sizes.extend(listed)
    return entries, sizes


def _expand_glob(pattern: str, storage_options: dict[str, Any] | None) -> tuple[list[Any], list[int | None]]:
    names, sizes = glob_sizes(pattern, storage_options)
    if not names:
        raise FileNotFoundError(f"no Parquet file matches {shown(pattern)}")
    return [name if is_url(name) else Path(name) for name in names], sizes


def entry_name(entry: Any) -> str:
    """What messages call ``entry``: the file (without credentials), or the Dataset."""
    return f"datasets.Dataset ({entry.num_rows} rows)" if is_arrow_dataset(entry) else shown(entry)


@contextmanager
def parquet_file(entry: Any, storage_options: dict[str, Any] | None = None, size: int | None = None) -> Iterator[Any]:
    """A ``pyarrow.parquet.ParquetFile`` of a local path (memory-mapped) or an fsspec URL (read
    through :func:`recipes.core.sources.storage.open_stream`: faults are survived), closed after. A URL's
    ``size`` in bytes, if known, spares the request that asks it (the footer is read from the end)."""
    pq = require_pyarrow()
    with ExitStack() as stack:
        try:
            if is_url(entry):  # through the reader that reopens at the offset after a fault
                size = stream_size(entry, storage_options) if size is None else size  # or FileNotFoundError
                raw = stack.enter_context(open_stream(entry, storage_options=storage_options, size=size))
                file = stack.enter_context(pq.ParquetFile(raw))
            else:
                file = stack.enter_context(pq.ParquetFile(entry, memory_map=True))
        except (OSError, ValueError) as error:  # pyarrow's ArrowInvalid is a ValueError
            if isinstance(error, FileNotFoundError):
                raise FileNotFoundError(f"Parquet file {shown(entry)} does not exist") from None
            raise DataError(f"{shown(entry)}: not a readable Parquet file ({type(error).__name__}: {error})") from None
        yield file


def _table(dataset: Any) -> Any:
    # the Dataset's public Arrow view: its rows (after select/shuffle/filter), as a pyarrow Table
    return dataset.with_format("arrow")[:]


def columns_of(entry: Any, storage_options: dict[str, Any] | None = None) -> list[str]:
    """The column names of a Parquet file (from its footer) or a Dataset."""
    if is_arrow_dataset(entry):
        return list(entry.column_names)
    with parquet_file(entry, storage_options) as file:
        return list(file.schema_arrow.names)


def check_columns(entry: Any, wanted: dict[str, str | None], storage_options: dict[str, Any] | None = None) -> None:
    """Raise a DataError naming the file and its columns unless it has every ``{option: column}`` wanted."""
    _check_present(entry, wanted, columns_of(entry, storage_options))


def _check_present(entry: Any, wanted: dict[str, str | None], present: list[str]) -> None:
    missing = {option: name for option, name in wanted.items() if name is not None and name not in present}
    if missing:
        raise DataError(
            f"{entry_name(entry)}: no column {sorted(missing.values())} (columns: {present}); "
            f"pass {' / '.join(f'{option}=...' for option in missing)} naming existing columns"
        )


def read_footers(
    entries: Sequence[Any],
    wanted: dict[str, str | None],
    storage_options: dict[str, Any] | None = None,
    check: Callable[[Any, Any], None] | None = None,
    sizes: Sequence[int | None] | None = None,
) -> tuple[list[int], list[int | None]]:
    """``(rows, bytes)`` of each entry, from one read of its footer, after checking that it has
    every ``{option: column}`` wanted (:func:`check_columns`' DataError) and, if given, calling
    ``check(entry, ParquetFile)`` (``check(entry, None)`` for a Dataset) to check more of it. Bytes
    are None for a local file or a Dataset. ``sizes``: the entries' sizes in bytes where known
    (:func:`parquet_listing`), None where not. URLs are read ``SIZE_THREADS`` at a time: each is a
    size asked for (unless known) and a footer fetched, and 10,000 files one after another take minutes."""

    def footer(entry: Any, known: int | None) -> tuple[int, int | None]:
        if is_arrow_dataset(entry):
            check_columns(entry, wanted)
            if check is not None:
                check(entry, None)
            return entry.num_rows, None
        size = (stream_size(entry, storage_options) if known is None else known) if is_url(entry) else None
        with parquet_file(entry, storage_options, size) as file:
            _check_present(entry, wanted, list(file.schema_arrow.names))
            if check is not None:
                check(entry, file)
            return file.metadata.num_rows, size

    sizes = [None] * len(entries) if sizes is None else sizes
    if sum(map(is_url, entries)) < 2:
        footers = [footer(entry, known) for entry, known in zip(entries, sizes)]
    else:
        with ThreadPoolExecutor(SIZE_THREADS) as pool:
            footers = list(pool.map(footer, entries, sizes))
    return [rows for rows, _ in footers], [size for _, size in footers]


def row_counts(entries: Sequence[Any], storage_options: dict[str, Any] | None = None) -> list[int]:
    """Rows of each entry, read from the Parquet footers (or the Dataset's length)."""
    counts = []
    for entry in entries:
        if is_arrow_dataset(entry):
            counts.append(entry.num_rows)
        else:
            with parquet_file(entry, storage_options) as file:
                counts.append(file.metadata.num_rows)
    return counts


def iter_rows(
    entries: Sequence[Any], columns: Sequence[str], sizes: Sequence[int], **read: Any
) -> Iterator[tuple[int, str, dict[str, Any]]]:
    """``(row, "file row N", {column: value})`` for each row :func:`iter_tables` reads, ``read``
    being its keyword options (``start``, ``stop``, ``storage_options``, ``max_row_group_bytes``,
    ``byte_sizes``). Values are Python objects (``str``, ``bytes``, ``list``, ``dict`` for a
    struct such as Hugging Face's Image), a row group converted at a time."""
    for part in iter_tables(entries, columns, sizes, **read):
        values = part.table.to_pydict()  # one row group at a time: memory stays flat
        for offset in range(part.table.num_rows):
            row = part.first + offset
            yield part.row + offset, f"{part.name} row {row}", {column: values[column][offset] for column in columns}


class TablePart(NamedTuple):
    """Consecutive rows of one entry, as Arrow: where they are, and the columns read."""

    row: int  # the first row's number across the entries
    name: str  # the entry, as messages name it (:func:`entry_name`)
    group: int | None  # the Parquet row group the rows are from (None for a Dataset)
    first: int  # the first row's number within the entry
    table: Any  # a pyarrow Table or RecordBatch of the columns read


def iter_tables(
    entries: Sequence[Any],
    columns: Sequence[str],
    sizes: Sequence[int],
    *,
    start: int = 0,
    stop: int | None = None,
    storage_options: dict[str, Any] | None = None,
    max_row_group_bytes: int = MAX_ROW_GROUP_BYTES,
    byte_sizes: Sequence[int | None] | None = None,
) -> Iterator[TablePart]:
    """The rows ``start <= row < stop`` of ``entries`` as Arrow, a :class:`TablePart` per row group
    (a Dataset: per batch of ``TABLE_BATCH_ROWS``), for columnar work without Python objects.

    ``sizes`` are the entries' row counts (:func:`row_counts`); only the row groups that hold
    wanted rows are read, and only the named ``columns`` of them. ``byte_sizes``
    (:func:`read_footers`), if given, spare each URL's request for its size.

    Raises:
        DataError: naming the file and row group, when its footer declares more than
            ``max_row_group_bytes`` uncompressed in ``columns`` (checked before reading it).
    """
    stop = sum(sizes) if stop is None else stop
    byte_sizes = [None] * len(entries) if byte_sizes is None else byte_sizes
    base = 0
    for entry, size, file_bytes in zip(entries, sizes, byte_sizes):
        low, high = max(start, base) - base, min(stop, base + size) - base
        if low < high:
            name = entry_name(entry)
            limits = (max_row_group_bytes, file_bytes)
            for group, first, table in _batches(entry, list(columns), low, high, storage_options, *limits):
                yield TablePart(base + first, name, group, first, table)
        base += size


def _batches(
    entry: Any,
    columns: list[str],
    low: int,
    high: int,
    storage_options: dict[str, Any] | None,
    max_row_group_bytes: int = MAX_ROW_GROUP_BYTES,
    file_bytes: int | None = None,
) -> Iterator[tuple[int | None, int, Any]]:
    """``(row group, first row, Table or RecordBatch)`` covering rows ``low:high`` of one entry, a
    row group at a time (a Dataset has none: None). ``file_bytes``: a URL's size, if known."""
    if is_arrow_dataset(entry):
        # only this reader's rows and the columns asked for: [:] would gather every row and column
        table = entry.with_format("arrow", columns=columns)[low:high]
        for batch in table.to_batches(max_chunksize=TABLE_BATCH_ROWS):
            yield None, low, batch
            low += batch.num_rows
        return
    with parquet_file(entry, storage_options, file_bytes) as file:
        first = 0
        for group in range(file.metadata.num_row_groups):
            count = file.metadata.row_group(group).num_rows
            if first + count > low and first < high:
                _check_declared_size(file.metadata.row_group(group), columns, entry, group, max_row_group_bytes)
                try:
                    table = file.read_row_group(group, columns=columns)
                except (OSError, ValueError) as error:  # a corrupt page (ArrowInvalid is a ValueError)
                    raise DataError(f"{entry_name(entry)}: cannot read row group {group} ({type(error).__name__}: {error})") from None
                cut = max(low - first, 0)
                table = table.slice(cut, min(high, first + count) - first - cut)
                yield group, first + cut, table
            first += count
            if first >= high:
                return


def _check_declared_size(group_meta: Any, columns: list[str], entry: Any, group: int, limit: int) -> None:
    """Refuse a row group whose footer declares more than ``limit`` bytes uncompressed in ``columns``,
    counting each value as a pointer at least (8 bytes): 67M nulls take 114 KB in a file."""
    declared = 0
    for index in range(group_meta.num_columns):
        chunk = group_meta.column(index)
        # a leaf's path is "column" or "column.field..." (a struct, a list): it belongs to the column read
        if any(chunk.path_in_schema == name or chunk.path_in_schema.startswith(name + ".") for name in columns):
            declared += chunk.total_uncompressed_size
    declared = declared or group_meta.total_byte_size  # no leaf matched by name: the whole group's size
    rows = group_meta.num_rows
    if declared + 8 * rows * len(columns) > limit:
        raise DataError(
            f"{entry_name(entry)}: row group {group} declares {declared:,} bytes uncompressed and {rows:,} rows in "
            f"columns {columns}, over the limit of {limit:,} bytes once read (max_row_group_bytes=): raise the limit "
            "if the file is trusted and memory allows, or write it with smaller row groups "
            "(pyarrow.parquet.write_table(..., row_group_size=...))"
        )


def fingerprint(entries: Sequence[Any], storage_options: dict[str, Any] | None = None) -> bytes:
    """A digest of the entries' content, for cache keys: file bytes (read in blocks), or a
    Dataset's Arrow buffers. Any change to a byte is a new digest."""
    digest = hashlib.sha256()
    for entry in entries:
        if is_arrow_dataset(entry):
            for batch in _table(entry).to_batches():
                for column in batch.columns:
                    digest.update(repr((column.type, column.offset, len(column))).encode())
                    for buffer in column.buffers():
                        digest.update(b"-" if buffer is None else memoryview(buffer))
            continue
        with open_stream(entry, storage_options=storage_options) as file:
            while block := file.read(2**20):
                digest.update(block)
    return digest.digest()
