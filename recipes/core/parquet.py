"""Parquet files and Arrow datasets: listing them, their footers and row counts, reading rows and
row groups a bounded number of bytes at a time, and the columns a reader needs.

``from recipes.core import parquet``, then ``parquet.iter_rows(...)``: one name of the facade for these, each
documented on the reference page and loaded on first use.
"""

# ruff: noqa: F401  (the TYPE_CHECKING block below imports each name for static readers)
from __future__ import annotations

from typing import TYPE_CHECKING

from recipes.core.contracts.lazy import lazy_names

# public name -> the module of recipes.core that defines it
HOMES = {
    "MAX_ROW_GROUP_BYTES": "sources.parquet_files",
    "PARQUET_SUFFIX": "sources.parquet_files",
    "TablePart": "sources.parquet_files",
    "check_columns": "sources.parquet_files",
    "columns_of": "sources.parquet_files",
    "entry_name": "sources.parquet_files",
    "fingerprint": "sources.parquet_files",
    "is_arrow_dataset": "sources.parquet_files",
    "is_parquet": "sources.parquet_files",
    "iter_rows": "sources.parquet_files",
    "iter_tables": "sources.parquet_files",
    "parquet_entries": "sources.parquet_files",
    "parquet_file": "sources.parquet_files",
    "parquet_listing": "sources.parquet_files",
    "read_footers": "sources.parquet_files",
    "require_pyarrow": "sources.parquet_files",
    "row_counts": "sources.parquet_files",
}
__all__ = sorted(HOMES)
__getattr__, __dir__ = lazy_names(__name__, HOMES)

if TYPE_CHECKING:  # where each name lives, for static readers
    from recipes.core.sources.parquet_files import (
        MAX_ROW_GROUP_BYTES,
        PARQUET_SUFFIX,
        TablePart,
        check_columns,
        columns_of,
        entry_name,
        fingerprint,
        is_arrow_dataset,
        is_parquet,
        iter_rows,
        iter_tables,
        parquet_entries,
        parquet_file,
        parquet_listing,
        read_footers,
        require_pyarrow,
        row_counts,
    )
