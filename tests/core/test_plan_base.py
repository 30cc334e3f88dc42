"""A plan defines how batches form, or fails: it never falls back to a plain shuffle, and ``len()``
of its sampler is the number of batches it yields (recipes/core/sampling/plans.py, CONVENTIONS rule 20)."""

import itertools

import numpy as np
import pytest

import recipes.core
from recipes.core.sampling import plans
from recipes.core.loading.mixing import MixedDataset
from recipes.core.sampling.plans import ByGroup, ByLength, Plan, Shuffle, TokenBudget
from recipes.core.sampling.samplers import GroupedBatchSampler

N = 103
LENGTHS = (np.arange(N) * 37) % 50 + 1
GROUPS = np.arange(N) % 3


class Pairs(Shuffle):
    """Batches of consecutive even-odd index pairs: a subclass that overrides ``arrange`` only."""

    def arrange(self, order, index, generator, batch_size, drop_last):
        run = order[np.argsort(index, kind="stable")]
        return self.cut(run, run, 2, drop_last)


class Halves(Plan):
    """Each window cut in two halves, counted without arranging (a fast path of its own)."""

    def arrange(self, order, index, generator, batch_size, drop_last):
        return [part for part in np.array_split(order, 2) if len(part)]

    def count(self, size, index, batch_size, drop_last):
        return min(size, 2)


class OnlyCut(Shuffle):
    """Shuffle's ``arrange``, with a ``cut`` of its own that makes batches of one sample."""

    def cut(self, run, index, batch_size, drop_last):
        return [run[i : i + 1] for i in range(len(run))]


def _plans_in_the_library():
    found, stack = [], [Plan]
    while stack:
        for subclass in stack.pop().__subclasses__():
            stack.append(subclass)
            if subclass.__module__ == plans.__name__:
                found.append(subclass)
    return found


def _make(cls, draws=None):
    arguments = {ByGroup: (GROUPS,), ByLength: (LENGTHS,), TokenBudget: (LENGTHS, 120)}.get(cls, ())
    return cls(*arguments, draws=draws)


def test_every_plan_of_the_library_is_checked_here():
    assert set(_plans_in_the_library()) == {Shuffle, ByGroup, ByLength, TokenBudget}


def test_a_plan_without_arrange_is_an_error_not_a_shuffle():
    class Forgot(Plan):
        def stretches(self, permutation, batch_size, drop_last):
            return None

    with pytest.raises(TypeError, match="abstract method.*arrange"):
        Forgot()
    with pytest.raises(TypeError, match="abstract method.*arrange"):
        GroupedBatchSampler(N, 4, seed=0, plan=Forgot())


def test_a_subclass_that_overrides_arrange_gets_its_own_batches_not_a_plain_shuffle():
    assert Pairs.stretches is Plan.stretches and Pairs.count is Plan.count  # Shuffle's fast paths not inherited
    assert OnlyCut.stretches is Plan.stretches and OnlyCut.count is Plan.count
    batches = list(GroupedBatchSampler(N, 8, seed=0, plan=Pairs()))
    pairs = [batch for batch in batches if len(batch) == 2]
    assert len(pairs) == N // 2 and all(batch[0] // 2 == batch[1] // 2 for batch in pairs)
    assert sorted(i for batch in batches for i in batch) == list(range(N))
    assert [len(batch) for batch in GroupedBatchSampler(N, 8, seed=0, plan=OnlyCut())] == [1] * N


CASES = list(itertools.product([Shuffle, ByGroup, ByLength, TokenBudget, Pairs, Halves, OnlyCut],
                               [False, True], [1, 3], [None, 16], [False, True]))


@pytest.mark.parametrize(("cls", "drop_last", "world_size", "window", "mixed"), CASES,
                         ids=lambda v: getattr(v, "__name__", str(v)))
def test_len_is_the_number_of_batches_for_every_plan(cls, drop_last, world_size, window, mixed):
    draws = None
    if mixed:  # a mixture's draws: one source drawn twice over, the other once
        draws = MixedDataset([range(60), range(43)], [2, 1], samples_per_epoch=N).epoch_indices
    plan = _make(cls, draws)
    if window is not None:
        plan.window = window
    for rank in range(world_size):
        sampler = GroupedBatchSampler(N, 4, drop_last=drop_last, seed=5, plan=plan, rank=rank, world_size=world_size)
        for epoch in range(2):
            sampler.set_epoch(epoch)
            expected = len(sampler)
            assert len(list(sampler)) == expected, (cls.__name__, rank, epoch)
        evaluation = GroupedBatchSampler(N, 4, shuffle=False, drop_last=drop_last, plan=plan, rank=rank,
                                         world_size=world_size)
        assert len(list(evaluation)) == len(evaluation)


def test_a_new_plan_is_listed_once_in_the_core():
    assert "Plan" in recipes.core.__all__ and recipes.core.Plan is Plan
    assert recipes.core.HOMES["Plan"] == "sampling.plans" and recipes.core.__all__.count("Plan") == 1
