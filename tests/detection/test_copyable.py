"""Each recipe file works on its own: copied alone into a folder, it imports and runs."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import recipes
from tests.harness import assert_imports_only_core

PACKAGE = Path(recipes.__file__).resolve().parent
RECIPES = ["coco.py", "loader.py", "evaluate.py"]
SCRIPT = {
    "coco.py": "d = m.CocoDataset(F / 'detection/images', F / 'detection/instances.json', masks=True); "
    "assert d[0][1]['masks'].shape[0] == 3",
    "loader.py": "import torch; images, targets = m.detection_collate([(torch.zeros(3, 2, 2), {'image_id': 1})]); "
    "assert targets[0]['image_id'] == 1",
    "evaluate.py": "assert m.to_coco_results([{'boxes': [[0, 0, 2, 3]], 'labels': [1], 'scores': [1.0]}], [5])"
    "[0]['bbox'] == [0, 0, 2, 3]",
}


@pytest.mark.parametrize("name", RECIPES)
def test_a_recipe_file_imports_only_the_core_and_runs_when_copied_alone(name, tmp_path, fixtures):
    source = PACKAGE / "detection" / name
    assert_imports_only_core(source)
    shutil.copy(source, tmp_path / name)
    code = (
        f"import importlib; from pathlib import Path; F = Path({str(fixtures)!r}); "
        f"m = importlib.import_module({name[:-3]!r}); {SCRIPT[name]}"
    )
    env = dict(os.environ, PYTHONPATH=str(PACKAGE.parent))
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
