"""``python -m recipes demo detection``: the COCO fixture through CocoDataset and detection_loader."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torchvision.transforms import v2

from recipes.detection import CocoDataset, detection_loader


def build(fixtures: Path) -> tuple[CocoDataset, Any]:
    """The fixture's 10 images with masks and a random flip, in aspect-ratio grouped batches of 4."""
    dataset = CocoDataset(
        fixtures / "detection/images",
        fixtures / "detection/instances.json",
        transforms=v2.RandomHorizontalFlip(),
        masks=True,
    )
    # drop_last=False: the fixture is tiny and a demo should show every image
    return dataset, detection_loader(dataset, 4, train=True, device="cpu", seed=0, drop_last=False)
