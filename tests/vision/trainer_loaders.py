"""The vision preset handed to the trainers by tests/trainer_runs.py (see tests/vision/test_trainers.py)."""

from __future__ import annotations

from typing import Any

from recipes.vision import ImageFolderDataset, eval_transform, train_transform, vision_loader

ROOT, BATCH = "fixtures/vision", 2


class NumberedImages(ImageFolderDataset):
    """Items ``(image, index)``: a batch names its samples."""

    def __getitem__(self, index: int) -> tuple[Any, int]:
        return super().__getitem__(index)[0], index


def images(config: dict[str, Any], *, train: bool) -> Any:
    dataset = NumberedImages(ROOT, train_transform(32) if train else eval_transform(32, resize_size=36))
    return vision_loader(dataset, BATCH, train=train, device="cpu", seed=0, stateful=True,
                         num_workers=config.get("workers", 0))
