"""Run one check over many files in worker processes, the results in order under a tqdm bar.

    infos = map_in_workers(inspect_image, items, workers=2, desc="decoding images", unit="img",
                           inline_below=64, max_chunksize=512)

``recipes check`` decodes every file once, which is CPU-bound: a ``multiprocessing`` pool (fork
where the platform has it: workers start in milliseconds) takes the items in chunks, so 100k
small files cost a few hundred round trips, not 100k. Few items, or one worker, run in this
process, where a pool would cost more to start than it saves.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from recipes.core.loading.loader import usable_cpus

Result = TypeVar("Result")
CHUNKS_PER_WORKER = 16  # few enough round trips, small enough chunks for an even finish


def map_in_workers(
    function: Callable[[Any], Result],
    items: Sequence[Any],
    *,
    workers: int | None = None,
    progress: bool = True,
    desc: str,
    unit: str,
    inline_below: int,
    max_chunksize: int,
) -> list[Result]:
    """``[function(item) for item in items]``, in ``workers`` processes (default: the usable CPUs).

    Args:
        function: a module-level function (the pool pickles it by name), one item -> its result.
        items: what ``function`` takes, picklable.
        workers: processes to use; 1 runs every item in this process.
        progress: show a tqdm bar of ``desc``, counting ``unit``.
        inline_below: fewer items than this run in this process.
        max_chunksize: the most items one round trip to a worker carries.
    """
    from tqdm.auto import tqdm

    workers = usable_cpus() if workers is None else max(1, workers)
    with tqdm(total=len(items), desc=desc, unit=unit, disable=not progress) as bar:
        if workers == 1 or len(items) < inline_below:
            results = []
            for item in items:
                results.append(function(item))
                bar.update()
            return results
        # fork starts workers in milliseconds and nothing has started threads yet; elsewhere spawn
        method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
        chunksize = max(1, min(max_chunksize, len(items) // (workers * CHUNKS_PER_WORKER)))
        with multiprocessing.get_context(method).Pool(workers, initializer=_quiet_worker) as pool:
            results = []
            for result in pool.imap(function, items, chunksize=chunksize):
                results.append(result)
                bar.update()
            return results


def _quiet_worker() -> None:
    import torch

    torch.set_num_threads(1)  # one decode per process; threads would only fight over the cores
