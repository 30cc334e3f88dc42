"""A speech manifest's build: each row's clip found under ``audio_root``, its duration read, the rows checked.

    clips = ClipPaths("train.jsonl", "line", "/data/speech")     # where rows' clips are, and their names
    index, errors = build_index(rows, clips, headers=True, identify=False)
    kept = kept_rows(index, errors, rows.raw, clips, max_seconds=30.0, headers=True, on_error="raise")

:class:`recipes.audio.SpeechDataset` runs these once, at construction: :func:`build_index` resolves
every clip and reads its header (``durations="headers"``, through
:func:`recipes.audio.speech_index.read_headers`) or takes its row's duration (``"manifest"``);
:func:`refresh_index` reads again only the stale rows of an index kept in ``index_dir``; and
:func:`kept_rows` raises or skips each bad row, and warns of a manifest duration that disagrees with
its header (:class:`ManifestDurationWarning`), in row order. :class:`ClipPaths` resolves a row's
clip again each time it is decoded, in the workers.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from recipes.audio.decoding import DURATION_RELATIVE_TOLERANCE, DURATION_TOLERANCE, AudioInfo
from recipes.audio.speech_index import NO_FILE, HeaderIndex, read_headers
from recipes.audio.speech_rows import Rows
from recipes.core import DataError, arrays, skip_or_raise, storage


class ManifestDurationWarning(UserWarning):
    """A manifest's ``duration`` disagrees with its clip's header; the message names the row. Make it an
    error with ``warnings.simplefilter("error", ManifestDurationWarning)`` (strict)."""


class ClipPaths:
    """Where the clips of manifest ``name`` are (``unit``: ``"line"`` or ``"row"``, what places
    count), relative to ``audio_root`` (None: a table whose clips are bytes)."""

    def __init__(self, name: str, unit: str, audio_root: str | None) -> None:
        self.name, self.unit, self.audio_root = name, unit, audio_root

    def describe(self, place: int, ref: Any) -> str:
        """Row ``place`` for messages: the manifest, the line (or row), and the clip's name."""
        name = ref.get("path") if isinstance(ref, dict) else ref
        return f"{self.name} {self.unit} {place}" + (f" ({name})" if name else "")

    def resolve(self, ref: Any, place: int, under: storage.UnderRoot | None = None, *,
                lexical: bool = False) -> str | bytes:
        """A row's clip: the bytes of an ``Audio`` struct, or its path checked under ``audio_root``:
        in full, with ``under``'s folders resolved once, or by its letters only (``lexical``:
        ``durations="manifest"`` opens nothing at index time)."""
        if isinstance(ref, dict):
            if ref.get("bytes"):
                return ref["bytes"]
            ref = ref.get("path")
        if not isinstance(ref, str) or not ref:
            raise DataError(f"{self.describe(place, ref)}: no audio path or bytes")
        if self.audio_root is None:
            raise DataError(f"{self.describe(place, ref)}: a path without bytes needs audio_root=the folder it is in")
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
            raise DataError(f"{self.describe(place, None)}: {error}") from None

    def _resolved_inside(self, ref: str, place: int, lexical: bool) -> str:
        """An absolute path outside ``audio_root`` as written, accepted where it resolves inside it."""
        base = Path(self.audio_root).resolve()
        path = Path(os.path.normpath(ref)) if lexical else Path(ref).resolve()
        if not path.is_relative_to(base):
            raise DataError(f"{self.describe(place, ref)}: {ref!r} is outside audio_root {base}; pass the "
                            "folder that holds the clips as audio_root")
        return str(path)


