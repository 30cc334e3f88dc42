"""What an epoch order costs a rank at scale: Permutation (on demand) against torch.randperm,
then the sampler's plans (plain, grouped, mixed) for N samples on W ranks.

    python benchmarks/scale.py            # N = 10^6, 10^8, 10^9; W = 8, 128, 1024
    python benchmarks/scale.py --quick    # N = 10^6 only: a smoke run

For each N, rank 0 of a world of 1024 needs the indices of its first batch of 256 positions.
- Permutation: build ``Permutation(N, key)`` and look up those 256 positions.
- torch.randperm: materialise the whole order (``torch.randperm(N)``, int64) and slice it, as
  a sampler does today; every rank pays this. Run for 10^6 and 10^8 only; 10^9 (8 GB) is
  extrapolated from the per-sample time and 8 bytes a sample at 10^8.

Each measurement runs in a fresh process (so the memory high-water mark is its own): seconds
(median of repeats for Permutation, one run of randperm at 10^8) and extra memory: the
tracemalloc peak for Permutation (numpy reports its buffers there), the growth of the peak RSS
(``ru_maxrss``) for randperm (torch's allocations are invisible to tracemalloc).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

# Run from a checkout without `pip install -e .`: make the repository's recipes importable.
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

BATCH = 256
WORLD = 1024  # the world size of the scenario; rank 0's first batch is positions 0..255
SIZES = (10**6, 10**8, 10**9)
RANDPERM_MAX = 10**8  # larger orders are extrapolated, not allocated
KEY = 0x5EED


def measure_permutation(n: int, repeats: int = 7) -> dict:
    import numpy as np

    from recipes.core.sampling.permutation import Permutation

    positions = np.arange(BATCH)

    def first_batch() -> np.ndarray:
        return Permutation(n, KEY)[positions]

    first_batch()  # warm-up: imports and numpy's first calls
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        first_batch()
        times.append(time.perf_counter() - start)
    tracemalloc.start()
    first_batch()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {"seconds": statistics.median(times), "bytes": peak}


def measure_randperm(n: int) -> dict:
    import torch

    torch.randperm(1000)[:BATCH]  # warm-up
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    start = time.perf_counter()
    order = torch.randperm(n)
    order[:BATCH].clone()
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"seconds": seconds, "bytes": after - before}


PLANS = ("plain", "grouped", "length", "mixed")
WORLDS = (8, 128, 1024)
# Beyond these sizes a row is computed from the largest measured one: the fields in GROWS scale
# linearly in N, the others stay as measured (a plan's memory is a window's, whatever N is).
MEASURED_MAX = {"plain": 10**9, "grouped": 10**8, "length": 10**8, "mixed": 10**9}
GROWS = {"plain": (), "grouped": ("seconds",), "length": (), "mixed": ()}


class Sized:
    """A dataset of ``n`` samples that are never read: what a sampler or a mixture plans over."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> int:
        return index


