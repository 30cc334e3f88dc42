"""Speech recognition data: clips with transcripts from a manifest, tokenised by the text rules.

    dataset = SpeechDataset("train_manifest.jsonl", "tokenizer.json", sample_rate=16000, max_seconds=30)
    loader = audio_loader(dataset, max_seconds=320, device="cuda", seed=0)   # a seconds budget per batch
    for batch in loader:   # audio [B,T], audio_lengths, attention_mask, input_ids [B,L], lengths, text, index
        loss = ctc_loss(model(batch["audio"]), batch["input_ids"], out_lengths, batch["lengths"])

Sources: a JSONL manifest (NeMo's ``{"audio_filepath", "duration", "text"}`` or ``{"audio",
"text"}``), a CSV with a header, Parquet or a Hugging Face ``datasets.Dataset`` whose audio column
holds ``Audio`` structs ``{"bytes", "path"}`` (or paths). Paths are relative to ``audio_root``
(default: the manifest's folder); one that leaves it is refused. Each clip's header is read once
(no decode) for :attr:`durations`; a manifest's own ``duration`` is not trusted, and one that disagrees
with the header by more than the decoder's tolerance is a :class:`ManifestDurationWarning` naming the
row (strict: ``warnings.simplefilter("error", ManifestDurationWarning)``). Transcripts are
tokenised once, at construction, with the tokenizer's truncation (special tokens kept), as
``TokenizedTextDataset`` does.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from recipes.audio.decoding import audio_options, decode, duration_tolerance, probe
from recipes.core.contracts.arrays import StringArray
from recipes.core.contracts.errors import DataError, SkippedRows, check_on_error, skip_or_raise
from recipes.core.contracts.parameters import check_count
from recipes.core.sources.paths import resolve_under
from recipes.core.contracts.states import sampled_digest
from recipes.core.sources.storage import basename, read_bytes, shown

NEMO_AUDIO_FIELD = "audio_filepath"  # what NeMo's manifests call the audio field
DURATION_FIELD = "duration"  # a manifest's stated length in seconds (NeMo's): checked against the header


class ManifestDurationWarning(UserWarning):
    """A manifest's ``duration`` disagrees with its clip's header; the message names the row. Make it an
    error with ``warnings.simplefilter("error", ManifestDurationWarning)`` (strict)."""


class SpeechDataset(Dataset):
    """Clips and transcripts -> ``{"audio" float32 [C, N], "input_ids" int64 [L], "text" str, "index" int}``.

    Args:
        source: a ``.jsonl`` or ``.csv`` manifest, a ``.parquet`` file, or a ``datasets.Dataset``.
        tokenizer: a ``tokenizers.Tokenizer`` or a tokenizer.json path; None: no ``input_ids``.
        sample_rate: every clip is resampled to this rate.
        text_field: the transcript's field or column.
        audio_field: the clip's field or column (a path, or an ``Audio`` struct in Parquet); a
            JSONL row without it may use NeMo's ``audio_filepath``.
        max_seconds: the per-sample limit that bounds memory (default :data:`MAX_SECONDS`); a
            longer clip is a DataError at construction (``on_error="skip"``: left out).
        max_length: keep at most this many ids per transcript, special tokens included.
        num_channels: 1 mixes to mono (the mean of the channels), None keeps each file's.
        on_error: ``"raise"`` or ``"skip"``: a row that does not parse, a transcript that is not
            UTF-8 or not a string, a clip that cannot be read; named by file and line (or row).
        audio_root: the folder paths are relative to (default: the manifest's folder).
    """

    per_sample_fields = ("durations",)  # what a mixture lays end to end (recipes.core.loading.mixing)

    def __init__(
        self,
        source: str | os.PathLike | Any,
        tokenizer: Any = None,
        *,
        sample_rate: int = 16000,
        text_field: str = "text",
        audio_field: str = "audio",
        max_seconds: float | None = None,
        max_length: int | None = None,
        num_channels: int | None = 1,
        on_error: str = "raise",
        audio_root: str | os.PathLike | None = None,
    ) -> None:
        self.sample_rate, self.num_channels, self.max_seconds = audio_options(
            "SpeechDataset", sample_rate=sample_rate, num_channels=num_channels, max_seconds=max_seconds)
        self.on_error = check_on_error(on_error)
        check_count("max_length", max_length, owner="SpeechDataset")
        self._unit = "row" if _is_table(source) else "line"  # what places count, for messages
        with SkippedRows("") as skipped:
            if _is_table(source):
                self.name, rows = _table_rows(source, audio_field, text_field)
                root = audio_root
            else:
                self.name = shown(source)
                rows = _manifest_rows(source, audio_field, text_field, on_error)
                root = Path(source).parent if audio_root is None else audio_root
            self.audio_root = None if root is None else os.fspath(root)
            skipped.name = self.name
            refs, texts, seconds, where = [], [], [], []
            for place, ref, text, stated in rows:
                try:
                    if isinstance(text, DataError):
                        raise text
                    audio = self._resolve(ref, place)
                    info = probe(audio, self._describe(place, ref))
                    if info.duration > self.max_seconds:
                        raise DataError(f"{self._describe(place, ref)}: {info.duration:.2f} s is over "
                                        f"max_seconds={self.max_seconds:g}; raise max_seconds")
                except DataError as error:
                    skip_or_raise(error, self.on_error)
                    continue
                check_stated_duration(stated, info.duration, self._describe(place, ref))
                refs.append(ref)
                texts.append(text)
                seconds.append(info.duration)
                where.append(place)
            skipped.check(len(refs))
        # numpy-backed where the rows are paths: forked workers share them instead of copying them
        self._refs = StringArray(refs) if all(isinstance(ref, str) for ref in refs) else refs
        self.texts, self.places = StringArray(texts), np.asarray(where, dtype=np.int64)
        self.durations = np.asarray(seconds, dtype=np.float64)
        self.tokens, self._pad_id = None, None
        if tokenizer is not None:
            from recipes.core.tokens.encoding import TruncatingEncoder, encode_texts, find_pad_id, load_tokenizer

            tokenizer = load_tokenizer(tokenizer)
            self.tokens = encode_texts(TruncatingEncoder(tokenizer, max_length), texts)  # the list, read once
            self._pad_id = find_pad_id(tokenizer)

    @property
    def pad_id(self) -> int | None:
        """The id ``audio_collate`` pads transcripts with (the tokenizer's; None without one)."""
        return self._pad_id if self._pad_id is not None or self.tokens is None else 0

    def _resolve(self, ref: Any, place: int) -> str | bytes:
        """A row's clip: the bytes of an ``Audio`` struct, or its path checked under ``audio_root``."""
        if isinstance(ref, dict):
            if ref.get("bytes"):
                return ref["bytes"]
            ref = ref.get("path")
        if not isinstance(ref, str) or not ref:
            raise DataError(f"{self._describe(place, ref)}: no audio path or bytes")
        if self.audio_root is None:
            raise DataError(f"{self._describe(place, ref)}: a path without bytes needs audio_root=the folder it is in")
        if os.path.isabs(ref):  # NeMo writes absolute paths: accepted inside audio_root
            base, path = Path(self.audio_root).resolve(), Path(ref).resolve()
            if not path.is_relative_to(base):
                raise DataError(f"{self._describe(place, ref)}: {ref!r} is outside audio_root {base}; pass the "
                                "folder that holds the clips as audio_root")
            return str(path)
        return str(resolve_under(self.audio_root, ref, source=self._describe(place, None)))

    def _describe(self, place: int, ref: Any) -> str:
        name = ref.get("path") if isinstance(ref, dict) else ref
        return f"{self.name} {self._unit} {place}" + (f" ({name})" if name else "")

    def source(self, index: int) -> str | bytes:
        """Sample ``index``'s clip as the decoder takes it: its path (under ``audio_root``) or its bytes."""
        return self._resolve(self._refs[index], int(self.places[index]))

    def describe(self, index: int) -> str:
        """Where sample ``index`` comes from, for messages: manifest line (or row) and clip."""
        return self._describe(int(self.places[index]), self._refs[index])

    def state_source(self) -> str:
        """What a loader state names as this data: the manifest's file name, the clip count and a
        digest of the header durations (which the duration plans batch by)."""
        return f"{basename(self.name)}: {len(self)} clips, durations {sampled_digest(self.durations)}"

    def batch_contract(self) -> dict[str, Any]:
        """What a mixed dataset must share with this one (recipes.core.loading.mixing)."""
        return {"collate": "audio_collate", "sample_rate": self.sample_rate, "num_channels": self.num_channels,
                "pad_id": self._pad_id}

    def __len__(self) -> int:
        return len(self.durations)

    def read_audio(self, index: int) -> torch.Tensor:
        """Sample ``index``'s clip, float32 ``[C, N]``; override to read from elsewhere."""
        return decode(self.source(index), self.describe(index), sample_rate=self.sample_rate,
                      num_channels=self.num_channels, max_seconds=self.max_seconds,
                      expected=float(self.durations[index]))

    def __getitem__(self, index: int) -> dict[str, Any] | None:
        try:
            audio = self.read_audio(index)
        except DataError as error:
            return skip_or_raise(error, self.on_error)
        item: dict[str, Any] = {"audio": audio, "text": self.texts[index], "index": int(index)}
        if self.tokens is not None:
            item["input_ids"] = self.tokens.tensor(index)
        return item

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, {len(self)} clips, {self.durations.sum():.1f} s)"


def _is_table(source: Any) -> bool:
    return not isinstance(source, (str, os.PathLike)) or os.fspath(source).endswith(".parquet")


def _manifest_rows(path: Any, audio_field: str, text_field: str, on_error: str) -> list[tuple[int, Any, Any, Any]]:
    """``(line, audio, text or DataError, stated duration or None)`` of a JSONL or CSV manifest; a line
    that cannot be read at all is raised or (``"skip"``) dropped here."""
    suffix = Path(os.fspath(path)).suffix.lower()
    if suffix not in (".jsonl", ".csv"):
        raise ValueError(f"{shown(path)}: SpeechDataset reads .jsonl, .csv, .parquet or a datasets.Dataset, "
                         f"not {suffix or 'a file without a suffix'}")
    data, name, rows = read_bytes(path), shown(path), []
    if suffix == ".csv":
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as error:
            line = data[: error.start].count(b"\n") + 1
            raise DataError(f"{name} line {line}: not UTF-8 ({error.reason}); re-save the file as UTF-8") from None
        reader = csv.DictReader(io.StringIO(text, newline=""))
        for row in reader:
            rows.append((reader.line_num, row.get(audio_field), _transcript(row, text_field, name, reader.line_num),
                         row.get(DURATION_FIELD)))
        return rows
    for line, raw in enumerate(data.split(b"\n"), 1):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw)
        except UnicodeDecodeError as error:
            skip_or_raise(DataError(f"{name} line {line}: not UTF-8 ({error.reason})"), on_error)
            continue
        except ValueError as error:
            skip_or_raise(DataError(f"{name} line {line}: not JSON ({error})"), on_error)
            continue
        if not isinstance(row, dict):
            skip_or_raise(DataError(f"{name} line {line}: a JSON object per line expected"), on_error)
            continue
        audio = row.get(audio_field, row.get(NEMO_AUDIO_FIELD) if audio_field == "audio" else None)
        rows.append((line, audio, _transcript(row, text_field, name, line), row.get(DURATION_FIELD)))
    return rows


