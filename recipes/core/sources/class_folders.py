"""The classes and files of a folder-per-class dataset, found as ``torchvision.datasets.ImageFolder`` finds them.

    extensions = normalise_extensions((".wav", ".FLAC"))
    found = scan_class_folders("data/train", extensions)
    classes, relative, labels = class_folder_files("data/train", extensions, False, kind="audio", example="dog/1.wav")

``root/<class>/**/<file>``: the class folders sorted by name, each walked with
``sorted(os.walk(..., followlinks=True))``, its files sorted, a file kept when its lowercased path
ends with one of the extensions. That is ImageFolder's ``find_classes`` + ``make_dataset`` step for
step, so ``classes``, ``class_to_idx`` and the sample order equal ImageFolder's.
:func:`class_folder_files` words a folder dataset's errors, naming its kind of file.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import NamedTuple

from recipes.core.sources.storage import shown


class ClassFiles(NamedTuple):
    """What :func:`scan_class_folders` found under a root."""

    classes: list[str]  # the class folders' names, sorted: class index = position
    relative: list[str]  # each kept file's path relative to the root, in ImageFolder's order
    labels: list[int]  # each kept file's class index
    empty: list[str]  # the class folders without any kept file
    ignored: list[str]  # the other files under the class folders, relative to the root (recipes check lists them)


def normalise_extensions(extensions: str | Sequence[str]) -> tuple[str, ...]:
    """``extensions`` as a lowercased tuple, one string taken as one extension.

    ImageFolder lowercases the file name but not the extensions; lowercasing both means
    ``extensions=(".JPG",)`` finds the files instead of finding none.
    """
    if isinstance(extensions, str):
        extensions = (extensions,)
    return tuple(extension.lower() for extension in extensions)


def scan_class_folders(root: str, extensions: tuple[str, ...]) -> ClassFiles:
    """The class folders of ``root`` (an existing local folder) and their files that end with ``extensions``.

    Args:
        root: the folder holding one sub-folder per class.
        extensions: lowercased file endings (:func:`normalise_extensions`).
    """
    classes = sorted(entry.name for entry in os.scandir(root) if entry.is_dir())
    prefix = os.path.join(root, "")
    found = ClassFiles(classes, [], [], [], [])
    for label, name in enumerate(classes):
        count = len(found.labels)
        # sorted(os.walk) with followlinks, exactly as ImageFolder: nested folders in path order
        for folder, _, files in sorted(os.walk(os.path.join(root, name), followlinks=True)):
            for file in sorted(files):
                path = os.path.join(folder, file)
                if path.lower().endswith(extensions):
                    found.relative.append(path[len(prefix) :])
                    found.labels.append(label)
                else:
                    found.ignored.append(path[len(prefix) :])
        if len(found.labels) == count:
            found.empty.append(name)
    return found


def class_folder_files(root: str, extensions: str | Sequence[str], allow_empty: bool, *, kind: str, example: str
                       ) -> tuple[list[str], list[str], list[int]]:
    """:func:`scan_class_folders` of ``root``, with a folder dataset's errors, each naming the fix: a
    root that is not a local folder, no class folder, or (unless ``allow_empty``) a class folder
    without a file of ``extensions`` (any case: :func:`normalise_extensions`).

    Args:
        kind: what its files hold, for the messages (``"image"``).
        example: one class folder and file, for the messages (``"cat/001.jpg"``).

    Returns:
        The classes, each file's path relative to ``root`` and each file's class index.
    """
    extensions = normalise_extensions(extensions)
    if os.path.isfile(root):
        raise NotADirectoryError(f"{kind} folder root {root!r} is a file, not a folder: pass the folder holding one "
                                 "folder per class")
    if not os.path.isdir(root):  # a URL too: local folders only
        raise FileNotFoundError(f"{kind} folder root {shown(root)!r} is not a folder (it does not exist): pass the "
                                "folder holding one folder per class (a local path)")
    found = scan_class_folders(root, extensions)
    if not found.classes:
        raise FileNotFoundError(f"no class folder in {root!r}: expected {root}/<class name>/<{kind} files> "
                                f"(e.g. {os.path.join(root, example)})")
    if found.empty and not allow_empty:
        raise FileNotFoundError(
            f"no {kind} file in the class folders {', '.join(found.empty)} of {root!r} (extensions: "
            f"{', '.join(extensions)}); add {kind} files, remove the folders, pass extensions=... or allow_empty=True"
        )
    return found.classes, found.relative, found.labels