def build_index(rows: Rows, clips: ClipPaths, *, headers: bool,
                identify: bool) -> tuple[HeaderIndex, dict[int, DataError]]:
    """``rows`` indexed afresh: each clip resolved, its header read (``headers``) or its row's
    duration taken; the errors by row, raised or skipped in order by :func:`kept_rows`."""
    errors, sources = {}, []
    under = storage.UnderRoot(clips.audio_root) if headers and clips.audio_root is not None else None
    for row, (place, ref, text) in enumerate(zip(rows.places, rows.refs, rows.texts)):
        try:
            if isinstance(text, DataError):
                raise text
            sources.append(clips.resolve(ref, place, under, lexical=not headers))
        except DataError as error:
            errors[row] = error
            sources.append(error)
    stated, count = np.asarray(rows.stated, dtype=np.float64), len(rows.places)
    identities = np.full((count, 2), NO_FILE[0], dtype=np.int64)
    if headers:
        names = [clips.describe(place, ref) for place, ref in zip(rows.places, rows.refs)]
        found = read_headers(sources, names, identify=identify, description=f"reading the headers of {clips.name}")
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
                f"{clips.describe(rows.places[row], rows.refs[row])}: the manifest's duration is {value!r}, not "
                "seconds; durations='manifest' takes each clip's length from its row (or read the headers: "
                "ReadOptions(durations='headers'))"))
    refs = arrays.StringArray(rows.refs) if all(isinstance(ref, str) for ref in rows.refs) else list(rows.refs)
    texts = arrays.StringArray(text if isinstance(text, str) else "" for text in rows.texts)
    paths = [source if isinstance(source, str) else "" for source in sources]
    index = HeaderIndex(np.asarray(rows.places, dtype=np.int64), refs, texts, stated, paths,
                        identities[:, 0].copy(), identities[:, 1].copy(), seconds)
    return index, errors


def refresh_index(index: HeaderIndex, clips: ClipPaths, index_dir: Any, key: list[Any]) -> dict[int, DataError]:
    """Read again the headers of ``index``'s stale rows (:meth:`HeaderIndex.stale`), keep the index
    again if any changed, and return those that failed, by row."""
    stale, errors = np.flatnonzero(index.stale()).tolist(), {}
    if not stale:
        return errors
    under, sources = storage.UnderRoot(clips.audio_root), []
    for row in stale:
        try:
            sources.append(clips.resolve(index.refs[row], int(index.places[row]), under))
        except DataError as error:
            sources.append(error)
    names = [clips.describe(int(index.places[row]), index.refs[row]) for row in stale]
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


def kept_rows(index: HeaderIndex, errors: dict[int, DataError], raw: dict[int, Any], clips: ClipPaths, *,
              max_seconds: float, headers: bool, on_error: str) -> np.ndarray:
    """Which rows are kept: each error raised or skipped, each clip over ``max_seconds`` too, and a
    stated duration that disagrees with a header warned of, in row order; the rest in one pass."""
    seconds, stated = index.seconds, index.stated
    valid = ~np.isnan(seconds)
    over = np.where(valid, seconds, 0) > max_seconds
    mismatch = np.zeros(len(seconds), dtype=bool)
    if headers:
        tolerance = np.maximum(DURATION_TOLERANCE, DURATION_RELATIVE_TOLERANCE * np.where(valid, seconds, 0))
        mismatch = valid & ~np.isnan(stated) & (np.abs(np.nan_to_num(stated) - seconds) > tolerance)
        mismatch[[row for row in raw if valid[row]]] = True
    kept = np.ones(len(seconds), dtype=bool)
    for row in sorted({*errors, *np.flatnonzero(over | mismatch).tolist()}):
        where = clips.describe(int(index.places[row]), index.refs[row])
        if row in errors or over[row]:
            kept[row] = False
            skip_or_raise(errors.get(row) or DataError(
                f"{where}: {seconds[row]:.2f} s is over max_seconds={max_seconds:g}; raise max_seconds"), on_error)
            continue
        warnings.warn(f"{where}: the manifest's duration {raw.get(row, float(stated[row]))!r} disagrees with the "
                      f"header's {seconds[row]:.3f} s; the header's is used (batching and max_seconds follow it)",
                      ManifestDurationWarning, stacklevel=4)
    return kept


def kept_columns(index: HeaderIndex, kept: np.ndarray) -> tuple[Any, arrays.StringArray, np.ndarray, np.ndarray]:
    """``(refs, texts, places, durations)`` of the kept rows (numpy-backed where the rows are paths:
    forked workers share them instead of copying them)."""
    refs, texts = index.refs, index.texts
    if not kept.all():
        rows = np.flatnonzero(kept).tolist()
        picked = [refs[row] for row in rows]
        refs = arrays.StringArray(picked) if isinstance(refs, arrays.StringArray) else picked
        texts = arrays.StringArray(texts[row] for row in rows)
    places, durations = index.places[kept].astype(np.int64), index.seconds[kept].astype(np.float64)
    return refs, texts, places, durations