def check_stated_duration(stated: Any, header: float, where: str) -> None:
    """Warn (:class:`ManifestDurationWarning`, naming ``where``) when a manifest's ``duration`` disagrees
    with the clip's header by more than :func:`recipes.audio.decoding.duration_tolerance`."""
    if stated is None or stated == "":
        return
    if isinstance(stated, str):  # a CSV's cell
        try:
            stated = float(stated)
        except ValueError:
            pass
    number = isinstance(stated, (int, float)) and not isinstance(stated, bool) and math.isfinite(stated)
    if not number or abs(stated - header) > duration_tolerance(header):
        warnings.warn(f"{where}: the manifest's duration {stated!r} disagrees with the header's {header:.3f} s; "
                      "the header's is used (batching and max_seconds follow it)", ManifestDurationWarning, stacklevel=3)


def _transcript(row: dict[str, Any], field: str, name: str, line: int) -> str | DataError:
    text = row.get(field)
    if not isinstance(text, str):
        return DataError(f"{name} line {line}: the transcript {field!r} is missing or not a string ({sorted(row)})")
    return text


def _table_rows(source: Any, audio_field: str, text_field: str) -> tuple[str, list[tuple[int, Any, Any, None]]]:
    """``(row, audio, text or DataError, None)`` of Parquet or a ``datasets.Dataset``; the audio bytes are
    held in memory, as the rows of a manifest are (a corpus larger than memory: shard it, AudioShards)."""
    if isinstance(source, (str, os.PathLike)):
        import pyarrow.parquet as pq

        name, table = shown(source), pq.read_table(os.fspath(source), memory_map=True)
    elif not hasattr(source, "with_format"):
        raise ValueError(f"SpeechDataset reads a .jsonl, .csv or .parquet path or a datasets.Dataset, not a "
                         f"{type(source).__name__}; read a list of Parquet files with "
                         "datasets.load_dataset('parquet', data_files=[...])")
    else:
        # the rows as the dataset shows them (after select, shuffle or filter), as one Arrow table
        name, table = f"{type(source).__name__}", source.with_format("arrow")[:]
    missing = [field for field in (audio_field, text_field) if field not in table.column_names]
    if missing:
        raise ValueError(f"{name}: no column {missing}; its columns are {table.column_names}")
    audio, texts = table.column(audio_field).to_pylist(), table.column(text_field).to_pylist()
    rows = []
    for row, (clip, text) in enumerate(zip(audio, texts)):
        bad = None if isinstance(text, str) else DataError(f"{name} row {row}: the transcript is not a string")
        rows.append((row, clip, text if bad is None else bad, None))
    return name, rows
