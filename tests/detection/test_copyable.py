"""The detection folder is the unit to copy: `recipes copy` makes a package that runs on its own files."""

from pathlib import Path

import recipes
from tests.harness import assert_domain_imports, copy_and_run

FOLDER = Path(recipes.__file__).resolve().parent / "detection"


def test_every_file_imports_only_the_core_and_its_own_folder():
    for path in sorted(FOLDER.glob("*.py")):
        assert_domain_imports(path)


def test_the_copied_folder_builds_the_dataset_and_collates_from_its_own_files(tmp_path, fixtures):
    script = f"""
from pathlib import Path
import torch
from detection import CocoDataset, detection_collate, to_coco_results
from detection.demo import build

F = Path({str(fixtures)!r})
dataset = CocoDataset(F / "detection/images", F / "detection/instances.json", masks=True)
images, targets = detection_collate([dataset[0], dataset[1]])
assert len(images) == len(targets) == 2 and all(image.dtype == torch.uint8 and image.shape[0] == 3 for image in images)
for target in targets:
    assert set(target) == {{"image_id", "boxes", "labels", "area", "iscrowd", "masks"}}, set(target)
    count = target["boxes"].shape[0]
    assert target["boxes"].shape == (count, 4) and target["labels"].shape == (count,)
    assert target["masks"].shape[0] == count
_, loader = build(F)
images, targets = next(iter(loader))
assert len(images) == len(targets) == 4
assert to_coco_results([{{"boxes": [[0, 0, 2, 3]], "labels": [1], "scores": [1.0]}}], [5])[0]["bbox"] == [0, 0, 2, 3]
"""
    report = copy_and_run("detection", tmp_path, script)
    assert f"-> {tmp_path / 'detection'}" in report["printed"] and "it needs recipes.core: " in report["printed"]
    print(f"copy: {report['files']} files, {report['lines']} lines; "
          f"recipes.core imported: {report['core_modules']} modules, {report['core_lines']} lines")
