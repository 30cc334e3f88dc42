"""Which rank am I, of how many, and one seed that every rank agrees on.

    rank, world_size = resolve_rank(rank, world_size)   # None: ask torch.distributed
    seed = shared_seed(seed)                             # None: a random seed, broadcast from rank 0

Samplers and self-sharding streams read the rank and world size once, at construction, in the
main process: a spawned DataLoader worker has no process group to ask. Without an initialised
process group a run is rank 0 of 1.
"""

from __future__ import annotations

import torch

from recipes.core.seeding import random_seed


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
