"""Each recipe file works when copied alone into another project (with recipes installed)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness import assert_imports_only_core

ROOT = Path(__file__).resolve().parents[2]
RECIPES = ["tokenized.py", "streaming.py"]


@pytest.mark.parametrize("name", RECIPES)
def test_recipe_imports_only_stdlib_third_party_and_core(name):
    assert_imports_only_core(ROOT / "recipes" / "text" / name)


def test_copied_recipe_files_run_alone(tmp_path, fixtures):
    for name in RECIPES:
        shutil.copy(ROOT / "recipes" / "text" / name, tmp_path / f"copied_{name}")
    script = f"""
import copied_tokenized as t, copied_streaming as s
assert t.__file__.startswith({str(tmp_path)!r}) and s.__file__.startswith({str(tmp_path)!r})
data = {str(fixtures / "text")!r}
dataset = t.TokenizedTextDataset(data + "/labeled.jsonl", data + "/tokenizer.json", label_field="label")
batch = next(iter(t.text_loader(dataset, 4, device="cpu", seed=0, num_workers=0)))
stream = s.StreamingTextDataset(data + "/corpus.txt", data + "/tokenizer.json")
first = next(iter(s.streaming_loader(stream, 4, device="cpu", num_workers=0)))
print(tuple(batch["input_ids"].shape)[0], tuple(first["input_ids"].shape)[0])
"""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-c", script], check=False, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["4", "4"]
