"""Tiny datasets for loader tests: a random transform, seed probes (module level: picklable)."""

from __future__ import annotations

import random

import numpy as np
import torch
from torch.utils.data import Dataset, IterableDataset, get_worker_info

from recipes.core.contracts.errors import DataError, skip_or_raise


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


def _draws() -> dict:
    """What the process-global generators give here: their seeds and a draw from each."""
    return {
        "torch_seed": torch.initial_seed(),
        "torch": int(torch.randint(2**62, ())),
        "random": random.getrandbits(62),
        "numpy": int(np.random.randint(2**62, dtype=np.int64)),
    }


class SeedProbe(Dataset):
    """Item i reports the global generators' seeds and draws inside ``__getitem__``."""

    def __init__(self, size: int) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> dict:
        info = get_worker_info()
        return {"index": index, "worker": info.id if info is not None else -1, **_draws()}


class IterableSeedProbe(IterableDataset):
    """Each worker (or the main process) yields one item: its id and the global generators' draws."""

    def __iter__(self):
        info = get_worker_info()
        yield {"worker": info.id if info is not None else -1, **_draws()}


def as_list(batch):
    """A collate that keeps the items as they are (module level: picklable)."""
    return batch
