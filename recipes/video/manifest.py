"""Clips from a manifest: CSV, JSONL or Parquet rows of a video, a label and maybe a segment; Kinetics' CSV.

    dataset = VideoDataset("train.csv", video_root="videos", start_field="start", end_field="end")
    dataset = VideoDataset.kinetics("kinetics400/train.csv", "kinetics400/train")    # label/<id>_<s>_<e>.mp4
    dataset = VideoDataset.kinetics("kinetics400/train.csv", "youtube", trimmed=False)  # <id>.mp4, segments cut

A row names its video by a path relative to ``video_root`` (default: the manifest's folder), or
by a ``str.format`` template over the row's columns (``"{label}/{youtube_id}.mp4"``); a path that
leaves ``video_root`` is refused. Labels are class indices (ints) or class names, numbered in the
sorted order of the names found (:attr:`VideoDataset.classes`). A segment ``[start, end)`` in
seconds (``start_field``, ``end_field``; an empty value: the video's start or end) is decoded by
seeking to it, never from the file's start: its clips are cut from the frames whose times fall
in it, read from the index (exact for variable frame rates too). Rows are read once, at
construction, and every file probed once (:mod:`recipes.video.index`).
"""

from __future__ import annotations

import csv
import io
import json
import os
import string
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np

from recipes.core import DataError, check_on_error, skip_or_raise, storage
from recipes.video.clip_dataset import ClipDataset
from recipes.video.clips import ClipTable
from recipes.video.decoding import VideoOptions
from recipes.video.sampling import ClipSampling

if TYPE_CHECKING:  # typing.Unpack is Python 3.11's
    from typing_extensions import Unpack

MANIFEST_SUFFIXES = (".csv", ".jsonl", ".parquet")
KINETICS_TRIMMED = "{label}/{youtube_id}_{time_start:06d}_{time_end:06d}.mp4"  # the downloaders' and torchvision's
KINETICS_FULL = "{youtube_id}.mp4"  # whole videos, cut by each row's time_start and time_end


class ClipArgs(TypedDict, total=False):
    """The clip keywords :class:`VideoDataset` takes, as :class:`recipes.video.sampling.ClipSampling`'s fields."""

    frames_per_clip: int
    frame_step: int
    clips_per_video: int
    short: str


class VideoDataset(ClipDataset):
    """Manifest rows -> ``{"video": tv_tensors.Video uint8 [T, 3, H, W], "label", "index", "clip", "frames"}``.

    Args:
        source: a ``.csv`` (with a header), ``.jsonl`` or ``.parquet`` manifest.
        video_root: the folder video paths are relative to (default: the manifest's folder).
        video_field: the column of each video's path, or a ``str.format`` template over the
            row's columns (whole numbers in a CSV format as ints: ``{time_start:06d}``).
        label_field: the column of each label, an int or a class name; None: every label is -1.
        start_field, end_field: the columns of a segment's start and end in seconds (None: whole videos).
        transform, on_error, options: as :class:`recipes.video.folder.VideoFolderDataset`'s; a row
            that does not parse is refused or, under ``"skip"``, left out with a warning naming its line.
        clips: ``frames_per_clip`` (16), ``frame_step`` (1), ``clips_per_video`` (1) and ``short``
            (``"repeat_last"``), as :class:`VideoFolderDataset` takes them (:class:`ClipArgs`).
    """

    def __init__(
        self,
        source: str | os.PathLike,
        *,
        video_root: str | os.PathLike | None = None,
        video_field: str = "video",
        label_field: str | None = "label",
        start_field: str | None = None,
        end_field: str | None = None,
        transform: Callable[[Any], Any] | None = None,
        on_error: str = "raise",
        options: VideoOptions | None = None,
        **clips: Unpack[ClipArgs],
    ) -> None:
        self.on_error = check_on_error(on_error)
        self.options = VideoOptions() if options is None else options
        self.name = storage.shown(source)
        root = Path(os.fspath(source)).parent if video_root is None else video_root
        self.video_root = os.path.expanduser(os.fspath(root))
        fields = (video_field, label_field, start_field, end_field)
        places, paths, labels, segments = [], [], [], []
        for place, row in _rows(source, self.name):
            try:
                if isinstance(row, DataError):
                    raise row
                path, label, segment = _parse(row, fields, self.video_root, f"{self.name} {_unit(self.name)} {place}")
            except DataError as error:
                skip_or_raise(error, self.on_error)
                continue
            places.append(place)
            paths.append(path)
            labels.append(label)
            segments.append(segment)
        self.classes, label_ids = _label_ids(labels)
        self.class_to_idx = {name: index for index, name in enumerate(self.classes or ())}
        names = [f"{self.name} {_unit(self.name)} {place} ({path})" for place, path in zip(places, paths)]
        has_segments = start_field is not None or end_field is not None
        table = np.asarray(segments, dtype=np.float64).reshape(-1, 2) if has_segments else None
        self.transform = transform
        self.clips = ClipTable(paths, names, label_ids, ClipSampling(**clips), self.options, table,
                               on_error=self.on_error, root=self.video_root)
        self.places = np.asarray(places, dtype=np.int64)[self.clips.rows]  # each kept row's line (or row number)

    @classmethod
    def kinetics(cls, csv_path: str | os.PathLike, video_root: str | os.PathLike, *, trimmed: bool = True,
                 **options: Any) -> VideoDataset:
        """A Kinetics CSV (``label,youtube_id,time_start,time_end,split``) and its videos: with
        ``trimmed``, each row's own file :data:`KINETICS_TRIMMED` under ``video_root`` (what the
        downloaders write); else whole videos :data:`KINETICS_FULL`, each row's segment decoded by
        seeking. ``options``: the constructor's other keywords (``frames_per_clip``, ``transform``, ...)."""
        if trimmed:
            return cls(csv_path, video_root=video_root, video_field=KINETICS_TRIMMED, **options)
        return cls(csv_path, video_root=video_root, video_field=KINETICS_FULL, start_field="time_start",
                   end_field="time_end", **options)

    def state_source(self) -> str:
        """What a loader state names as this data: the manifest's file name, counts and digests."""
        return f"{storage.basename(self.name)}: {self.clips.state_words()}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, {self.clips.videos} videos, {self.clips.sampling})"


