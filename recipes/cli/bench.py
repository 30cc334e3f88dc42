"""``recipes bench DOMAIN PATH``: measure DataLoader settings on your data, through the recipe's loader.

    python -m recipes bench vision data/train --batch-size 64 --seconds 60 --step-ms 80

It builds the domain's training dataset from PATH and hands
``functools.partial(<domain>_loader, dataset, batch_size, train=True, device=..., seed=0)`` to
:func:`recipes.core.loading.tuning.tune_loader`, which runs it with every setting of ``num_workers``
(0 up to the usable CPUs), ``prefetch_factor`` and, on CUDA, ``pin_memory``. Each row of the
table is one setting: batches/s and samples/s after the first batch, the data-wait fraction
(the share of time spent in ``next(loader)`` while a training step of ``--step-ms`` is
simulated by sleeping; 50 ms by default, a mid-size model's step on one GPU, since with 0 the
loop does nothing but wait and every setting shows nearly 100%),
and the start-up time (workers starting and the first batch). The recommendation is the
cheapest setting within 5% of the best rate, printed as a dict to paste into the loader call.
"""

from __future__ import annotations

import argparse
import functools
from typing import Any

import torch

from recipes.cli.datasets import DataOptions, loader_function, open_dataset, quiet_tokenizers_in_workers, sample_count
from recipes.core.loading.loader import resolve_device, usable_cpus
from recipes.core.loading.tuning import Trial, tune_loader

COLUMNS = ("workers", "prefetch", "pin", "batches/s", "samples/s", "data-wait", "startup s")


def format_trials(trials: list[Trial], recommended: dict[str, Any] | None = None) -> str:
    """The per-setting table, the recommended row marked with ``*``."""
    rows = []
    for trial in trials:
        mark = "*" if recommended is not None and trial.kwargs() == recommended else " "
        rows.append((
            f"{mark}{trial.num_workers}",
            "-" if trial.prefetch_factor is None else str(trial.prefetch_factor),
            "yes" if trial.pin_memory else "no",
            f"{trial.batches_per_second:.1f}",
            f"{trial.samples_per_second:.0f}",
            f"{100 * trial.wait_fraction:.0f}%",
            f"{trial.startup_seconds:.2f}",
        ))
    widths = [max(len(column), *(len(row[i]) for row in rows)) for i, column in enumerate(COLUMNS)]
    lines = ["  ".join(column.rjust(width) for column, width in zip(COLUMNS, widths))]
    lines += ["  ".join(cell.rjust(width) for cell, width in zip(row, widths)) for row in rows]
    return "\n".join(lines)


def run(args: argparse.Namespace, options: DataOptions) -> int:
    device = resolve_device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda, but this PyTorch sees no CUDA device; use --device cpu")
    dataset = open_dataset(options, train=True)
    count = sample_count(dataset)
    if count < args.batch_size:
        raise ValueError(f"{options.path} holds {count} samples, fewer than one batch (--batch-size {args.batch_size})")
    quiet_tokenizers_in_workers()
    loader = loader_function(options.domain)
    factory = functools.partial(loader, dataset, args.batch_size, train=True, device=device, seed=0)
    top = usable_cpus() if args.max_workers is None else args.max_workers
    step = f"a simulated {args.step_ms:g} ms step per batch" if args.step_ms else "no step (the loader's raw rate)"
    print(f"{options.domain}: {type(dataset).__name__} with {count} samples from {options.path}")
    print(f"{loader.__name__}(dataset, {args.batch_size}, device={str(device)!r}); workers up to {top}; "
          f"{step}; about {args.seconds:g}s in all")
    recommended, trials = tune_loader(
        make_loader=factory, device=device, seconds=args.seconds, step_ms=args.step_ms, max_workers=top
    )
    print(format_trials(trials, recommended))
    if args.step_ms:
        wait = f"share of the time in next(loader) around the {args.step_ms:g} ms step (--step-ms)"
    else:
        wait = "nearly 100% by construction with --step-ms 0 (no step to hide the loading behind); pass your step time"
    print(f"data-wait: {wait}; startup: worker start and first batch; * = recommended "
          "(the cheapest setting within 5% of the best batches/s)")
    print("\nloader_kwargs = " + repr(recommended))
    print(f"loader = {loader.__name__}(dataset, {args.batch_size}, device={str(device)!r}, **loader_kwargs)")
    return 0
