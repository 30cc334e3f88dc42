"""The vision folder is the unit to copy: `recipes copy` makes a package that runs on its own files."""

from pathlib import Path

import recipes
from tests.harness import assert_domain_imports, copy_and_run

FOLDER = Path(recipes.__file__).resolve().parent / "vision"


def test_every_file_imports_only_the_core_and_its_own_folder():
    for path in sorted(FOLDER.glob("*.py")):
        assert_domain_imports(path)


def test_the_copied_folder_builds_the_dataset_and_collates_from_its_own_files(tmp_path, fixtures):
    script = f"""
from pathlib import Path
import torch
from vision import ImageFolderDataset, eval_transform, image_collate
from vision.demo import build

F = Path({str(fixtures)!r})
dataset = ImageFolderDataset(F / "vision", eval_transform(32, resize_size=40))
images, labels = image_collate([dataset[0], dataset[1]])
assert images.shape == (2, 3, 32, 32) and images.dtype == torch.uint8, (images.shape, images.dtype)
assert labels.shape == (2,) and labels.dtype == torch.int64
_, loader = build(F)
images, labels = next(iter(loader))
assert images.shape == (4, 3, 64, 64) and labels.shape == (4,)
"""
    report = copy_and_run("vision", tmp_path, script)
    assert f"-> {tmp_path / 'vision'}" in report["printed"] and "it needs recipes.core: " in report["printed"]
    print(f"copy: {report['files']} files, {report['lines']} lines; "
          f"recipes.core imported: {report['core_modules']} modules, {report['core_lines']} lines")
