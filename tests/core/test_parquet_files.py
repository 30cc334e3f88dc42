"""recipes.core.sources.parquet_files and blob_file: row-group reads, globs, URLs, columns, the pyarrow extra."""

import gc
import pickle
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from recipes.core.sources.blob_file import BlobWriter, cached_blobs
from recipes.core.contracts.errors import DataError
from recipes.core.sources.parquet_files import (
    MAX_ROW_GROUP_BYTES,
    fingerprint,
    is_parquet,
    iter_rows,
    parquet_entries,
    read_footers,
    require_pyarrow,
    row_counts,
)

ROWS = [{"text": f"row {i} " + "x" * (i % 5), "n": i, "blob": bytes([i % 256]) * (i % 3)} for i in range(50)]


@pytest.fixture()
def shards(tmp_path):
    """Two Hub-style shards of ROWS (30 + 20 rows) in row groups of 7 rows."""
    table = pa.Table.from_pylist(ROWS)
    pq.write_table(table.slice(0, 30), tmp_path / "train-00000-of-00002.parquet", row_group_size=7)
    pq.write_table(table.slice(30), tmp_path / "train-00001-of-00002.parquet", row_group_size=7)
    return tmp_path


@pytest.mark.parametrize(("start", "stop"), [(0, 50), (3, 9), (7, 14), (25, 37), (30, 31), (49, 50), (10, 10)])
def test_row_ranges_across_row_groups_and_files_equal_the_rows_written(shards, start, stop):
    entries = parquet_entries(str(shards / "train-*.parquet"))
    sizes = row_counts(entries)
    assert sizes == [30, 20] and pq.ParquetFile(entries[0]).metadata.num_row_groups == 5
    got = list(iter_rows(entries, ["text", "n", "blob"], sizes, start=start, stop=stop))
    assert [row for row, _, _ in got] == list(range(start, stop))
    assert [record for _, _, record in got] == ROWS[start:stop]
    if got:
        local = start if start < 30 else start - 30
        assert got[0][1].endswith(f"-of-00002.parquet row {local}")


def test_a_glob_expands_in_name_order_and_a_glob_matching_nothing_is_named(shards):
    entries = parquet_entries([str(shards / "train-0000[10]-*.parquet")])
    assert [p.name for p in entries] == ["train-00000-of-00002.parquet", "train-00001-of-00002.parquet"]
    with pytest.raises(FileNotFoundError, match="no Parquet file matches .*valid-"):
        parquet_entries(str(shards / "valid-*.parquet"))
    with pytest.raises(FileNotFoundError, match="nope.parquet"):
        parquet_entries(shards / "nope.parquet")
    assert is_parquet(shards / "a.parquet") and is_parquet(["a.parquet", "b.PARQUET"]) and not is_parquet("a.jsonl")


def test_a_file_that_is_not_parquet_is_a_data_error_naming_it(tmp_path):
    (tmp_path / "broken.parquet").write_bytes(b"PAR1 this is not parquet")
    entries = parquet_entries(tmp_path / "broken.parquet")
    with pytest.raises(DataError, match="broken.parquet: not a readable Parquet file"):
        row_counts(entries)


def test_parquet_over_an_fsspec_url_reads_the_same_rows(shards):
    import fsspec

    fs = fsspec.filesystem("memory")
    for name in ("train-00000-of-00002.parquet", "train-00001-of-00002.parquet"):
        fs.pipe(f"/parquet-test/{name}", (shards / name).read_bytes())
    try:
        entries = parquet_entries("memory://parquet-test/train-*.parquet")
        assert entries == [f"memory:///parquet-test/train-0000{i}-of-00002.parquet" for i in (0, 1)]
        sizes = row_counts(entries)
        assert [record for _, _, record in iter_rows(entries, ["n"], sizes, start=5, stop=40)] == [
            {"n": row["n"]} for row in ROWS[5:40]
        ]
        assert fingerprint(entries) == fingerprint(parquet_entries(str(shards / "train-*.parquet")))
    finally:
        fs.rm("/parquet-test", recursive=True)


def test_read_footers_checks_columns_and_hands_each_open_footer_to_the_check(shards):
    entries = parquet_entries(str(shards / "train-*.parquet"))
    seen = []

    def check(entry, file):
        seen.append((entry, file.metadata.num_rows, file.schema_arrow.names))

    rows, sizes = read_footers(entries, {"text_field": "text"}, check=check)
    assert rows == [30, 20] and sizes == [None, None]  # a local file's size is never asked
    assert seen == [(entry, count, ["text", "n", "blob"]) for entry, count in zip(entries, rows)]
    with pytest.raises(DataError, match=r"no column \['label'\] \(columns: \['text', 'n', 'blob'\]\); pass label_field="):
        read_footers(entries, {"label_field": "label"}, check=seen.append)


