"""``recipes demo [DOMAIN]``: each domain's recipe on the bundled fixtures.

    python -m recipes demo            # every domain
    python -m recipes demo text       # one

For each domain it prints the dataset size, the structure of one batch (keys, shapes, dtypes)
and how long one epoch took, with what made up the time (a rate on a few
fixture samples would measure start-up, not throughput: ``recipes bench`` measures that). It works from a wheel install in any directory:
without the repository's ``fixtures/`` folder the fixtures are generated once into a temporary
directory. Each domain's ``recipes/<domain>/demo.py`` defines ``build(fixtures) -> (dataset, loader)``.
"""

from __future__ import annotations

import argparse
import re
import time
from collections.abc import Sequence
from typing import Any

import torch

from recipes.core.contracts.nested import leaves, samples_in
from recipes.domains import DOMAINS, domain



def describe(batch: Any) -> list[str]:
    """One line per leaf of a batch: its path, then shape and dtype (tensors) or type and value.

    Leaves that differ only in a list position below the top level (the per-sample lists of a
    detection batch) are shown once, the first of them, with their count.
    """
    groups: dict[str, list[tuple[str, Any]]] = {}
    for path, leaf in leaves(batch):
        top = re.match(r"\[[^\]]*\]", path)
        head = top.group(0) if top else ""
        groups.setdefault(head + re.sub(r"\[\d+\]", "[i]", path[len(head):]), []).append((path, leaf))
    lines = []
    for members in groups.values():
        path, leaf = members[0]
        if isinstance(leaf, torch.Tensor):
            line = f"{path or 'batch'}: {type(leaf).__name__} {list(leaf.shape)} {str(leaf.dtype).removeprefix('torch.')}"
        else:
            line = f"{path or 'batch'}: {type(leaf).__name__} {leaf!r}"[:100]
        lines.append(line + (f"  (first of {len(members)})" if len(members) > 1 else ""))
    return lines


def run_demo(domains: Sequence[str]) -> int:
    """Build and run each domain's demo loader for one epoch; print what it gave."""
    from recipes.fixtures import UNAVAILABLE, fixtures_dir

    root = fixtures_dir()
    print(f"fixtures: {root}")
    for name in domains:
        print(f"\n== {name} ==")
        if (root / name / UNAVAILABLE).is_file():  # a generated tree: its writer's library was missing
            print(f"  skipped: {(root / name / UNAVAILABLE).read_text(encoding='utf-8').strip()}")
            continue
        try:
            dataset, loader = domain(name).load("demo")(root)  # recipes/<domain>/demo.py's build
        except ImportError as error:  # a library it needs at run time is missing (audio: FFmpeg's)
            print(f"  skipped: {error}")
            continue
        start = time.perf_counter()
        batches = samples = 0
        first = None
        for batch in loader:
            first = batch if first is None else first
            batches += 1
            samples += samples_in(batch)
        seconds = time.perf_counter() - start
        print(f"  dataset: {type(dataset).__name__}, {len(dataset)} samples")
        print("  one batch:")
        for line in describe(first):
            print(f"    {line}")
        print(f"  one epoch: {batches} batches, {samples} samples in {seconds:.2f}s, {_where(loader.num_workers)}")
        if samples < len(dataset) and (loader.drop_last or getattr(loader.batch_sampler, "drop_last", False)):
            print(f"  ({len(dataset) - samples} of {len(dataset)} samples left out: training drops incomplete "
                  "batches; pass drop_last=False to the preset, or train=False, to keep them)")
    return 0


def _where(workers: int) -> str:
    """Where one epoch's time went, in words that hold for this loader."""
    if workers == 0:
        return "in the main process (num_workers=0)"
    return f"with {workers} worker process{'es' if workers > 1 else ''}, start-up included"


def run(args: argparse.Namespace) -> int:
    return run_demo([args.domain] if args.domain else DOMAINS)
