"""recipes/core/sources/class_folders.py finds what torchvision's ImageFolder finds, in its order."""

import os

from torchvision.datasets.folder import find_classes, make_dataset

from recipes.core.sources.class_folders import normalise_extensions, scan_class_folders


def _tree(root):
    for relative in ["b/2.WAV", "b/1.wav", "b/deep/0.wav", "b/notes.txt", "a/x.flac", "a/y.mp3", "empty/readme.md",
                     "c/z.Flac", "stray.wav"]:
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")
    os.symlink(root / "a", root / "b" / "linked")  # ImageFolder follows links


def test_classes_files_and_order_equal_imagefolders(tmp_path):
    _tree(tmp_path)
    extensions = normalise_extensions([".wav", ".FLAC"])
    found = scan_class_folders(str(tmp_path), extensions)
    classes, class_to_idx = find_classes(str(tmp_path))
    samples = make_dataset(str(tmp_path), class_to_idx, extensions, allow_empty=True)
    assert found.classes == classes
    assert [(os.path.join(tmp_path, path), label) for path, label in zip(found.relative, found.labels)] == samples
    assert found.empty == ["empty"]
    # every other file under a class folder, the linked one included; not the file beside them
    assert sorted(found.ignored) == ["a/y.mp3", "b/linked/y.mp3", "b/notes.txt", "empty/readme.md"]


def test_one_extension_may_be_a_string_and_any_case():
    assert normalise_extensions(".WAV") == (".wav",)
    assert normalise_extensions((".Jpg", ".png")) == (".jpg", ".png")
