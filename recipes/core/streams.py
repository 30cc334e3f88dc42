"""Building blocks for IterableDatasets that shard themselves: which reader am I, a shuffle buffer,
and equal step counts across ranks.

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

import torch
import torch.distributed as dist
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


_END = object()


class EqualSteps:
    """Iterate a rank's loader so that every rank stops at the same step (training on streams).

        loader = EqualSteps(DataLoader(stream, batch_size=32, num_workers=4))
        for batch in loader:                  # the same number of batches on every rank
            loss = ddp_model(batch).backward()

    A self-sharding stream gives the ranks nearly, not exactly, equal shares (byte ranges, shards
    of unequal size). A rank that runs one step more than the others waits forever in DDP's
    gradient all-reduce. Before each step the ranks agree, with one all-reduce (MIN) of "I have a
    batch" (a 4-byte message, next to the step's own gradient all-reduce), and all stop when the
    first one runs out. The few batches the others still held are not used this epoch; no
    sample goes to two ranks. Outside a process group of more than one rank it passes batches
    through unchanged. The build_loader presets wrap training loaders over an IterableDataset
    in it when a process group is initialised. Other attributes are the loader's.
    """

    def __init__(self, loader: Iterable[Any]) -> None:
        self.loader = loader

    def __getattr__(self, name: str) -> Any:
        if name == "loader":  # not set yet (unpickling): do not recurse
            raise AttributeError(name)
        return getattr(self.loader, name)

    def __iter__(self) -> Iterator[Any]:
        if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
            yield from self.loader
            return
        # NCCL only reduces CUDA tensors; gloo and the others take CPU ones.
        device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")
        batches = iter(self.loader)
        while True:
            batch = next(batches, _END)
            flag = torch.tensor([batch is not _END], dtype=torch.int32, device=device)
            dist.all_reduce(flag, op=dist.ReduceOp.MIN)
            if not flag.item():
                return
            yield batch
