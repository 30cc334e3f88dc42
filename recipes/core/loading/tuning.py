"""Measure DataLoader settings on your own data instead of guessing them.

    kwargs, rows = tune_loader(dataset, batch_size=64, collate_fn=collate_fn, device="cuda", seconds=60, step_ms=80)
    loader = DataLoader(dataset, batch_size=64, collate_fn=collate_fn, shuffle=True, **kwargs)

The right ``num_workers`` depends on where the time goes: decoding JPEGs wants every core, an
in-memory token table wants none (worker start-up and inter-process copies then cost more than
they save). ``tune_loader`` sweeps ``num_workers`` (0 up to the usable CPUs), ``prefetch_factor``
and, on CUDA, ``pin_memory``; for each it measures batches/s and the *data-wait fraction*: the
share of wall time the consumer spends waiting in ``next(loader)`` while it simulates a training
step of ``step_ms`` per batch (0 = the loader's raw rate). It recommends the cheapest setting
whose rate is within 5% of the best one. ``python -m recipes bench`` is the command-line face.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset

from recipes.core.loading.loader import resolve_device, usable_cpus
from recipes.core.contracts.nested import samples_in, tensors_in

GOOD_ENOUGH = 0.95  # settings within 5% of the best rate tie; the cheapest of them wins


@dataclass
class Trial:
    """One measured setting."""

    num_workers: int
    prefetch_factor: int | None
    pin_memory: bool
    batches: int
    seconds: float
    samples: int
    wait_seconds: float
    startup_seconds: float

    @property
    def batches_per_second(self) -> float:
        return self.batches / self.seconds if self.seconds else 0.0

    @property
    def samples_per_second(self) -> float:
        return self.samples / self.seconds if self.seconds else 0.0

    @property
    def wait_fraction(self) -> float:
        return self.wait_seconds / self.seconds if self.seconds else 1.0

    def kwargs(self) -> dict[str, Any]:
        """The DataLoader keyword arguments this trial used."""
        kwargs: dict[str, Any] = {"num_workers": self.num_workers, "pin_memory": self.pin_memory}
        if self.num_workers:
            kwargs.update(persistent_workers=True, prefetch_factor=self.prefetch_factor)
        return kwargs


def worker_counts(limit: int | None = None) -> list[int]:
    """0, 1, 2, 4, ... up to the usable CPUs (always including that number)."""
    top = usable_cpus() if limit is None else limit
    counts, n = [0], 1
    while n < top:
        counts.append(n)
        n *= 2
    return counts + ([top] if top > 0 else [])


def settings(device: torch.device, max_workers: int | None = None) -> list[tuple[int, int | None, bool]]:
    """Every ``(num_workers, prefetch_factor, pin_memory)`` the sweep tries."""
    pins = [False, True] if device.type == "cuda" else [False]
    grid = []
    for workers in worker_counts(max_workers):
        for prefetch in [None] if workers == 0 else [2, 4]:
            grid.extend((workers, prefetch, pin) for pin in pins)
    return grid


def _endless(loader: DataLoader) -> Iterator[Any]:
    """Batches from ``loader`` epoch after epoch (a small dataset still fills the time budget)."""
    while True:
        empty = True
        for batch in loader:
            empty = False
            yield batch
        if empty:
            raise ValueError("the loader gave no batch: the dataset holds fewer samples than one batch")


def measure(loader: DataLoader, *, seconds: float, step_ms: float, device: torch.device) -> tuple[int, int, float, float, float]:
    """Run ``loader`` for about ``seconds`` with a simulated step; see :class:`Trial`.

    Returns ``(batches, samples, seconds, wait_seconds, startup_seconds)``; the first batch
    (worker start-up included) is counted apart, in ``startup_seconds`` only. Waiting includes
    the start of each new epoch, as it does in training.
    """
    start = time.perf_counter()
    batches = samples = 0
    wait = startup = 0.0
    batches_of = _endless(loader)
    began = time.perf_counter()
    while True:
        before = time.perf_counter()
        if batches == 1:
            began = before  # the measured window: the batches after the first, each wait and step
        batch = next(batches_of)
        waited = time.perf_counter() - before
        if batches == 0:
            startup = waited  # worker start-up is reported apart
        else:
            wait += waited
            samples += samples_in(batch)
        if device.type == "cuda":
            # the host-to-device copy is part of feeding the model: it is what pin_memory speeds up
            for tensor in tensors_in(batch):
                tensor.to(device, non_blocking=True)
            torch.cuda.synchronize(device)
        batches += 1
        del batch
        if step_ms:
            time.sleep(step_ms / 1000)
        if time.perf_counter() - start > seconds and batches > 2:
            break
    batches_of.close()  # shuts the workers down now, not whenever the iterator is collected
    return batches - 1, samples, time.perf_counter() - began, wait, startup


def tune_loader(
    dataset: Dataset | None = None,
    *,
    batch_size: int | None = None,
    make_loader: Callable[..., DataLoader] | None = None,
    device: str | torch.device | None = None,
    seconds: float = 30.0,
    step_ms: float = 0.0,
    max_workers: int | None = None,
    progress: bool = True,
    **loader_options: Any,
) -> tuple[dict[str, Any], list[Trial]]:
    """Sweep loader settings on ``dataset`` and return ``(recommended kwargs, trials)``.

    Args:
        dataset: the map-style dataset to load (shuffled, as in training).
        batch_size: samples per batch.
        make_loader: instead of ``dataset``: a function taking DataLoader keyword arguments
            (``num_workers``, ``pin_memory``, ``prefetch_factor``, ``persistent_workers``) and
            returning the loader to measure, e.g. ``functools.partial(vision_loader, ds, 64)``.
        device: where batches go; pin_memory is only tried on CUDA.
        seconds: total time budget, shared evenly by the settings.
        step_ms: simulated training step per batch; 0 measures the raw loader rate.
        max_workers: highest worker count to try (default: the usable CPUs).
        loader_options: further DataLoader arguments kept fixed (``collate_fn``, ``batch_sampler``...).
    """
    from tqdm.auto import tqdm

    if (dataset is None) == (make_loader is None):
        raise ValueError("give either dataset (with batch_size) or make_loader")
    if make_loader is None:
        if batch_size is None:
            raise ValueError("batch_size is required with dataset")
        make_loader = functools.partial(_plain_loader, dataset, batch_size, loader_options)
    device = resolve_device(device)
    if device.type == "cuda":
        # start CUDA now: its ~1 s initialisation would otherwise count against the first setting
        torch.zeros(1, device=device)
        torch.cuda.synchronize(device)
    grid = settings(device, max_workers)
    budget = seconds / len(grid)
    trials = []
    for workers, prefetch, pin in tqdm(grid, desc="tuning loader", unit="setting", disable=not progress):
        kwargs: dict[str, Any] = {"num_workers": workers, "pin_memory": pin}
        if workers:
            # persistent, as recommended: a new epoch then reuses the workers instead of starting them
            kwargs.update(prefetch_factor=prefetch, persistent_workers=True)
        loader = make_loader(**kwargs)
        batches, samples, spent, wait, startup = measure(loader, seconds=budget, step_ms=step_ms, device=device)
        trials.append(Trial(workers, prefetch, pin, batches, spent, samples, wait, startup))
        del loader
    return recommend(trials), trials


def _plain_loader(dataset: Dataset, batch_size: int, options: dict[str, Any], **kwargs: Any) -> DataLoader:
    if "batch_sampler" not in options:
        kwargs.update(batch_size=batch_size, shuffle=True)
    return DataLoader(dataset, **options, **kwargs)


def recommend(trials: list[Trial]) -> dict[str, Any]:
    """The cheapest trial (fewest workers, then least prefetch) near the best rate.

    Where pinning was tried (CUDA) a pinned trial is preferred among equals: its real gain is
    the asynchronous copy overlapping the model, which a loader-only rate does not show.
    """
    best = max(trial.batches_per_second for trial in trials)
    near = [t for t in trials if t.batches_per_second >= GOOD_ENOUGH * best]
    prefer_pin = any(t.pin_memory for t in trials)
    choice = min(near, key=lambda t: (t.num_workers, t.pin_memory != prefer_pin, t.prefetch_factor or 0))
    return choice.kwargs()
