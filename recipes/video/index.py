"""The index of a video dataset: every file's frame count, rate, size and frame times, as numpy arrays.

    index = VideoIndex.build(paths, names, index_dir="~/.cache/recipes")   # probes each file once
    index.info(3)          # VideoInfo(frames=300, fps=30.0, ...) of file 3
    index.errors           # {row: "a.mp4: truncated: ..."} of the files that cannot be used

Each file is read by :func:`recipes.video.probe.probe` (header and packets, no frame decoded).
The arrays (a few per video, frame times only for variable-rate ones) are what forked workers
share instead of copying Python objects (pytorch issue 13246). With ``index_dir`` they are kept
as one ``.npz`` (:func:`recipes.core.caches.cached_index`, loaded without pickle), named by
a digest of every file's path, size and modification time: the next build over the same files
opens none of them, and one changed file builds the index again. A file that cannot be used is
kept in the index as its reason, so a build from the cache names it again. A folder that ``recipes
prepare video`` wrote lists each file's frame count, rate and size in the ``manifest.json`` beside
its ``videos/`` (:func:`listed_videos`): those files are not opened either, while their size is the
one listed.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from recipes.core import DataError, arrays, caches
from recipes.video.probe import VideoInfo, probe

INDEX_KIND = "video"  # the cache file's prefix: <index_dir>/video-index-<digest>.npz
FIELDS = ("frames", "fps", "begin", "height", "width", "constant", "rotation")


@dataclass(frozen=True)
class VideoIndex:
    """Per-file arrays (one entry per file; a file that cannot be used has zeros and its reason in
    ``errors``); ``times`` holds the frame times of the variable-rate files, file ``i``'s at
    ``times[offsets[i]:offsets[i + 1]]``; ``codecs`` names each file's codec."""

    frames: np.ndarray
    fps: np.ndarray
    begin: np.ndarray
    height: np.ndarray
    width: np.ndarray
    constant: np.ndarray
    rotation: np.ndarray
    times: np.ndarray
    offsets: np.ndarray
    codecs: arrays.StringArray
    errors: dict[int, str]

    @classmethod
    def build(cls, paths: Sequence[str], names: Sequence[str], index_dir: str | os.PathLike | None = None,
              listed: dict[str, tuple[int, VideoInfo]] | None = None) -> VideoIndex:
        """The index of the local files ``paths`` (``names``: how messages show them), from
        ``index_dir`` when an earlier build of the same files left it there; ``listed``
        (:func:`listed_videos`) gives files' infos by path, each taken while the file has its size."""
        identity = [_identity(path) for path in paths]
        found = caches.cached_index(index_dir, INDEX_KIND, identity, lambda: _probe_all(paths, names, listed or {}))
        errors = dict(zip(found["error_rows"].tolist(), found["error_text"].tolist()))
        codecs = arrays.StringArray([str(name) for name in found["codec_names"][found["codec_ids"]]])
        return cls(**{name: found[name] for name in (*FIELDS, "times", "offsets")}, codecs=codecs, errors=errors)

    def __len__(self) -> int:
        return len(self.frames)

    def info(self, row: int) -> VideoInfo:
        """File ``row`` as :func:`recipes.video.probe.probe` found it."""
        start, stop = int(self.offsets[row]), int(self.offsets[row + 1])
        return VideoInfo(frames=int(self.frames[row]), fps=float(self.fps[row]), height=int(self.height[row]),
                         width=int(self.width[row]), begin=float(self.begin[row]), constant=bool(self.constant[row]),
                         codec=self.codecs[row], rotation=float(self.rotation[row]),
                         times=self.times[start:stop] if stop > start else None)

    def subset(self, rows: np.ndarray) -> VideoIndex:
        """The index of files ``rows`` only, in that order (without errors)."""
        starts, stops = self.offsets[rows], self.offsets[rows + 1]
        pieces = [self.times[start:stop] for start, stop in zip(starts.tolist(), stops.tolist())]
        offsets = np.concatenate([[0], np.cumsum(stops - starts)]).astype(np.int64)
        times = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.float64)
        kept = {name: getattr(self, name)[rows] for name in FIELDS}
        codecs = arrays.StringArray([self.codecs[r] for r in rows])
        return VideoIndex(**kept, times=times, offsets=offsets, codecs=codecs, errors={})