def test_fingerprint_follows_the_content(shards, tmp_path):
    path = shards / "train-00001-of-00002.parquet"
    before = fingerprint([path])
    pq.write_table(pa.Table.from_pylist(ROWS[30:49]), path, row_group_size=7)
    assert fingerprint([path]) != before


def test_missing_pyarrow_names_the_pip_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(ImportError, match=r'pip install pyarrow'):
        require_pyarrow()


def test_blob_file_reads_back_each_entry_pickles_as_its_path_and_is_removed_with_its_owner():
    entries = [b"\xff\xd8abc", None, b"", bytes(range(256)) * 40]
    writer = BlobWriter()
    for data in entries:
        writer.add(data)
    blobs = writer.finish()
    assert [bytes(blobs[i]) for i in range(len(blobs))] == [b"\xff\xd8abc", b"", b"", bytes(range(256)) * 40]
    payload = pickle.dumps(blobs)
    assert len(payload) < 1000  # the path and offsets, not the 10 kB of content
    copy = pickle.loads(payload)
    assert bytes(copy[3]) == bytes(range(256)) * 40 and isinstance(copy.offsets, np.ndarray)
    folder = blobs.path.parent
    del blobs, copy
    gc.collect()
    assert not folder.exists()


def _bomb(path, size=8 * 2**20):
    """One row group: a column of ``size`` bytes of one repeated byte (a few KB on disk) and a small one."""
    rows = size // 2**16
    table = pa.table({"big": pa.array(["a" * 2**16] * rows), "n": pa.array(range(rows))})
    pq.write_table(table, path, compression="zstd", use_dictionary=False, row_group_size=rows)
    return path


def test_a_row_group_declaring_more_than_the_limit_is_refused_before_it_is_read(tmp_path, monkeypatch):
    path = _bomb(tmp_path / "bomb.parquet")
    declared = pq.ParquetFile(path).metadata.row_group(0).column(0).total_uncompressed_size
    assert path.stat().st_size < 64 * 2**10 < 8 * 2**20 <= declared  # the footer's claim, not the file's size
    entries = parquet_entries(path)

    def no_read(*args, **kwargs):
        raise AssertionError("the row group was read")

    with monkeypatch.context() as patch:
        patch.setattr(pq.ParquetFile, "read_row_group", no_read)
        with pytest.raises(DataError, match=rf"bomb.parquet: row group 0 declares {declared:,} bytes .*\(max_row_group_bytes=\)"):
            next(iter_rows(entries, ["big"], row_counts(entries), max_row_group_bytes=4 * 2**20))
    # only the columns read count; a raised limit reads the file
    small = list(iter_rows(entries, ["n"], row_counts(entries), max_row_group_bytes=4 * 2**20))
    assert [record["n"] for _, _, record in small] == list(range(128))
    row = next(iter_rows(entries, ["big"], row_counts(entries), max_row_group_bytes=declared + 2**20))
    assert row[2]["big"] == "a" * 2**16
    assert MAX_ROW_GROUP_BYTES == 256 * 2**20  # the documented default


def test_a_row_group_of_many_null_values_counts_each_value_read(tmp_path):
    pq.write_table(pa.table({"text": pa.nulls(2**20, pa.string()), "n": pa.array(range(2**20))}), tmp_path / "nulls.parquet",
                   row_group_size=2**20)
    meta = pq.ParquetFile(tmp_path / "nulls.parquet").metadata.row_group(0)
    assert meta.column(0).total_uncompressed_size < 2**15  # a million nulls declare a few KB
    entries = parquet_entries(tmp_path / "nulls.parquet")
    with pytest.raises(DataError, match=r"nulls.parquet: row group 0 declares [\d,]+ bytes uncompressed and 1,048,576 rows"):
        next(iter_rows(entries, ["text"], row_counts(entries), max_row_group_bytes=4 * 2**20))
    assert next(iter_rows(entries, ["text"], row_counts(entries), max_row_group_bytes=16 * 2**20))[2] == {"text": None}


def test_a_killed_writers_partial_blob_file_is_deleted_by_the_next_writer_of_its_key(tmp_path):
    orphan = tmp_path / "k1.4242.0a1b2c.tmp"  # what a writer killed mid-copy leaves: nobody holds its lock
    orphan.write_bytes(b"\xff\xd8" * 1000)
    other_key = tmp_path / "k2.4242.0a1b2c.tmp"
    other_key.write_bytes(b"x")
    writer = BlobWriter(tmp_path, "k1")
    assert not orphan.exists() and other_key.exists()  # another key's file is that key's writer's business
    writer.add(b"abc")
    blobs = writer.finish()
    assert bytes(blobs[0]) == b"abc" and bytes(cached_blobs(tmp_path, "k1")[0]) == b"abc"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["k1.blobs", "k1.offsets.npy", "k2.4242.0a1b2c.tmp"]
