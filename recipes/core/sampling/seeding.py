"""Per-sample randomness: every sample's augmentation is seeded by ``(seed, epoch, index)``.

DataLoader seeds each *worker* once, so which random crop a sample gets depends on which worker
happened to load it, and on how many samples that worker drew before. Change ``num_workers``,
resume mid-epoch or add a rank, and the augmentations change. Here each sample runs under its own
seed instead, derived from the loader's seed, the epoch and the sample index; a batch is then the
same whatever the worker count, the rank or a resume.

    seeds = sample_seeds(seed=0, epoch=3, indices=np.array([5, 9]))  # uint64, one per sample
    with seeded(int(seeds[0])):
        image = transform(image)                                     # torch/random/numpy draws

The batch samplers in :mod:`recipes.core.sampling.samplers` hand ``(index, sample_seed)`` pairs to the
loader; :class:`SeededDataset` unpacks them and runs ``dataset[index]`` under that seed.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset, get_worker_info

from recipes.core.contracts.errors import BatchSamples
from recipes.core.contracts.states import source_of
from recipes.core.workers.watchdog import loaded, loading

_MASK64 = 0xFFFF_FFFF_FFFF_FFFF


def splitmix64(x: np.ndarray) -> np.ndarray:
    """The SplitMix64 finaliser: a cheap, well-mixed bijection on uint64 (Steele et al. 2014)."""
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def sample_seeds(seed: int, epoch: int, indices: np.ndarray | list[int]) -> np.ndarray:
    """Return one uint64 seed per index, a hash of ``(seed, epoch, index)``."""
    key = splitmix64(np.array([seed & _MASK64], dtype=np.uint64))
    key = splitmix64(key ^ np.uint64(epoch & _MASK64))
    return splitmix64(key ^ np.asarray(indices, dtype=np.uint64))


def epoch_seeds(seed: int, epochs: np.ndarray, index: int) -> np.ndarray:
    """``sample_seeds(seed, e, [index])[0]`` for each ``e`` of ``epochs``, in one pass."""
    key = splitmix64(np.array([seed & _MASK64], dtype=np.uint64))
    key = splitmix64(key ^ np.asarray(epochs).astype(np.uint64))
    return splitmix64(key ^ np.uint64(index & _MASK64))


def sample_seed(seed: int, epoch: int, index: int) -> int:
    """``sample_seeds`` for one index, as a Python int: ~2 us, where numpy's calls on a one-element
    array take ~30 (a stream seeds every sample on its own)."""
    key = splitmix64_int(splitmix64_int(seed & _MASK64) ^ (epoch & _MASK64))
    return splitmix64_int(key ^ (index & _MASK64))


def splitmix64_int(x: int) -> int:
    """:func:`splitmix64` on one Python int (no numpy call: ~30x quicker for one value)."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def epoch_generator(seed: int, epoch: int) -> torch.Generator:
    """A torch.Generator for one epoch's shuffle, the same on every rank."""
    return torch.Generator().manual_seed(int(sample_seeds(seed, epoch, [_MASK64])[0]))


def rank_seed(seed: int, rank: int) -> int:
    """A 63-bit seed for ``rank`` derived from the shared ``seed`` (distinct from the epochs' keys)."""
    return int(sample_seeds(seed, rank, [_MASK64 - 1])[0]) >> 1


def random_seed() -> int:
    """Draw a 63-bit seed from torch's default generator, so ``torch.manual_seed`` governs it."""
    return int(torch.empty((), dtype=torch.int64).random_().item())


def _reseed(seed: int) -> None:
    torch.random.default_generator.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed & 0xFFFF_FFFF)


@contextmanager
def _preserved_rng() -> Iterator[None]:
    """Restore torch's CPU generator, ``random`` and ``numpy.random`` after the block."""
    cpu = torch.random.default_generator
    saved = cpu.get_state(), random.getstate(), np.random.get_state()
    try:
        yield
    finally:
        cpu.set_state(saved[0])
        random.setstate(saved[1])
        np.random.set_state(saved[2])


@contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Run the block with torch's CPU generator, ``random`` and ``numpy.random`` seeded by ``seed``.

    The previous states are restored afterwards, so running a dataset in the main process
    (``num_workers=0``) does not disturb the training loop's own randomness. In a DataLoader
    worker nothing else owns those generators (every sample reseeds them), so they are not
    restored there: saving and restoring numpy's state alone costs ~0.1-0.2 ms a sample, as much
    as resizing a photo. CUDA generators are left alone: data transforms run on the CPU, and
    reseeding CUDA would change dropout.
    """
    if get_worker_info() is not None:
        _reseed(seed)
        yield
        return
    with _preserved_rng():
        _reseed(seed)
        yield


class SeededDataset(Dataset):
    """Wraps a map-style dataset so that ``self[(index, seed)]`` runs ``dataset[index]`` seeded.

    A plain integer index is passed straight through, unseeded. The wrapped dataset is
    ``.dataset``; the loader presets in this package hand this wrapper to the DataLoader.
    """

    def __init__(self, dataset: Dataset) -> None:
        self.dataset = dataset

    def state_source(self) -> str:
        """The wrapped dataset's data, for loader states (:func:`recipes.core.contracts.states.source_of`)."""
        return source_of(self.dataset)

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, key: int | tuple[int, int]) -> Any:
        if isinstance(key, tuple):
            index, seed = key
            with seeded(seed):
                return self.dataset[index]
        return self.dataset[key]

    def __getitems__(self, keys: list[int | tuple[int, int]]) -> BatchSamples:
        """A whole batch (DataLoader calls this when it exists): each sample is still seeded by
        its own key, but in the main process the global generators are saved and restored
        once per batch, not once per sample (~0.13 ms a sample, most of an in-memory batch).
        The list carries the batch's indices, which a failing collate names (``NamedCollate``)."""
        indices = [key[0] if isinstance(key, tuple) else key for key in keys]
        loading(indices)  # a watched worker notes what it loads (recipes.core.workers.watchdog)
        try:
            if not any(isinstance(key, tuple) for key in keys):
                samples = [self.dataset[key] for key in keys]
            elif get_worker_info() is not None:  # a worker owns its generators: nothing to restore (see seeded)
                samples = self._seeded_batch(keys)
            else:
                with _preserved_rng():
                    samples = self._seeded_batch(keys)
        finally:
            loaded()
        return BatchSamples(samples, indices, self.dataset)

    def _seeded_batch(self, keys: list[int | tuple[int, int]]) -> list[Any]:
        samples = []
        for key in keys:
            if isinstance(key, tuple):
                _reseed(key[1])
                key = key[0]
            samples.append(self.dataset[key])
        return samples
