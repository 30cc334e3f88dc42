"""Which rank am I, of how many, one seed that every rank agrees on, and equal step counts.

    rank, world_size = resolve_rank(rank, world_size)   # None: ask torch.distributed
    seed = shared_seed(seed)                             # None: a random seed, broadcast from rank 0
    shards = shared_result(lambda: glob_paths(pattern))  # listed on rank 0 alone, sent to the others

Samplers and self-sharding streams read the rank and world size once, at construction, in the
main process: a spawned DataLoader worker has no process group to ask. Without an initialised
process group a run is rank 0 of 1.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader

from recipes.core.sampling.seeding import random_seed


def distributed_rank_and_size() -> tuple[int, int]:
    """``(rank, world_size)`` of the initialised default process group, else ``(0, 1)``."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1


def resolve_rank(rank: int | None = None, world_size: int | None = None) -> tuple[int, int]:
    """``(rank, world_size)``: the values given, the process group's for those left None.

    Raises:
        ValueError: ``rank`` is not in ``0 .. world_size - 1``.
    """
    default_rank, default_size = distributed_rank_and_size()
    rank = default_rank if rank is None else int(rank)
    world_size = default_size if world_size is None else int(world_size)
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is outside world_size {world_size}")
    return rank, world_size


def shared_seed(seed: int | None) -> int:
    """Return ``seed``, or a fresh random one that every rank of the process group agrees on."""
    if seed is not None:
        return int(seed)
    seed = random_seed()
    if distributed_rank_and_size()[1] > 1:
        box = [seed]
        torch.distributed.broadcast_object_list(box, src=0)
        seed = box[0]
    return seed


T = TypeVar("T")


def shared_result(compute: Callable[[], T], rank: int | None = None, world_size: int | None = None) -> T:
    """``compute()`` run on rank 0 alone and its result sent to every rank (``broadcast_object_list``).

    A stream lists its shards and asks their sizes here: 10,000 objects are listed once per job,
    not once per rank, and every rank splits the same list. An exception on rank 0 is raised on
    every rank, so none waits for a result that never comes. Each process computes its own
    result without a process group of more than one rank, or when ``rank`` / ``world_size``
    name other than the group's (a dataset built on one rank alone, which no other rank joins).
    """
    group_rank, group_size = distributed_rank_and_size()
    if group_size == 1 or resolve_rank(rank, world_size) != (group_rank, group_size):
        return compute()
    box: list[Any] = [None]
    if group_rank != 0:
        torch.distributed.broadcast_object_list(box, src=0)
    else:
        try:
            box[0] = (True, compute())
        except Exception as error:  # noqa: BLE001 - sent to the other ranks, then raised here too
            box[0] = (False, error)
        try:
            torch.distributed.broadcast_object_list(box, src=0)
        except Exception as failure:  # noqa: BLE001 - it did not pickle, so nothing was sent: send why
            done, result = box[0]
            what = f"{type(result).__name__}: {result}" if not done else f"rank 0's result does not pickle: {failure}"
            box[0] = (False, RuntimeError(what))
            torch.distributed.broadcast_object_list(box, src=0)
    done, result = box[0]
    if not done:
        raise result
    return result


_END = object()


class EqualSteps(DataLoader):
    """Iterate a rank's loader so that every rank stops at the same step (training on streams).

        loader = EqualSteps(DataLoader(stream, batch_size=32, num_workers=4))
        for batch in loader:                  # the same number of batches on every rank
            loss = ddp_model(batch).backward()

    A self-sharding stream gives the ranks nearly, not exactly, equal shares. A rank that runs one
    step more than the others waits forever in DDP's gradient all-reduce. Before each step the ranks
    agree, with one all-reduce (MIN) of "I have a batch" (a 4-byte message, next to the step's own
    gradient all-reduce), and all stop when the first one runs out; the others read their last
    batches to the end of the pass unused (a step or so), so the loader's ``state_dict`` says the
    pass is over, as it is. No sample goes to two ranks. Outside a process group of more than one
    rank it passes batches through unchanged. The stream presets (``recipes.core.loading.loader.stream_loader``)
    wrap training loaders in it when a process group is initialised.

    Other attributes are the loader's (``dataset``, ``set_epoch``...): it is the ``DataLoader`` it
    wraps, for the trainers that take only those (Accelerate's ``prepare`` keeps it for
    ``save_state``); ``DataLoader.__init__``, which would build another, is not called. Its
    ``state_dict`` holds every rank's loader state (see :meth:`state_dict`).
    """

    def __init__(self, loader: Iterable[Any]) -> None:
        self.__dict__["loader"] = loader  # DataLoader.__setattr__ guards some names: none of them

    def __getattr__(self, name: str) -> Any:
        if name == "loader":  # not set yet (unpickling): do not recurse
            raise AttributeError(name)
        return getattr(self.loader, name)

    def state_dict(self) -> dict[str, Any]:
        """``{"ranks": [each rank's loader state]}``, gathered from all ranks: call it on every rank at
        once, as Accelerate's ``save_state`` and Lightning's checkpoints do. Each rank reads its own
        part of the stream, and those trainers keep one loader state (rank 0's, or the last written),
        which must resume every rank."""
        state = self.loader.state_dict()
        if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
            return state
        states: list[Any] = [None] * dist.get_world_size()
        dist.all_gather_object(states, state)
        return {"ranks": states}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Load this rank's part of a :meth:`state_dict` (a plain loader state is loaded as it is)."""
        if isinstance(state, dict) and set(state) == {"ranks"}:
            rank, world_size = distributed_rank_and_size()
            if not isinstance(state["ranks"], list) or len(state["ranks"]) != world_size:
                saved = len(state["ranks"]) if isinstance(state["ranks"], list) else type(state["ranks"]).__name__
                raise ValueError(f"EqualSteps state: ranks holds {saved} loader states, for {world_size} ranks: "
                                 "resume with the world size the state was saved with")
            state = state["ranks"][rank]
        self.loader.load_state_dict(state)

    def __len__(self) -> int:
        raise TypeError("EqualSteps has no length: the ranks agree on the last step as they run")

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
                for _ in batches:  # the pass read to its end: a state saved now resumes at the next one
                    pass
                return
            yield batch
