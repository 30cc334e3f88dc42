"""The classes and files of a folder-per-class dataset, found as ``torchvision.datasets.ImageFolder`` finds them.

    extensions = normalise_extensions((".wav", ".FLAC"))
    found = scan_class_folders("data/train", extensions)
    classes, relative, labels = class_folder_files("data/train", extensions, False, kind="audio", example="dog/1.wav")

``root/<class>/**/<file>``: the class folders sorted by name, each walked with
``sorted(os.walk(..., followlinks=True))``, its files sorted, a file kept when its lowercased path
ends with one of the extensions. That is ImageFolder's ``find_classes`` + ``make_dataset`` step for
step, so ``classes``, ``class_to_idx`` and the sample order equal ImageFolder's.
:func:`class_folder_files` words a folder dataset's errors, naming its kind of file;
:class:`ClassFolderDataset` is the index a domain's folder dataset reads from (vision's, audio's).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
from torch.utils.data import Dataset

from recipes.core.contracts.arrays import StringArray
from recipes.core.contracts.states import sampled_digest
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


class ClassFolderDataset(Dataset):
    """The files of ``root/<class>/**/<file>``, indexed as torchvision's ``DatasetFolder`` indexes them:
    the base of a domain's folder dataset, which adds how a file is read (``__getitem__``).

        class WaveFolder(ClassFolderDataset):
            kind, example = "audio", "dog/001.wav"

            def __getitem__(self, index):
                return load_wave(self.path(index)), int(self.labels[index])

    It sets ``root`` (``~`` expanded), ``classes``, ``class_to_idx``, ``paths`` (each file relative to
    the root, a :class:`StringArray`) and ``labels`` (int64): arrays that forked workers share instead
    of copying page by page. ``samples`` and ``targets`` rebuild ImageFolder's lists on each access:
    keep a reference, do not index them in a loop. ``kind`` names the files in messages and in
    :meth:`state_source` (``"image"``: "no image file in the class folders ...").
    """

    kind = "file"  # what the files hold, for messages ("image", "audio")
    example = "cat/001.jpg"  # one class folder and file, for messages

    def __init__(self, root: str | os.PathLike, extensions: str | Sequence[str], *, allow_empty: bool = False) -> None:
        self.root = os.path.expanduser(os.fspath(root))
        self.extensions, self.allow_empty = extensions, allow_empty
        self.classes, relative, labels = self.find_samples(self.root)
        self.class_to_idx = {name: index for index, name in enumerate(self.classes)}
        # ImageFolder's paths are os.path.join(root, class, ...): that prefix plus what we store
        self._prefix = os.path.join(self.root, "")
        self.paths = StringArray(relative)
        self.labels = np.asarray(labels, dtype=np.int64)
        in_range = not len(self.labels) or 0 <= self.labels.min() <= self.labels.max() < len(self.classes)
        if len(self.labels) != len(self.paths) or not in_range:
            raise ValueError(
                f"{type(self).__name__}.find_samples gave {len(self.paths)} files and {len(self.labels)} labels for "
                f"{len(self.classes)} classes: it must give a label, an index into the classes, for each file"
            )

    def find_samples(self, root: str) -> tuple[list[str], list[str], list[int]]:
        """``(classes, files relative to root, each file's index into classes)``: ImageFolder's
        ``find_classes`` and ``make_dataset`` in one, from the class folders under ``root``. Override
        it to list the samples another way, e.g. from a CSV (docs/copying.md, "Change tasks")."""
        return class_folder_files(root, self.extensions, self.allow_empty, kind=self.kind, example=self.example)

    def __len__(self) -> int:
        return len(self.labels)

    def path(self, index: int) -> str:
        """The file of sample ``index``, spelled as ImageFolder spells it."""
        return self._prefix + self.paths[index]

    def describe(self, index: int) -> str:
        """Where sample ``index`` comes from, for messages: its file."""
        return self.path(index)

    def state_source(self) -> str:
        """What a loader state names as this data: the counts and digests of the class and file
        names under the root, not the root itself (a moved folder still resumes)."""
        classes, files = sampled_digest(self.classes), sampled_digest(self.paths)
        return f"{len(self)} {self.kind}s in {len(self.classes)} classes, names {classes}{files}"

    @property
    def samples(self) -> list[tuple[str, int]]:
        """ImageFolder's ``samples``: ``(path, class_index)`` in dataset order (built on access)."""
        return list(zip((self._prefix + p for p in self.paths), self.labels.tolist()))

    imgs = samples  # ImageFolder's alias

    @property
    def targets(self) -> list[int]:
        """ImageFolder's ``targets``: the class index of every sample (built on access)."""
        return self.labels.tolist()
