"""``recipes demo [DOMAIN]``: each domain's recipe on the bundled fixtures.

    python -m recipes demo            # every domain
    python -m recipes demo text       # one

For each domain it prints the dataset size, the structure of one batch (keys, shapes, dtypes)
and the loader's throughput over one epoch. It works from a wheel install in any directory:
without the repository's ``fixtures/`` folder the fixtures are generated once into a temporary
directory. Each domain's ``recipes/<domain>/demo.py`` defines ``build(fixtures) -> (dataset, loader)``.
"""

from __future__ import annotations

import argparse
import importlib
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

DOMAINS = ("vision", "text", "detection", "multimodal")


def describe(batch: Any, prefix: str = "") -> list[str]:
    """One line per leaf of a nested batch: its path, then shape and dtype (or type)."""
    if isinstance(batch, torch.Tensor):
        kind = type(batch).__name__
        return [f"{prefix or 'batch'}: {kind} {list(batch.shape)} {str(batch.dtype).removeprefix('torch.')}"]
    if isinstance(batch, dict):
        return [line for key, value in batch.items() for line in describe(value, f"{prefix}[{key!r}]")]
    if isinstance(batch, (list, tuple)):
        if batch and all(isinstance(item, (torch.Tensor, dict)) for item in batch) and len(batch) > 2:
            # a list of per-sample items (detection): show the first, say how many
            return [f"{prefix}: {type(batch).__name__} of {len(batch)}"] + describe(batch[0], f"{prefix}[0]")
        return [line for i, value in enumerate(batch) for line in describe(value, f"{prefix}[{i}]")]
    return [f"{prefix or 'batch'}: {type(batch).__name__} {batch!r}"[:100]]


def batch_len(batch: Any) -> int:
    """Samples in a batch: the first tensor's length, or the length of a list of samples."""
    first = next(iter(batch.values())) if isinstance(batch, dict) else batch
    first = first[0] if isinstance(first, (list, tuple)) else first
    return len(first)


def _demo_builder(domain: str) -> Callable[[Path], tuple[Any, Any]] | None:
    try:
        module = importlib.import_module(f"recipes.{domain}.demo")
    except ModuleNotFoundError as error:
        if error.name not in (f"recipes.{domain}", f"recipes.{domain}.demo"):
            raise
        return None
    return module.build


def run_demo(domains: Sequence[str]) -> int:
    """Build and run each domain's demo loader for one epoch; print what it gave."""
    from recipes.fixtures import fixtures_dir

    root = fixtures_dir()
    print(f"fixtures: {root}")
    for domain in domains:
        print(f"\n== {domain} ==")
        build = _demo_builder(domain)
        if build is None:
            print("  (this domain's recipe is not in this version yet)")
            continue
        dataset, loader = build(root)
        start = time.perf_counter()
        batches = samples = 0
        first = None
        for batch in loader:
            first = batch if first is None else first
            batches += 1
            samples += batch_len(batch)
        seconds = time.perf_counter() - start
        print(f"  dataset: {type(dataset).__name__}, {len(dataset)} samples")
        print("  one batch:")
        for line in describe(first):
            print(f"    {line}")
        print(f"  one epoch: {batches} batches, {samples} samples in {seconds:.2f}s "
              f"({batches / seconds:.1f} batches/s, {samples / seconds:.0f} samples/s, worker start-up included)")
    return 0


def run(args: argparse.Namespace) -> int:
    return run_demo([args.domain] if args.domain else DOMAINS)
