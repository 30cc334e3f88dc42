"""Resolve paths that come from data (manifests, annotation files) without escaping the root.

A manifest row or a COCO ``file_name`` is untrusted text. ``"../../etc/passwd"``, an absolute
path, or a symlink that points outside the dataset folder must be refused, not opened.

    root = Path("data/coco/train2017")
    check_relative("000000000009.jpg", source="instances.json, image id 9")  # cheap, at index time
    path = resolve_under(root, "000000000009.jpg")                          # at open time
    under = UnderRoot(root); paths = [under(name) for name in names]           # many, at index time
    folder = cache_folder(cache_dir)                                          # "" refused, "~" expanded
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath, PureWindowsPath

from recipes.core.contracts.errors import DataError
from recipes.core.sources.storage import is_url, join, shown


def check_relative(name: str, *, source: str = "") -> str:
    """Refuse ``name`` if it is absolute or climbs out with ``..``; return it unchanged.

    This is the lexical half of the check; it needs no file system access, so datasets run it
    over every entry when they build their index. Symlinks are caught by :func:`resolve_under`.
    """
    if isinstance(name, str) and name and not name.startswith("/") and not any(c in name for c in "\\:\x00"):
        if ".." not in name.split("/"):
            return name  # the common case, decided without pathlib (a tar shard checks every member)
    where = f"{source}: " if source else ""
    if not isinstance(name, str) or not name:
        raise DataError(f"{where}image path must be a non-empty string, got {name!r}")
    if "\x00" in name:
        raise DataError(f"{where}path {name!r} contains a NUL byte")
    posix, windows = PurePosixPath(name), PureWindowsPath(name)
    if posix.is_absolute() or windows.is_absolute() or windows.drive:
        raise DataError(f"{where}path {name!r} is absolute; paths must be relative to the root")
    if ".." in posix.parts or ".." in windows.parts:
        raise DataError(f"{where}path {name!r} escapes the dataset root with '..'")
    return name


def resolve_under(root: str | os.PathLike, name: str, *, source: str = "") -> Path | str:
    """Join ``name`` to ``root`` and refuse the result unless it stays inside ``root``.

    Symlinks are followed before the comparison, so a link that points outside is refused too.
    A URL root (``s3://bucket/images``) gets ``name`` appended once it is checked lexically.
    """
    check_relative(name, source=source)
    if is_url(root):
        return join(root, name)
    base = Path(root).resolve()
    path = (base / name).resolve()
    if not path.is_relative_to(base):
        where = f"{source}: " if source else ""
        raise DataError(f"{where}path {name!r} resolves to {path}, outside the root {base}")
    return path


class UnderRoot:
    """:func:`resolve_under` for many names under one root: the root and each folder are resolved
    once, then a name costs a lexical check and one ``lstat`` (a symlink is followed and checked
    in full). A manifest of a million clips in a few folders resolves in seconds, not minutes.
    """

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = os.fspath(root)
        self._local = not is_url(self.root)
        self._base = str(Path(self.root).resolve()) if self._local else self.root
        self._folders: dict[str, str] = {}

    def __call__(self, name: str, *, source: str = "") -> str:
        """``name``'s path inside the root, as a string; a DataError names ``source`` otherwise."""
        if not self._local:
            return str(resolve_under(self.root, name, source=source))
        check_relative(name, source=source)
        folder, _, file = name.rpartition("/")
        real = self._folders.get(folder)
        if real is None:
            real = self._folders[folder] = str(resolve_under(self._base, folder or ".", source=source))
        path = os.path.join(real, file)
        return str(resolve_under(self._base, name, source=source)) if os.path.islink(path) else path


def cache_folder(folder: str | os.PathLike, *, option: str = "cache_dir") -> Path:
    """``folder`` (``~`` expanded) for a cache to write into; ``""`` (the current directory) and a URL
    (a local folder named after it, its secrets in the name) are ValueErrors naming ``option``."""
    if not os.fspath(folder).strip():
        raise ValueError(f"{option}={os.fspath(folder)!r} names no folder (it would write into the current "
                         f"directory); pass a folder, or {option}=None to keep nothing on disk")
    if is_url(folder):
        raise ValueError(f"{option}={shown(folder)!r} is a URL; a cache is kept on a local disk: pass a local folder")
    return Path(folder).expanduser()