def measure_plan(plan: str, n: int, world_size: int) -> dict:
    """Construction and the first batch of the last rank, its extra memory and its state's size."""
    import numpy as np

    from recipes.core import ByGroup, ByLength, GroupedBatchSampler, MixedDataset, Shuffle

    GroupedBatchSampler(1000, BATCH, seed=0, plan=ByGroup(np.arange(1000) % 2))  # warm-up: imports
    if plan in ("grouped", "length"):  # memory-mapped per-sample arrays, as a dataset keeps them
        dtype = np.int8 if plan == "grouped" else np.int32
        values = np.lib.format.open_memmap(f"/tmp/scale-{plan}-{os.getpid()}.npy", mode="w+", dtype=dtype, shape=(n,))
        for lo in range(0, n, 1 << 24):  # portrait / landscape; token counts 1..511
            chunk = np.arange(lo, min(lo + (1 << 24), n), dtype=np.int64)
            values[lo : lo + len(chunk)] = chunk % 2 if plan == "grouped" else 1 + (chunk * 7919) % 511
        values.flush()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    tracemalloc.start()
    start = time.perf_counter()
    if plan == "plain":
        made = Shuffle()
    elif plan == "grouped":
        made = ByGroup(values)
    elif plan == "length":
        made = ByLength(values)
    else:
        made = Shuffle(draws=MixedDataset([Sized(n // 2), Sized(n - n // 2)], [1, 3]).epoch_indices)
    sampler = GroupedBatchSampler(n, BATCH, drop_last=True, seed=0, plan=made, rank=world_size - 1,
                                  world_size=world_size)
    next(iter(sampler))
    seconds = time.perf_counter() - start
    traced = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
    if plan in ("grouped", "length"):
        os.unlink(values.filename)
    return {"seconds": seconds, "bytes": max(traced, grown), "state": len(json.dumps(sampler.state_dict()))}


def plan_table(sizes: tuple[int, ...]) -> None:
    print("\n| plan | N | W | planning time | extra memory per rank | state |")
    print("|---|---|---|---|---|---|")
    for plan in PLANS:
        measured: dict[int, tuple[dict, int]] = {}  # per world size: the largest run and its N
        for n in sizes:
            for world_size in WORLDS:
                if n <= MEASURED_MAX[plan]:
                    row = in_fresh_process(f"plan-{plan}-{world_size}", n)
                    measured[world_size], how = (row, n), ""
                else:
                    row, base = measured[world_size]
                    row = {key: value * n / base if key in GROWS[plan] else value for key, value in row.items()}
                    how = " (computed)"
                print(f"| {plan} | 10^{len(str(n)) - 1} | {world_size} | {duration(row['seconds'])}{how} | "
                      f"{size(row['bytes'])}{how} | {row['state']} B |")
    print("\nplain and mixed: keyed permutations, batch by batch (O(1)). grouped and length: the epoch")
    print("planned a window of 2^20 places at a time (O(window) memory); grouped counts every window's")
    print("batches first (O(N) time). computed rows (10^9): grouped's time scales linearly from its")
    print("10^8 run, every other field is that run's (length's memory and time are a window's).")


def in_fresh_process(side: str, n: int) -> dict:
    command = [sys.executable, __file__, "--one", side, str(n)]
    result = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def size(num_bytes: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if num_bytes >= scale:
            return f"{num_bytes / scale:.1f} {unit}"
    return f"{num_bytes:.0f} B"


def duration(seconds: float) -> str:
    return f"{seconds:.2f} s" if seconds >= 1 else f"{seconds * 1e3:.2f} ms"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="N = 10^6 only")
    parser.add_argument("--one", nargs=2, metavar=("SIDE", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        side, n = args.one[0], int(args.one[1])
        if side.startswith("plan-"):
            _, plan, world_size = side.split("-")
            print(json.dumps(measure_plan(plan, n, int(world_size))))
        else:
            print(json.dumps(measure_permutation(n) if side == "permutation" else measure_randperm(n)))
        return 0
    sizes = SIZES[:1] if args.quick else SIZES
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(f"rank 0 of {WORLD}: the indices of its first batch of {BATCH} positions "
          f"({os.cpu_count()} CPUs, load average {load})\n")
    print("| N | Permutation time | Permutation memory | randperm time | randperm memory |")
    print("|---|---|---|---|---|")
    per_sample = None
    for n in sizes:
        ours = in_fresh_process("permutation", n)
        if n <= RANDPERM_MAX:
            peer = in_fresh_process("randperm", n)
            per_sample = peer["seconds"] / n
            peer_cells = f"{duration(peer['seconds'])} | {size(peer['bytes'])}"
        else:
            peer_cells = (f"~{duration(per_sample * n)} (computed) | ~{size(8 * n)} (computed)"
                          if per_sample else "- | -")
        print(f"| 10^{len(str(n)) - 1} | {duration(ours['seconds'])} | {size(ours['bytes'])} | {peer_cells} |")
    print("\nPermutation memory: tracemalloc peak; randperm memory: growth of the peak RSS.")
    print("computed: the per-sample time of the largest randperm run, and 8 bytes a sample.")
    plan_table(sizes)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