def _unit(name: str) -> str:
    """What a manifest's messages count its rows in: Parquet rows (from 0), else lines (from 1)."""
    return "row" if name.endswith(".parquet") else "line"


def _parse(row: dict[str, Any], fields: tuple[str | None, ...], video_root: str,
           where: str) -> tuple[str, Any, list[float]]:
    """A row's video (checked under ``video_root``), label and segment; errors name ``where``."""
    video_field, label_field, start_field, end_field = fields
    if "{" in video_field:
        try:
            reference = string.Formatter().vformat(video_field, (), {k: _number(v) for k, v in row.items()})
        except (KeyError, ValueError, IndexError) as error:
            raise DataError(f"{where}: cannot fill {video_field!r} ({type(error).__name__}: {error})") from None
    else:
        reference = row.get(video_field)
    if not isinstance(reference, str) or not reference:
        raise DataError(f"{where}: no video path in {video_field!r} ({sorted(row)})")
    path = os.fspath(storage.resolve_under(video_root, reference, source=where))
    label = -1 if label_field is None else row.get(label_field)
    if isinstance(label, str) and label.strip().lstrip("-").isdigit():
        label = int(label)
    if not isinstance(label, (int, str)) or isinstance(label, bool) or label == "":
        raise DataError(f"{where}: the label {label_field!r} is missing or not an int or a name ({label!r})")
    segment = [_seconds(row, field, where) for field in (start_field, end_field)]
    return path, label, segment


def _number(value: Any) -> Any:
    """A CSV cell that is a whole number, as an int (for ``{time_start:06d}``); other values as they are."""
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return value


def _seconds(row: dict[str, Any], field: str | None, where: str) -> float:
    """A segment bound: the float in ``row[field]``, NaN for no field or an empty value."""
    value = None if field is None else row.get(field)
    if value is None or value == "":
        return float("nan")
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise DataError(f"{where}: {field!r} is not a number of seconds ({value!r})") from None
    if not np.isfinite(seconds) or seconds < 0:
        raise DataError(f"{where}: {field!r} = {value!r} is not a time in the video")
    return seconds


def _label_ids(labels: Sequence[Any]) -> tuple[list[str] | None, np.ndarray]:
    """``(classes, ids)``: names numbered in sorted order (classes), or ints as they are (classes None)."""
    names = sorted({label for label in labels if isinstance(label, str)})
    if not names:
        return None, np.asarray(labels, dtype=np.int64)
    if len(names) < len(set(labels)):
        raise ValueError("the labels mix class names and numbers; give every row a name, or every row a number")
    lookup = {name: index for index, name in enumerate(names)}
    return names, np.asarray([lookup[label] for label in labels], dtype=np.int64)


def _rows(source: Any, name: str) -> list[tuple[int, dict[str, Any] | DataError]]:
    """``(line or row, the row as a dict, or why it cannot be read)`` of a CSV, JSONL or Parquet manifest."""
    suffix = Path(os.fspath(source)).suffix.lower()
    if suffix not in MANIFEST_SUFFIXES:
        raise ValueError(f"{name}: VideoDataset reads {', '.join(MANIFEST_SUFFIXES)} manifests, not "
                         f"{suffix or 'a file without a suffix'}")
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        return list(enumerate(pq.read_table(os.fspath(source)).to_pylist()))
    data = storage.read_bytes(source)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise DataError(f"{name} line {line}: not UTF-8 ({error.reason}); re-save the file as UTF-8") from None
    if suffix == ".csv":
        reader = csv.DictReader(io.StringIO(text, newline=""))
        return [(reader.line_num, row) for row in reader]
    rows: list[tuple[int, dict[str, Any] | DataError]] = []
    for line, raw in enumerate(text.split("\n"), 1):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw)
        except ValueError as error:
            rows.append((line, DataError(f"{name} line {line}: not JSON ({error})")))
            continue
        rows.append((line, row if isinstance(row, dict) else DataError(f"{name} line {line}: a JSON object expected")))
    return rows
