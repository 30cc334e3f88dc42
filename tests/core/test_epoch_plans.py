"""A plain shuffled epoch is a keyed permutation computed on demand: exact across ranks, elastic,
and O(1) in memory and state at a billion samples."""

import itertools
import tracemalloc

import numpy as np
import pytest

from recipes.core.sampling.samplers import GroupedBatchSampler

BILLION = 10**9


def _ranks(n, batch_size, world_size, drop_last, epoch=0, seed=3):
    samplers = [
        GroupedBatchSampler(n, batch_size, shuffle=True, drop_last=drop_last, seed=seed, rank=r, world_size=world_size)
        for r in range(world_size)
    ]
    for sampler in samplers:
        sampler.set_epoch(epoch)
    return [list(sampler) for sampler in samplers]


CASES = [
    (n, batch, world, drop)
    for n, batch, world, drop in itertools.product([1, 2, 7, 64, 97, 128, 1021, 1024], [1, 4, 7, 16], [1, 2, 3, 8],
                                                   [False, True])
    if n >= world  # every rank has something to do
]


@pytest.mark.parametrize(("n", "batch", "world", "drop_last"), CASES, ids=lambda v: str(v))
def test_each_index_once_per_epoch_across_ranks_and_the_order_does_not_depend_on_the_world_size(n, batch, world,
                                                                                               drop_last):
    per_rank = _ranks(n, batch, world, drop_last)
    assert len({len(batches) for batches in per_rank}) == 1  # the same number of steps everywhere
    seen = [i for batches in per_rank for b in batches for i in b]
    assert len(seen) == len(set(seen)) and set(seen) <= set(range(n))
    if drop_last:
        assert all(len(b) == batch for batches in per_rank for b in batches)
    single = _ranks(n, batch, 1, drop_last)[0]
    interleaved = [per_rank[r][k] for k in range(len(per_rank[0])) for r in range(world)]
    assert interleaved == single[: len(interleaved)]  # rank r of W takes every W-th global batch
    assert len(single) - len(interleaved) < world  # fewer than W left over


def test_a_single_rank_sees_every_index_once_and_epochs_differ():
    first, second = _ranks(1000, 7, 1, False, epoch=0)[0], _ranks(1000, 7, 1, False, epoch=1)[0]
    assert sorted(i for b in first for i in b) == list(range(1000))
    assert first != second


def test_positions_are_uncorrelated_with_indices():
    n = 10**6
    (batches,) = _ranks(n, 1000, 1, False)
    order = np.concatenate([np.asarray(b) for b in batches])
    assert np.array_equal(np.sort(order), np.arange(n))
    # Spearman's rho of (position, index): both are ranks already
    rho = np.corrcoef(np.arange(n, dtype=np.float64), order.astype(np.float64))[0, 1]
    assert abs(rho) < 0.01


def test_a_billion_samples_on_a_thousand_ranks_plan_in_constant_memory():
    tracemalloc.start()
    try:
        sampler = GroupedBatchSampler(BILLION, 256, shuffle=True, drop_last=True, seed=7, rank=1000, world_size=1024)
        first = next(iter(sampler))
        steps, state = len(sampler), sampler.state_dict()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 50 * 2**20, f"{peak / 2**20:.0f} MB"
    assert len(first) == 256 and len(set(first)) == 256 and all(0 <= i < BILLION for i in first)
    assert steps == BILLION // 256 // 1024
    assert state == {"seed": 7, "epoch": 0, "yielded": 1, "world_size": 1024, "offset": 0, "order": "keyed",
                     "num_samples": BILLION, "batch_size": 256, "plan": "Shuffle(), shuffled, drop_last"}


def _global_batch(number, *, n=BILLION, batch_size=256, seed=7, epoch=0):
    """Global batch ``number`` of the epoch, read through a one-rank sampler resumed just before it."""
    sampler = GroupedBatchSampler(n, batch_size, shuffle=True, drop_last=True, seed=seed, rank=0, world_size=1)
    sampler.load_state_dict(
        {"seed": seed, "epoch": epoch, "yielded": number, "world_size": 1, "offset": 0, "order": "keyed"}
    )
    return next(iter(sampler))


def test_resuming_a_billion_sample_epoch_on_another_world_size_deals_the_rest_anew():
    saving = GroupedBatchSampler(BILLION, 256, shuffle=True, drop_last=True, seed=7, rank=5, world_size=1024)
    batches = iter(saving)
    taken = [next(batches), next(batches)]
    assert taken == [_global_batch(5), _global_batch(5 + 1024)]
    state = saving.state_dict()
    resumed = GroupedBatchSampler(BILLION, 256, shuffle=True, drop_last=True, seed=None, rank=7, world_size=512)
    resumed.load_state_dict(state)
    # 2 * 1024 global batches were taken; the 512 ranks share out the rest, rank 7 from 2048 + 7
    assert next(iter(resumed)) == _global_batch(2 * 1024 + 7)
    assert len(resumed) == BILLION // 256 // 512  # a pass of this epoch, counted from its start
