"""A tiny map-style dataset with a random transform, for loader tests (module level: picklable)."""

from __future__ import annotations

import torch
from torch.utils.data import Dataset

from recipes.core.errors import DataError, skip_or_raise


class NoisyRange(Dataset):
    """Item i is ``{"index": i, "noise": 4 random floats}``; indices in ``bad`` are broken."""

    def __init__(self, size: int, bad: tuple[int, ...] = (), on_error: str = "raise") -> None:
        self.size, self.bad, self.on_error = size, bad, on_error

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int):
        if index in self.bad:
            return skip_or_raise(DataError(f"item-{index}.bin: broken on purpose"), self.on_error)
        return {"index": index, "noise": torch.rand(4)}


def collate(batch):
    batch = [sample for sample in batch if sample is not None]
    return {
        "index": torch.tensor([sample["index"] for sample in batch]),
        "noise": torch.stack([sample["noise"] for sample in batch]),
    }
