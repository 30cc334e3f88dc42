"""Speech recognition data: clips with transcripts from a manifest, tokenised by the text rules.

    dataset = SpeechDataset("train_manifest.jsonl", "tokenizer.json", sample_rate=16000, max_seconds=30)
    loader = audio_loader(dataset, max_seconds=320, device="cuda", seed=0)   # a seconds budget per batch
    for batch in DevicePrefetcher(loader, "cuda"):   # audio [B,T], audio_lengths, input_ids [B,L], lengths, ...
        loss = ctc_loss(model(batch["audio"]), batch["input_ids"], out_lengths, batch["lengths"])

Sources: a JSONL manifest (NeMo's ``{"audio_filepath", "duration", "text"}`` or ``{"audio",
"text"}``), a CSV with a header, Parquet or a Hugging Face ``datasets.Dataset`` whose audio column
holds ``Audio`` structs ``{"bytes", "path"}`` (or paths). Paths are relative to ``audio_root``
(default: the manifest's folder); one that leaves it is refused. Durations
(``read_options=ReadOptions(durations=...)``): ``"headers"``, the default, reads each clip's header
once, at build (:mod:`recipes.audio.speech_index`: threads, and ``index_dir`` keeps them for the next
build), and a manifest ``duration`` that disagrees with it is a :class:`ManifestDurationWarning`
naming the row (strict: ``warnings.simplefilter("error", ManifestDurationWarning)``);
``"manifest"`` takes the manifest's durations and opens no clip until it is decoded, where a clip
that decodes to another length is a DataError naming row and clip (``on_error="skip"``: skipped with
a warning). Transcripts are tokenised once, at construction, with the tokenizer's truncation
(special tokens kept), as ``TokenizedTextDataset`` does.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from recipes.audio.decoding import (
    DURATION_RELATIVE_TOLERANCE,
    DURATION_TOLERANCE,
    AudioInfo,
    audio_options,
    decode,
)
from recipes.audio.speech_index import NO_FILE, HeaderIndex, read_headers
from recipes.audio.speech_rows import Rows, manifest_rows, table_rows
from recipes.core import (
    DataError,
    ReadOptions,
    SkippedRows,
    arrays,
    caches,
    check_on_error,
    checks,
    skip_or_raise,
    storage,
    tokenizing,
)

SPEECH_READ_OPTIONS = ("durations", "index_dir", "num_channels")  # what SpeechDataset reads of its ReadOptions
INDEX_VERSION = 1  # part of an index's key: bump when what it keeps changes


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
        on_error: ``"raise"`` or ``"skip"``: a row that does not parse, a transcript that is not
            UTF-8 or not a string, a clip that cannot be read or that decodes to another length
            than its row says; named by file and line (or row).
        audio_root: the folder paths are relative to (default: the manifest's folder).
        read_options: a :class:`recipes.core.ReadOptions`; this reads its ``durations``
            (``"headers"`` or ``"manifest"``: see the module docstring; docs/audio.md says when each
            fits), ``index_dir`` (each clip's header kept for the next build of the same manifest,
            read again for a clip whose size or modification time changed) and ``num_channels``
            (1, the default, mixes to mono, the mean of the channels; None keeps each file's).
    """

    fixed_point = False  # True: 16-bit PCM at the target rate as its int16 samples (audio_loader's view)

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
        on_error: str = "raise",
        audio_root: str | os.PathLike | None = None,
        read_options: ReadOptions | None = None,
    ) -> None:
        options = checks.read_options_or_default(read_options, "SpeechDataset", SPEECH_READ_OPTIONS)
        self.sample_rate, self.num_channels, self.max_seconds = audio_options(
            "SpeechDataset", sample_rate=sample_rate, num_channels=options.num_channels, max_seconds=max_seconds)
        self.on_error = check_on_error(on_error)
        self.durations_from = options.durations
        checks.check_count("max_length", max_length, owner="SpeechDataset")
        table = _is_table(source)
        self._unit = "row" if table else "line"  # what places count, for messages
        self._under: storage.UnderRoot | None = None  # the folders source() has resolved
        with SkippedRows("") as skipped:
            if table:
                self.name, rows = table_rows(source, audio_field, text_field)
                root = audio_root
            else:
                self.name = storage.shown(source)
                root = Path(source).parent if audio_root is None else audio_root
            self.audio_root = None if root is None else os.fspath(root)
            skipped.name = self.name
            key = None
            if not table and options.index_dir is not None and self.durations_from == "headers":
                key = [INDEX_VERSION, caches.file_identities([source]), os.path.abspath(self.audio_root), audio_field,
                       text_field]
            index = None if key is None else HeaderIndex.load(options.index_dir, key)
            if index is not None:
                errors = self._refresh(index, options.index_dir, key)
                raw: dict[int, Any] = {}
            else:
                rows = rows if table else manifest_rows(source, audio_field, text_field, on_error)
                index, errors = self._build(rows, identify=key is not None)
                raw = rows.raw
                if key is not None and rows.clean:
                    index.save(options.index_dir, key)
            kept = self._check(index, errors, raw)
            skipped.check(int(kept.sum()))
        self._keep(index, kept)
        self.tokens, self._pad_id = None, None
        if tokenizer is not None:
            tokenizer = tokenizing.load_tokenizer(tokenizer)
            encoder = tokenizing.TruncatingEncoder(tokenizer, max_length)
            self.tokens = tokenizing.encode_texts(encoder, list(self.texts))  # read once
            self._pad_id = tokenizing.find_pad_id(tokenizer)

    def _build(self, rows: Rows, *, identify: bool) -> tuple[HeaderIndex, dict[int, DataError]]:
        """``rows`` indexed afresh: each clip resolved, its header read (``"headers"``) or its row's
        duration taken (``"manifest"``); the errors by row, raised or skipped in order by :meth:`_check`."""
        headers, errors, sources = self.durations_from == "headers", {}, []
        under = storage.UnderRoot(self.audio_root) if headers and self.audio_root is not None else None
        for row, (place, ref, text) in enumerate(zip(rows.places, rows.refs, rows.texts)):
            try:
                if isinstance(text, DataError):
                    raise text
                sources.append(self._resolve(ref, place, under, lexical=not headers))
            except DataError as error:
                errors[row] = error
                sources.append(error)
        stated, count = np.asarray(rows.stated, dtype=np.float64), len(rows.places)
        identities = np.full((count, 2), NO_FILE[0], dtype=np.int64)
        if headers:
            names = [self._describe(place, ref) for place, ref in zip(rows.places, rows.refs)]
            found = read_headers(sources, names, identify=identify, description=f"reading the headers of {self.name}")
            seconds = np.array([info.duration if isinstance(info, AudioInfo) else np.nan for info, _ in found])
            for row, (info, identity) in enumerate(found):
                identities[row] = identity
                if isinstance(info, DataError):
                    errors.setdefault(row, info)
        else:
            seconds = stated.copy()
            for row in np.flatnonzero(~(stated > 0)).tolist():  # none given, or not a positive number
                value = rows.raw[row] if row in rows.raw else None if np.isnan(stated[row]) else float(stated[row])
                errors.setdefault(row, DataError(
                    f"{self._describe(rows.places[row], rows.refs[row])}: the manifest's duration is {value!r}, not "
                    "seconds; durations='manifest' takes each clip's length from its row (or read the headers: "
                    "ReadOptions(durations='headers'))"))
        refs = arrays.StringArray(rows.refs) if all(isinstance(ref, str) for ref in rows.refs) else list(rows.refs)
        texts = arrays.StringArray(text if isinstance(text, str) else "" for text in rows.texts)
        paths = [source if isinstance(source, str) else "" for source in sources]
        index = HeaderIndex(np.asarray(rows.places, dtype=np.int64), refs, texts, stated, paths,
                            identities[:, 0].copy(), identities[:, 1].copy(), seconds)
        return index, errors

    def _refresh(self, index: HeaderIndex, index_dir: Any, key: list[Any]) -> dict[int, DataError]:
        """Read again the headers of ``index``'s stale rows (:meth:`HeaderIndex.stale`), keep the index
        again if any changed, and return those that failed, by row."""
        stale, errors = np.flatnonzero(index.stale()).tolist(), {}
        if not stale:
            return errors
        under, sources = storage.UnderRoot(self.audio_root), []
        for row in stale:
            try:
                sources.append(self._resolve(index.refs[row], int(index.places[row]), under))
            except DataError as error:
                sources.append(error)
        names = [self._describe(int(index.places[row]), index.refs[row]) for row in stale]
        before = (index.seconds[stale].copy(), index.sizes[stale].copy(), index.mtimes[stale].copy())
        for row, source, (info, identity) in zip(stale, sources, read_headers(sources, names, identify=True)):
            index.paths[row] = source if isinstance(source, str) else ""
            index.sizes[row], index.mtimes[row] = identity
            index.seconds[row] = info.duration if isinstance(info, AudioInfo) else np.nan
            if isinstance(info, DataError):
                errors[row] = info
        after = (index.seconds[stale], index.sizes[stale], index.mtimes[stale])
        if not all(np.array_equal(old, new, equal_nan=True) for old, new in zip(before, after)):
            index.save(index_dir, key)
        return errors

    def _check(self, index: HeaderIndex, errors: dict[int, DataError], raw: dict[int, Any]) -> np.ndarray:
        """Which rows are kept: each error raised or skipped, each clip over ``max_seconds`` too, and a
        stated duration that disagrees with a header warned of, in row order; the rest in one pass."""
        seconds, stated = index.seconds, index.stated
        valid = ~np.isnan(seconds)
        over = np.where(valid, seconds, 0) > self.max_seconds
        mismatch = np.zeros(len(seconds), dtype=bool)
        if self.durations_from == "headers":
            tolerance = np.maximum(DURATION_TOLERANCE, DURATION_RELATIVE_TOLERANCE * np.where(valid, seconds, 0))
            mismatch = valid & ~np.isnan(stated) & (np.abs(np.nan_to_num(stated) - seconds) > tolerance)
            mismatch[[row for row in raw if valid[row]]] = True
        kept = np.ones(len(seconds), dtype=bool)
        for row in sorted({*errors, *np.flatnonzero(over | mismatch).tolist()}):
            where = self._describe(int(index.places[row]), index.refs[row])
            if row in errors or over[row]:
                kept[row] = False
                skip_or_raise(errors.get(row) or DataError(
                    f"{where}: {seconds[row]:.2f} s is over max_seconds={self.max_seconds:g}; raise max_seconds"),
                    self.on_error)
                continue
            warnings.warn(f"{where}: the manifest's duration {raw.get(row, float(stated[row]))!r} disagrees with the "
                          f"header's {seconds[row]:.3f} s; the header's is used (batching and max_seconds follow it)",
                          ManifestDurationWarning, stacklevel=4)
        return kept

    def _keep(self, index: HeaderIndex, kept: np.ndarray) -> None:
        """The kept rows as the dataset's arrays (numpy-backed where the rows are paths: forked workers
        share them instead of copying them)."""
        refs, texts = index.refs, index.texts
        if not kept.all():
            rows = np.flatnonzero(kept).tolist()
            picked = [refs[row] for row in rows]
            refs = arrays.StringArray(picked) if isinstance(refs, arrays.StringArray) else picked
            texts = arrays.StringArray(texts[row] for row in rows)
        self._refs, self.texts = refs, texts
        self.places = np.asarray(index.places[kept], dtype=np.int64)
        self.durations = np.asarray(index.seconds[kept], dtype=np.float64)

    @property
    def pad_id(self) -> int | None:
        """The id ``audio_collate`` pads transcripts with (the tokenizer's; None without one)."""
        return self._pad_id if self._pad_id is not None or self.tokens is None else 0

    def _resolve(self, ref: Any, place: int, under: storage.UnderRoot | None = None, *,
                 lexical: bool = False) -> str | bytes:
        """A row's clip: the bytes of an ``Audio`` struct, or its path checked under ``audio_root``:
        in full, with ``under``'s folders resolved once, or by its letters only (``lexical``:
        ``durations="manifest"`` opens nothing at index time)."""
        if isinstance(ref, dict):
            if ref.get("bytes"):
                return ref["bytes"]
            ref = ref.get("path")
        if not isinstance(ref, str) or not ref:
            raise DataError(f"{self._describe(place, ref)}: no audio path or bytes")
        if self.audio_root is None:
            raise DataError(f"{self._describe(place, ref)}: a path without bytes needs audio_root=the folder it is in")
        name = ref
        if os.path.isabs(ref):  # NeMo writes absolute paths: accepted inside audio_root
            name = os.path.relpath(os.path.normpath(ref), os.path.abspath(self.audio_root)).replace(os.sep, "/")
            if name == ".." or name.startswith("../"):
                return self._resolved_inside(ref, place, lexical)
        try:
            if lexical:
                return os.path.join(self.audio_root, storage.check_relative(name))
            return (under or storage.UnderRoot(self.audio_root))(name)
        except DataError as error:
            raise DataError(f"{self._describe(place, None)}: {error}") from None

    def _resolved_inside(self, ref: str, place: int, lexical: bool) -> str:
        """An absolute path outside ``audio_root`` as written, accepted where it resolves inside it."""
        base = Path(self.audio_root).resolve()
        path = Path(os.path.normpath(ref)) if lexical else Path(ref).resolve()
        if not path.is_relative_to(base):
            raise DataError(f"{self._describe(place, ref)}: {ref!r} is outside audio_root {base}; pass the "
                            "folder that holds the clips as audio_root")
        return str(path)

    def _describe(self, place: int, ref: Any) -> str:
        name = ref.get("path") if isinstance(ref, dict) else ref
        return f"{self.name} {self._unit} {place}" + (f" ({name})" if name else "")

    def source(self, index: int) -> str | bytes:
        """Sample ``index``'s clip as the decoder takes it: its path (under ``audio_root``, checked again
        as it is opened: the folders once a process, the file itself each time) or its bytes."""
        if self._under is None and self.audio_root is not None:
            self._under = storage.UnderRoot(self.audio_root)  # built where it is used: each worker resolves its own
        return self._resolve(self._refs[index], int(self.places[index]), self._under)

    def describe(self, index: int) -> str:
        """Where sample ``index`` comes from, for messages: manifest line (or row) and clip."""
        return self._describe(int(self.places[index]), self._refs[index])

    def state_source(self) -> str:
        """What a loader state names as this data: the manifest's file name, the clip count and a
        digest of the durations (which the duration plans batch by)."""
        return f"{storage.basename(self.name)}: {len(self)} clips, durations {checks.sampled_digest(self.durations)}"

    def batch_contract(self) -> dict[str, Any]:
        """What a mixed dataset must share with this one (recipes.core.loading.mixing)."""
        return {"collate": "audio_collate", "sample_rate": self.sample_rate, "num_channels": self.num_channels,
                "pad_id": self._pad_id, "per_sample": ("durations",)}

    def __len__(self) -> int:
        return len(self.durations)

    def read_audio(self, index: int) -> torch.Tensor:
        """Sample ``index``'s clip, float32 ``[C, N]`` (int16 ``FixedPoint`` where :attr:`fixed_point` keeps
        16-bit PCM: :func:`recipes.audio.folder.fixed_point_view`), its length checked against
        :attr:`durations`; override to read from elsewhere."""
        told = "the manifest" if self.durations_from == "manifest" else "its header"
        return decode(self.source(index), self.describe(index), sample_rate=self.sample_rate,
                      num_channels=self.num_channels, max_seconds=self.max_seconds,
                      expected=float(self.durations[index]), expected_from=told, fixed_point=self.fixed_point)

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
