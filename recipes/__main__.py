"""Command line: ``python -m recipes demo [DOMAIN]`` (also installed as ``recipes``).

``demo`` runs each domain's recipe on the bundled fixtures and prints the dataset size, the
structure of one batch (keys, shapes, dtypes) and the loader's throughput. It works from a
wheel install in any directory: without the repository's ``fixtures/`` folder the fixtures are
generated once into a temporary directory.
"""

from __future__ import annotations

import argparse
import importlib
import sys
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


def _demo_builder(domain: str) -> Callable[[Path], tuple[Any, Any]] | None:
    try:
        module = importlib.import_module(f"recipes.{domain}.demo")
    except ModuleNotFoundError as error:
        if error.name not in (f"recipes.{domain}", f"recipes.{domain}.demo"):
            raise
        return None
    return module.build


def run_demo(domains: Sequence[str]) -> int:
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
            samples += _batch_len(batch)
        seconds = time.perf_counter() - start
        print(f"  dataset: {type(dataset).__name__}, {len(dataset)} samples")
        print(f"  one batch:")
        for line in describe(first):
            print(f"    {line}")
        print(f"  one epoch: {batches} batches, {samples} samples in {seconds:.2f}s "
              f"({batches / seconds:.1f} batches/s, {samples / seconds:.0f} samples/s, worker start-up included)")
    return 0


def _batch_len(batch: Any) -> int:
    if isinstance(batch, dict):
        batch = next(iter(batch.values()))
    if isinstance(batch, (list, tuple)):
        batch = batch[0]
    return len(batch)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="recipes", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo = commands.add_parser("demo", help="run every domain (or one) on the bundled fixtures")
    demo.add_argument("domain", nargs="?", choices=DOMAINS, help="only this domain")
    args = parser.parse_args(argv)
    if args.command == "demo":
        return run_demo([args.domain] if args.domain else DOMAINS)
    parser.error(f"unknown command {args.command}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
