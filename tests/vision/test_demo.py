"""The demo builds a seeded loader over the fixture folder, and the CLI prints its batch."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from recipes.vision.demo import build


def test_demo_builds_a_seeded_loader_of_uint8_batches(fixtures):
    dataset, loader = build(fixtures)
    assert len(dataset) == 14 and dataset.classes == ["bird", "cat", "dog"]
    batches = list(loader)
    assert len(batches) == 3  # 14 images, batch 4, training drops the last 2
    images, labels = batches[0]
    assert images.shape == (4, 3, 64, 64) and images.dtype == torch.uint8 and labels.dtype == torch.int64
    again_images, again_labels = next(iter(build(fixtures)[1]))
    assert torch.equal(again_images, images) and torch.equal(again_labels, labels)


@pytest.mark.slow
def test_cli_demo_prints_the_batch_structure():
    repo = Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [sys.executable, "-m", "recipes", "demo", "vision"], cwd=repo, env={**os.environ, "PYTHONPATH": str(repo)},
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "ImageFolderDataset, 14 samples" in result.stdout
    assert "[0]: Tensor [4, 3, 64, 64] uint8" in result.stdout and "[1]: Tensor [4] int64" in result.stdout
