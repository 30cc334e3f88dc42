"""``python -m recipes demo multimodal``: COCO-style captions on the bundled fixture images.

    from recipes.multimodal.demo import build
    dataset, loader = build(fixtures_dir())
"""

from __future__ import annotations

from pathlib import Path

from torch.utils.data import DataLoader
from torchvision.transforms import v2

from recipes.multimodal.pairs import ImageTextDataset, multimodal_loader


def build(fixtures: Path) -> tuple[ImageTextDataset, DataLoader]:
    """An ImageTextDataset over ``multimodal/captions.json`` (a random caption per image each
    epoch, 64x64 crops) and a seeded CPU loader of batches of 4."""
    transform = v2.Compose([v2.RandomResizedCrop(64, scale=(0.5, 1.0), antialias=True), v2.RandomHorizontalFlip()])
    dataset = ImageTextDataset(
        fixtures / "multimodal" / "captions.json", fixtures / "text" / "tokenizer.json", transform=transform
    )
    return dataset, multimodal_loader(dataset, 4, device="cpu", seed=0, num_workers=0)
