"""Building blocks for IterableDatasets that shard themselves: which reader am I, a shuffle buffer.

    slot, slots = reader_slot(self.rank, self.world_size)     # in __iter__, i.e. in the worker
    items = buffer_shuffle(items, 10_000, random.Random(seed))

Every DataLoader worker of every rank runs its own copy of an IterableDataset's ``__iter__``;
unless each copy reads a different part of the data, every sample arrives ``workers x ranks``
times. ``reader_slot`` numbers the copies ``0 .. slots-1``, so a dataset can take its part.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from typing import Any

from torch.utils.data import get_worker_info


def reader_slot(rank: int, world_size: int) -> tuple[int, int]:
    """``(slot, slots)``: ``rank * num_workers + worker id`` and ``world_size * num_workers``.

    Call it inside ``__iter__`` (it reads ``get_worker_info()``); read ``rank`` and
    ``world_size`` in the main process, as spawned workers have no process group to ask.
    """
    info = get_worker_info()
    worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
    return rank * workers + worker, world_size * workers


def buffer_shuffle(items: Iterable[Any], size: int, rng: random.Random) -> Iterator[Any]:
    """Yield ``items`` in a random order, holding at most ``size`` of them at a time.

    Each new item takes the place of a random held one, which is yielded; the rest come out
    shuffled at the end. An item comes out at most ``size`` places earlier than it arrived
    (later, without bound), so a bigger buffer mixes further apart items.
    """
    buffer: list[Any] = []
    for item in items:
        if len(buffer) < size:
            buffer.append(item)
            continue
        position = rng.randrange(size)
        yield buffer[position]
        buffer[position] = item
    rng.shuffle(buffer)
    yield from buffer
