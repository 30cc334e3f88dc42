"""Grouped, length and budget plans order the epoch a window at a time: exact across ranks,
elastic, O(window) in memory whatever the epoch's size, and the epoch at once for states saved
before windows."""

import itertools
import tracemalloc

import numpy as np
import pytest

from recipes.core.sampling.plans import ByGroup, ByLength, TokenBudget
from recipes.core.sampling.samplers import GroupedBatchSampler

MAX_TOKENS = 64


def _plan(kind, n, window):
    rng = np.random.default_rng(n)
    lengths = rng.integers(1, 40, n)
    if kind == "group":
        return ByGroup(rng.integers(0, 3, n), window=window)
    if kind == "length":
        return ByLength(lengths, window=window)
    return TokenBudget(lengths, MAX_TOKENS, window=window)


def _ranks(plan, n, batch, world, drop_last, epoch=0):
    samplers = [GroupedBatchSampler(n, batch, drop_last=drop_last, seed=5, plan=plan, rank=r, world_size=world)
                for r in range(world)]
    for sampler in samplers:
        sampler.set_epoch(epoch)
    return [[list(b) for b in sampler] for sampler in samplers]


CASES = [case for case in itertools.product(["group", "length", "budget"], [5, 97, 300], [4, 7], [1, 3], [False, True],
                                            [8, 50]) if not (case[0] == "budget" and case[4])]


@pytest.mark.parametrize(("kind", "n", "batch", "world", "drop_last", "window"), CASES, ids=lambda v: str(v))
def test_windows_keep_every_rule_of_the_epoch(kind, n, batch, world, drop_last, window):
    plan = _plan(kind, n, window)
    per_rank = _ranks(plan, n, batch, world, drop_last)
    assert len({len(batches) for batches in per_rank}) == 1  # the same number of steps everywhere
    single = _ranks(plan, n, batch, 1, drop_last)[0]
    interleaved = [per_rank[r][k] for k in range(len(per_rank[0])) for r in range(world)]
    assert interleaved == single[: len(interleaved)] and len(single) - len(interleaved) < world
    seen = [i for b in single for i in b]
    assert len(seen) == len(set(seen))  # no sample twice in an epoch
    whole = max(window - window % batch, batch)  # windows hold whole batches
    windows = -(-n // whole)
    if kind == "group":
        assert all(len({int(plan.groups[i]) for i in b}) == 1 for b in single)
        if drop_last:  # each window drops what its groups leave over
            assert n - len(seen) <= windows * 3 * (batch - 1) and all(len(b) == batch for b in single)
        else:
            assert sorted(seen) == list(range(n))
    elif kind == "length":
        assert len(seen) == (n - n % batch if drop_last else n)  # only the last window leaves a remainder
    else:
        assert sorted(seen) == list(range(n))
        assert all(len(b) == 1 or len(b) * max(plan.lengths[b]) <= MAX_TOKENS for b in single)
        assert all(len(b) <= batch for b in single)


def test_a_window_sorts_by_length_as_the_whole_epoch_would():
    n, window = 4096, 1024
    lengths = np.random.default_rng(0).integers(1, 1000, n)
    batches = _ranks(ByLength(lengths, noise=0, window=window), n, 16, 1, True)[0]
    spread = [np.ptp(lengths[b]) for b in batches]
    assert np.median(spread) <= 40  # 1024 samples of 1..999 leave neighbours about one apart
    epochs = [_ranks(ByLength(lengths, window=window), n, 16, 1, True, epoch=e)[0] for e in (0, 1)]
    assert epochs[0] != epochs[1]


def test_a_state_saved_before_windows_plans_its_epoch_at_once():
    n, lengths = 500, np.random.default_rng(1).integers(1, 300, 500)
    small, whole = ByLength(lengths, window=32), ByLength(lengths, window=10**6)
    state = {"seed": 9, "epoch": 2, "yielded": 3, "world_size": 1, "offset": 0}
    expected = GroupedBatchSampler(n, 8, seed=9, plan=whole)
    expected.load_state_dict({**state, "order": "keyed"})
    for order in ("permutation", "randperm"):
        saved = GroupedBatchSampler(n, 8, seed=9, plan=small)
        saved.load_state_dict({**state, "order": order})
        got = [list(b) for b in saved]
        if order == "permutation":  # the same keyed order, planned at once
            assert got == [list(b) for b in expected]
        assert len(got) == -(-n // 8) - 3
    windowed = GroupedBatchSampler(n, 8, seed=9, plan=small)
    windowed.load_state_dict({**state, "order": "keyed"})
    assert [list(b) for b in windowed] != [list(b) for b in expected]


def test_a_window_planned_twice_comes_out_the_same():
    plan = TokenBudget(np.random.default_rng(2).integers(1, 40, 200), MAX_TOKENS, window=16)
    sampler = GroupedBatchSampler(200, None, seed=1, plan=plan)
    once = [list(b) for b in sampler.batches(0)]
    _, batches = sampler._plan(0)
    assert [list(batches[g]) for g in reversed(range(len(batches)))][::-1] == once


def test_memory_mapped_per_sample_arrays_are_not_copied(tmp_path):
    groups = np.lib.format.open_memmap(tmp_path / "groups.npy", "w+", np.int8, (1000,))
    lengths = np.lib.format.open_memmap(tmp_path / "lengths.npy", "w+", np.int32, (1000,))
    assert np.shares_memory(ByGroup(groups).groups, groups) and np.shares_memory(ByLength(lengths).lengths, lengths)
    assert ByLength([1.0, 2.0]).lengths.dtype == np.int64  # anything else becomes int64, as it always did


@pytest.mark.parametrize("window", [0, -1, 2.5, True])
def test_a_bad_window_is_refused(window):
    with pytest.raises(ValueError, match="window"):
        ByLength([1, 2], window=window)


def test_ten_million_lengths_on_a_thousand_ranks_plan_in_a_window_of_memory(tmp_path):
    n = 10**7
    lengths = np.lib.format.open_memmap(tmp_path / "lengths.npy", "w+", np.int32, (n,))
    lengths[:] = np.random.default_rng(0).integers(1, 512, n, dtype=np.int32)
    tracemalloc.start()
    try:
        sampler = GroupedBatchSampler(n, 256, seed=0, plan=ByLength(lengths, window=2**18), rank=1000,
                                      world_size=1024)
        first = next(iter(sampler))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(first) == 256 and len(sampler) == n // 256 // 1024
    # the epoch at once would take ~65 bytes a sample (650 MB); a window of 2^18 takes ~20 MB
    assert peak < 40 * 2**20, f"{peak / 2**20:.1f} MB"
