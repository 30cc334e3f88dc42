"""Write an image folder (or a CSV / JSONL of ``path,label``) as WebDataset tar shards, for :class:`ImageShards`.

    write_shards("imagenet/train", "shards/", samples_per_shard=1000)       # shards/shard-000000.tar, ...
    write_shards("train.csv", "shards/")                                    # header path,label

Each image's original bytes go in unchanged, keyed by its row (``000000042.jpg``), beside its class
index (``000000042.cls``), the ImageNet layout webdataset and timm read; ``classes.txt`` (one name
a line) goes beside the shards, for ``ImageShards(..., classes="shards/classes.txt")`` to name
them. A folder is walked as :class:`ImageFolderDataset` walks it (its classes and order); a
manifest's paths are relative to ``image_root`` (default: its folder) and its labels are class
indices or names, numbered in sorted order. Equal shards (all but the last) give every reader the
same share. A shard is written under a temporary name and renamed, so a reader never sees half of
one, and the same input gives byte-identical shards.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import os
import tarfile
from collections.abc import Iterator
from pathlib import Path

from recipes.core import DataError, imaging, skip_or_raise, storage, streams
from recipes.vision.folder import ImageFolderDataset
from recipes.vision.shards import IMAGE_MEMBERS


def write_shards(
    source: str | os.PathLike,
    dest: str | os.PathLike,
    samples_per_shard: int = 1000,
    *,
    image_root: str | os.PathLike | None = None,
    prefix: str = "shard",
    on_error: str = "raise",
) -> list[Path]:
    """Write ``source``'s images and labels as ``dest/<prefix>-000000.tar``, ... and ``dest/classes.txt``.

    Args:
        source: an image folder (``root/<class>/**/<image>``), or a ``.csv`` (header ``path,label``)
            or ``.jsonl`` (``{"path", "label"}``) manifest.
        dest: the folder to write into (made if missing).
        samples_per_shard: images per shard (the last may hold fewer).
        image_root: a manifest's paths are relative to it (default: the manifest's folder).
        prefix: the shards' name before their number.
        on_error: ``"raise"`` a DataError naming the row and file of an image that does not read, or
            ``"skip"`` it with a warning.

    Returns:
        The shard paths, in order.
    """
    if samples_per_shard < 1:
        raise ValueError(f"samples_per_shard must be >= 1, got {samples_per_shard}")
    classes, rows = source_rows(source, image_root, on_error)
    out = Path(dest)
    out.mkdir(parents=True, exist_ok=True)
    if classes is not None:
        (out / "classes.txt").write_text("".join(f"{name}\n" for name in classes), encoding="utf-8")
    paths: list[Path] = []
    for number in itertools.count():
        chunk = list(itertools.islice(rows, samples_per_shard))
        if not chunk:
            return paths
        path = out / f"{prefix}-{number:06d}.tar"
        partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        with tarfile.open(partial, "w", format=tarfile.PAX_FORMAT) as tar:
            for row, (where, file, label) in enumerate(chunk, start=number * samples_per_shard):
                try:
                    data = Path(file).read_bytes()
                    kind = imaging.open_image(data, source=where).format
                except DataError as error:
                    skip_or_raise(error, on_error)
                    continue
                except OSError as error:
                    skip_or_raise(DataError(f"{where}: cannot read it ({error})"), on_error)
                    continue
                extension = imaging.EXTENSION_OF_FORMAT.get(kind, Path(file).suffix.lower().lstrip("."))
                if extension not in IMAGE_MEMBERS:
                    skip_or_raise(DataError(f"{where}: a {kind} image, which a shard does not hold "
                                            f"({'/'.join(IMAGE_MEMBERS)}); convert it"), on_error)
                    continue
                streams.add_member(tar, f"{row:09d}.{extension}", data)
                streams.add_member(tar, f"{row:09d}.cls", f"{label}\n".encode())
        os.replace(partial, path)
        paths.append(path)
    return paths


def source_rows(source: str | os.PathLike, image_root: str | os.PathLike | None = None, on_error: str = "raise", *,
                owner: str = "write_shards") -> tuple[list[str] | None, Iterator[tuple[str, str, int]]]:
    """``(class names or None, (where, file, label) per image)`` of an image folder, walked as
    :class:`ImageFolderDataset` walks it, or of a CSV / JSONL manifest whose paths are relative to
    ``image_root`` (default: its folder); ``owner`` names the reader in a refusal."""
    if os.path.isdir(source):
        folder = ImageFolderDataset(source)
        return folder.classes, ((path, path, label) for path, label in folder.samples)
    root = Path(source).parent if image_root is None else Path(image_root)
    return _manifest(Path(source), root, on_error, owner)


def _manifest(path: Path, root: Path, on_error: str,
              owner: str) -> tuple[list[str] | None, Iterator[tuple[str, str, int]]]:
    """``(class names or None, (where, file, label) per row)`` of a ``path,label`` CSV or JSONL."""
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() == ".csv":
        reader = csv.DictReader(io.StringIO(text, newline=""))
        rows = [(f"{path} line {reader.line_num}", row) for row in reader]
    elif path.suffix.lower() == ".jsonl":
        rows = [(f"{path} line {line}", json.loads(raw)) for line, raw in enumerate(text.split("\n"), 1) if raw.strip()]
    else:
        raise ValueError(f"{path}: {owner} reads an image folder, or a .csv or .jsonl manifest of path,label")
    kept = []
    for where, row in rows:
        try:
            if not isinstance(row, dict) or not row.get("path") or row.get("label") in (None, ""):
                raise DataError(f"{where}: a row needs a path and a label, got {row!r}")
            file = storage.resolve_under(root, str(row["path"]), source=where)
        except DataError as error:
            skip_or_raise(error, on_error)
            continue
        label = int(row["label"]) if str(row["label"]).lstrip("-").isdigit() else row["label"]
        kept.append((f"{where} ({row['path']})", os.fspath(file), label))
    names = sorted({label for _, _, label in kept if isinstance(label, str)})
    if not names:
        return None, iter(kept)
    if len(names) < len({label for _, _, label in kept}):
        raise ValueError(f"{path}: the labels mix class names and numbers; give every row a name, or every row one")
    index = {name: k for k, name in enumerate(names)}
    return names, ((where, file, index[label]) for where, file, label in kept)
