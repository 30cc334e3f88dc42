"""The loader watchdog's cost per batch: a preset loader with the watch (the default) against one without.

    python benchmarks/watchdog.py            # 15 alternating rounds
    python benchmarks/watchdog.py --quick    # 3 rounds

Data: 8,192 in-memory items (16 int64 each), batches of 32 (256 batches a pass), 2 persistent
workers, the presets' composition (``build_loader``). With the watch, each worker notes its batch's
indices and the time in its row of a memory-mapped table and clears the time after loading; the
main process does nothing between batches (a wait wakes through torch's ``timeout``). Without it:
``stall_warning_s=None``. Each round times one whole pass of each loader, in alternating order,
after a warm-up pass; the figure is the median of the rounds' per-batch times and of their
differences. Also the workers' note alone (``loading`` + ``loaded`` on a mapped row), in a loop.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # recipes from this checkout

from recipes.core.workers import watchdog
from recipes.core.loading.loader import build_loader


class Small(Dataset):
    """Item i: 16 int64, made at once: the loader's own cost dominates."""

    def __len__(self) -> int:
        return 8192

    def __getitem__(self, index: int) -> torch.Tensor:
        return torch.full((16,), index, dtype=torch.int64)


def per_batch(rounds: int) -> None:
    loaders = {"watched (default)": build_loader(Small(), torch.stack, batch_size=32, train=True, device="cpu", seed=0,
                                                 num_workers=2),
               "unwatched": build_loader(Small(), torch.stack, batch_size=32, train=True, device="cpu", seed=0,
                                         num_workers=2, stall_warning_s=None)}
    assert loaders["watched (default)"].watch is not None and loaders["unwatched"].watch is None
    times: dict[str, list[float]] = {name: [] for name in loaders}
    for loader in loaders.values():
        sum(1 for _ in loader)  # warm-up: workers started
    for round_ in range(rounds):
        for name in list(loaders) if round_ % 2 == 0 else list(loaders)[::-1]:
            batches, start = 0, time.perf_counter()
            for _ in loaders[name]:
                batches += 1
            times[name].append((time.perf_counter() - start) / batches * 1e6)
    print(f"1. a pass of {batches} batches of 32 from 2 workers (median of {rounds} alternating rounds, us a batch)")
    for name, values in times.items():
        print(f"   {name:20s} {statistics.median(values):7.1f} us   (rounds: {min(values):.1f} to {max(values):.1f})")
    differences = [a - b for a, b in zip(times["watched (default)"], times["unwatched"])]
    spread = statistics.median(abs(a - b) for a, b in zip(times["unwatched"][1:], times["unwatched"][:-1]))
    print(f"   watched - unwatched: median {statistics.median(differences):+.1f} us a batch; round-to-round "
          f"change of the unwatched loader alone: {spread:.1f} us")


def note_alone(calls: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        table = Path(folder) / "table"
        np.zeros(watchdog.ROW, dtype=np.int64).tofile(table)
        watchdog._ROW = np.memmap(table, dtype=np.int64, mode="r+")  # what a watched worker holds
        indices = list(range(32))
        start = time.perf_counter()
        for _ in range(calls):
            watchdog.loading(indices)
            watchdog.loaded()
        elapsed = (time.perf_counter() - start) / calls * 1e6
        watchdog._ROW = None
    print(f"2. a worker's note of a batch of 32 (loading + loaded), {calls:,} calls: {elapsed:.2f} us a batch")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small smoke run")
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    per_batch(3 if args.quick else 15)
    note_alone(20_000 if args.quick else 200_000)


if __name__ == "__main__":
    main()