def _identity(path: str) -> list:
    """``[path, size, modification time]`` (None, None for a file that is not there)."""
    try:
        stat = os.stat(path)
    except OSError:
        return [os.path.abspath(path), None, None]
    return [os.path.abspath(path), stat.st_size, stat.st_mtime_ns]


def listed_videos(root: str | os.PathLike | None) -> dict[str, tuple[int, VideoInfo]]:
    """``{path: (bytes, info)}`` of the videos that the ``manifest.json`` ``recipes prepare video``
    wrote beside ``root`` (``DEST/videos``, the folder of class folders) lists; none without one."""
    if root is None:
        return {}
    prepared = os.path.dirname(os.path.normpath(root))
    try:
        with open(os.path.join(prepared, "manifest.json"), encoding="utf-8") as file:
            manifest = json.load(file)
    except (OSError, ValueError):
        return {}
    if not isinstance(manifest, dict) or manifest.get("domain") != "video":
        return {}
    listed = {}
    for entry in manifest.get("shards", []):
        try:
            listed[os.path.normpath(os.path.join(prepared, entry["name"]))] = (int(entry["bytes"]), _listed_info(entry))
        except (KeyError, TypeError, ValueError):
            continue  # an entry this version does not read: the file is probed
    return listed


def _listed_info(entry: dict[str, Any]) -> VideoInfo:
    """A manifest entry (``recipes.video.prepare_videos.describe_video``) as a probe gives it."""
    fields = {field.name: entry[field.name] for field in dataclasses.fields(VideoInfo) if field.name != "times"}
    times = entry.get("times")
    return VideoInfo(**fields, times=None if times is None else np.asarray(times, dtype=np.float64))


def _probe_all(paths: Sequence[str], names: Sequence[str],
               listed: dict[str, tuple[int, VideoInfo]]) -> dict[str, np.ndarray]:
    """Every file probed (or taken from ``listed`` while its size is the one there): the index's
    arrays, the reasons of those that failed by row."""
    columns: dict[str, list] = {name: [] for name in FIELDS}
    times, offsets, codecs, error_rows, error_text = [], [0], [], [], []
    for row, (path, name) in enumerate(zip(paths, names)):
        size, info = listed.get(os.path.normpath(path), (None, None))
        try:
            if info is None or size != _identity(path)[1]:
                info = probe(path, name)
        except DataError as error:
            info = VideoInfo(0, 0.0, 0, 0, 0.0, True, "")
            error_rows.append(row)
            error_text.append(str(error))
        for field in FIELDS:
            columns[field].append(getattr(info, field))
        if info.times is not None:
            times.append(info.times)
        offsets.append(offsets[-1] + (0 if info.times is None else len(info.times)))
        codecs.append(info.codec)
    names_of_codecs = sorted(set(codecs))
    dtypes = {"frames": np.int64, "fps": np.float64, "begin": np.float64, "height": np.int64, "width": np.int64,
              "constant": bool, "rotation": np.float64}
    return {
        **{field: np.asarray(columns[field], dtype=dtypes[field]) for field in FIELDS},
        "times": np.concatenate(times) if times else np.zeros(0, dtype=np.float64),
        "offsets": np.asarray(offsets, dtype=np.int64),
        "codec_names": np.asarray(names_of_codecs, dtype=str),
        "codec_ids": np.asarray([names_of_codecs.index(codec) for codec in codecs], dtype=np.int64),
        "error_rows": np.asarray(error_rows, dtype=np.int64),
        "error_text": np.asarray(error_text, dtype=str),
    }
