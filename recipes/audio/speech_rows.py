"""The rows of a speech manifest or table: where each clip is, what is said, how long it says it lasts.

    rows = manifest_rows("train.jsonl", "audio", "text", on_error="raise")
    rows.places[3], rows.refs[3], rows.texts[3], rows.stated[3]    # line 4, "clips/4.flac", "...", 2.35

JSONL (NeMo's ``audio_filepath`` read for ``audio``) and CSV manifests give a line number per row,
Parquet and ``datasets.Dataset`` tables a row number. A row whose transcript is missing holds its
DataError in ``texts``, raised or skipped where the dataset is built; a line that does not parse at
all is raised or skipped here. ``stated`` is the row's ``duration`` in seconds: NaN where it gives
none, and ``raw`` keeps what it gave where that is not a finite number (named in messages).
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recipes.core import DataError, skip_or_raise, storage

NEMO_AUDIO_FIELD = "audio_filepath"  # what NeMo's manifests call the audio field
DURATION_FIELD = "duration"  # a manifest's stated length in seconds (NeMo's)


@dataclass
class Rows:
    """A manifest's rows as columns; ``clean`` is False where a line was dropped, a transcript is
    missing, a clip is not a path or a duration is not a number (such a build is not kept in an index)."""

    places: list[int] = field(default_factory=list)
    refs: list[Any] = field(default_factory=list)
    texts: list[Any] = field(default_factory=list)
    stated: list[float] = field(default_factory=list)
    raw: dict[int, Any] = field(default_factory=dict)  # row -> a duration that is not a finite number
    clean: bool = True

    def add(self, place: int, ref: Any, text: Any, duration: Any) -> None:
        row = len(self.places)
        seconds = stated_seconds(duration)
        if seconds is None:
            self.raw[row], seconds = duration, math.nan
        self.places.append(place)
        self.refs.append(ref)
        self.texts.append(text)
        self.stated.append(seconds)
        self.clean = self.clean and isinstance(text, str) and isinstance(ref, str) and row not in self.raw


def stated_seconds(value: Any) -> float | None:
    """A manifest's ``duration`` as seconds: NaN where it gives none, None where it is not a finite number."""
    if value is None or value == "":
        return math.nan
    if isinstance(value, str):  # a CSV's cell
        try:
            value = float(value)
        except ValueError:
            return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def manifest_rows(path: Any, audio_field: str, text_field: str, on_error: str) -> Rows:
    """The rows of a JSONL or CSV manifest; a line that cannot be read at all is raised or
    (``"skip"``) dropped here."""
    suffix = Path(os.fspath(path)).suffix.lower()
    if suffix not in (".jsonl", ".csv"):
        raise ValueError(f"{storage.shown(path)}: SpeechDataset reads .jsonl, .csv, .parquet or a datasets.Dataset, "
                         f"not {suffix or 'a file without a suffix'}")
    data, name, rows = storage.read_bytes(path), storage.shown(path), Rows()
    if suffix == ".csv":
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as error:
            line = data[: error.start].count(b"\n") + 1
            raise DataError(f"{name} line {line}: not UTF-8 ({error.reason}); re-save the file as UTF-8") from None
        reader = csv.DictReader(io.StringIO(text, newline=""))
        for row in reader:
            rows.add(reader.line_num, row.get(audio_field), _transcript(row, text_field, name, reader.line_num),
                     row.get(DURATION_FIELD))
        return rows
    nemo = audio_field == "audio"
    for line, raw in enumerate(data.split(b"\n"), 1):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw)
        except UnicodeDecodeError as error:
            rows.clean = False
            skip_or_raise(DataError(f"{name} line {line}: not UTF-8 ({error.reason})"), on_error)
            continue
        except ValueError as error:
            rows.clean = False
            skip_or_raise(DataError(f"{name} line {line}: not JSON ({error})"), on_error)
            continue
        if not isinstance(row, dict):
            rows.clean = False
            skip_or_raise(DataError(f"{name} line {line}: a JSON object per line expected"), on_error)
            continue
        audio = row.get(audio_field, row.get(NEMO_AUDIO_FIELD) if nemo else None)
        rows.add(line, audio, _transcript(row, text_field, name, line), row.get(DURATION_FIELD))
    return rows


def _transcript(row: dict[str, Any], field: str, name: str, line: int) -> str | DataError:
    text = row.get(field)
    if not isinstance(text, str):
        return DataError(f"{name} line {line}: the transcript {field!r} is missing or not a string ({sorted(row)})")
    return text


def table_rows(source: Any, audio_field: str, text_field: str) -> tuple[str, Rows]:
    """``(name, rows)`` of Parquet or a ``datasets.Dataset`` (its ``duration`` column where it has one);
    the audio bytes are held in memory, as a manifest's rows are (a corpus larger than memory:
    shard it, AudioShards)."""
    if isinstance(source, (str, os.PathLike)):
        import pyarrow.parquet as pq

        name, table = storage.shown(source), pq.read_table(os.fspath(source), memory_map=True)
    elif not hasattr(source, "with_format"):
        raise ValueError(f"SpeechDataset reads a .jsonl, .csv or .parquet path or a datasets.Dataset, not a "
                         f"{type(source).__name__}; read a list of Parquet files with "
                         "datasets.load_dataset('parquet', data_files=[...])")
    else:
        # the rows as the dataset shows them (after select, shuffle or filter), as one Arrow table
        name, table = f"{type(source).__name__}", source.with_format("arrow")[:]
    missing = [column for column in (audio_field, text_field) if column not in table.column_names]
    if missing:
        raise ValueError(f"{name}: no column {missing}; its columns are {table.column_names}")
    audio, texts = table.column(audio_field).to_pylist(), table.column(text_field).to_pylist()
    durations = (table.column(DURATION_FIELD).to_pylist() if DURATION_FIELD in table.column_names
                 else [None] * len(texts))
    rows = Rows()
    for row, (clip, text, duration) in enumerate(zip(audio, texts, durations)):
        bad = None if isinstance(text, str) else DataError(f"{name} row {row}: the transcript is not a string")
        rows.add(row, clip, text if bad is None else bad, duration)
    return name, rows
