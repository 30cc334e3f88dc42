"""shared_result on 2 real gloo ranks (spawned): rank 0 computes, every rank gets its result or its error."""

import json
import os
from pathlib import Path

import pytest
import torch.distributed as dist
import torch.multiprocessing as mp

from recipes.core.sampling.distributed import shared_result
from recipes.core.contracts.errors import DataError

pytestmark = pytest.mark.slow


def _refused() -> list[str]:
    raise DataError("http://host/shards: cannot read (403)")


def _unpicklable() -> list[str]:
    error = DataError("a listing error holding a lock")
    error.lock = __import__("threading").Lock()  # what broadcast_object_list cannot send
    raise error


def _rank(rank: int, init: str, out: str) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    try:
        calls: list[int] = []

        def listing() -> list[str]:
            calls.append(rank)
            return [f"shard-{n:03d}.tar" for n in range(3)]

        report: dict = {"listed": shared_result(listing), "calls": list(calls), "errors": []}
        for compute in (_refused, _unpicklable):
            try:
                shared_result(compute)
            except Exception as error:  # noqa: BLE001 - what each rank raises is the test
                report["errors"].append(f"{type(error).__name__}: {error}")
        calls.clear()
        # a dataset built on one rank alone (rank / world_size given): no collective, its own listing
        report["alone"] = shared_result(listing, rank=0, world_size=1) if rank == 1 else None
        report["alone_calls"] = list(calls)
        dist.barrier()
        Path(out, f"rank{rank}.json").write_text(json.dumps(report))
    finally:
        dist.destroy_process_group()


def test_rank_zero_computes_and_every_rank_gets_its_result_or_its_error(tmp_path):
    init = f"file://{tmp_path / 'rendezvous'}"
    mp.spawn(_rank, args=(init, str(tmp_path)), nprocs=2)
    zero, one = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2))
    assert zero["listed"] == one["listed"] == ["shard-000.tar", "shard-001.tar", "shard-002.tar"]
    assert zero["calls"] == [0] and one["calls"] == []  # rank 1 never listed
    assert zero["errors"] == one["errors"] == [
        "DataError: http://host/shards: cannot read (403)",
        "RuntimeError: DataError: a listing error holding a lock",
    ]
    assert one["alone"] == zero["listed"] and one["alone_calls"] == [1]


def test_without_a_process_group_each_process_computes_its_own():
    assert not dist.is_initialized()
    assert shared_result(lambda: [1, 2]) == [1, 2]
    with pytest.raises(DataError, match="403"):
        shared_result(_refused)
