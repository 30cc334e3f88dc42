"""The demo builds a working dataset and loader from the fixtures, and the CLI prints a batch."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from recipes.multimodal.demo import build


def test_demo_builds_a_seeded_loader_of_caption_batches(fixtures):
    dataset, loader = build(fixtures)
    assert len(dataset) == 8
    batches = list(loader)
    assert len(batches) == 2  # 8 images, batch 4, training drops nothing here
    batch = batches[0]
    assert batch["pixel_values"].shape == (4, 3, 64, 64) and batch["pixel_values"].dtype == torch.uint8
    assert batch["input_ids"].shape == batch["attention_mask"].shape
    again = next(iter(build(fixtures)[1]))
    assert torch.equal(again["pixel_values"], batch["pixel_values"])


@pytest.mark.slow
def test_cli_demo_prints_the_batch_structure():
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(repo)}
    result = subprocess.run(
        [sys.executable, "-m", "recipes", "demo", "multimodal"], cwd=repo, env=env,
        capture_output=True, text=True, check=False, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "ImageTextDataset, 8 samples" in result.stdout
    assert "['pixel_values']: Tensor [4, 3, 64, 64] uint8" in result.stdout
