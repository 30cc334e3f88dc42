"""GroupedBatchSampler with a ByLength plan: a noisy full sort, new batchmates every epoch, no repeats."""

from itertools import pairwise

import numpy as np
import pytest

from recipes.core.plans import DEFAULT_LENGTH_NOISE, ByLength, TokenBudget
from recipes.core.samplers import GroupedBatchSampler


def _lengths(n=2000):
    return np.minimum(np.random.default_rng(7).lognormal(3, 1, n).astype(int) + 1, 300)


def _waste(batches, lengths):
    return 1 - sum(lengths[b].sum() for b in batches) / sum(len(b) * lengths[b].max() for b in batches)


def _runs_of_one_sorted_order(batches, lengths):
    """True if the batches, put back in order, are consecutive cuts of one longest-first sort."""
    ordered = sorted(batches, key=lambda b: (-int(lengths[b].max()), -int(lengths[b].min())))
    return all(lengths[a].min() >= lengths[b].max() for a, b in pairwise(ordered))


def test_noise_zero_is_the_sorted_floor_and_small_noise_stays_near_it():
    lengths = _lengths()
    ordered = np.argsort(-lengths, kind="stable")
    floor = _waste([ordered[i : i + 16] for i in range(0, 2000, 16)], lengths)
    exact = GroupedBatchSampler(2000, 16, seed=0, plan=ByLength(lengths, noise=0.0))
    assert _waste([np.array(b) for b in exact], lengths) == pytest.approx(floor)
    noisy = GroupedBatchSampler(2000, 16, seed=0, plan=ByLength(lengths, noise=0.05))
    plain = GroupedBatchSampler(2000, 16, seed=0)
    # how close depends on the data: benchmarks/README.md has the figures on real prose
    assert _waste([np.array(b) for b in noisy], lengths) <= 2 * floor
    assert _waste([np.array(b) for b in noisy], lengths) <= 0.2 * _waste([np.array(b) for b in plain], lengths)


def test_lengths_alone_use_the_default_noise():
    lengths = _lengths(500)
    default = GroupedBatchSampler(500, 8, seed=4, plan=ByLength(lengths))
    explicit = GroupedBatchSampler(500, 8, seed=4, plan=ByLength(lengths, noise=DEFAULT_LENGTH_NOISE))
    assert default.plan.noise == DEFAULT_LENGTH_NOISE
    assert list(default) == list(explicit)


@pytest.mark.parametrize("budget", [None, 300], ids=["fixed-size", "token-budget"])
def test_noise_zero_sorts_every_epoch_yet_equal_lengths_change_batchmates(budget):
    lengths = np.random.default_rng(3).integers(1, 6, 400)  # many equal lengths
    size = None if budget else 8
    plan = ByLength(lengths, noise=0) if budget is None else TokenBudget(lengths, budget, noise=0)
    sampler = GroupedBatchSampler(400, size, seed=5, plan=plan)
    epochs = [[np.array(b) for b in sampler] for _ in range(2)]
    for batches in epochs:
        assert _runs_of_one_sorted_order(batches, lengths)
        assert sorted(i for b in batches for i in b) == list(range(400))
    assert {frozenset(b.tolist()) for b in epochs[0]} != {frozenset(b.tolist()) for b in epochs[1]}


def test_each_epoch_has_new_batchmates_and_drops_a_random_remainder():
    lengths = _lengths(1003)
    sampler = GroupedBatchSampler(1003, 16, seed=1, drop_last=True, plan=ByLength(lengths, noise=0.05))
    epochs = [[frozenset(b) for b in sampler] for _ in range(3)]
    for batches in epochs:
        seen = [i for b in batches for i in b]
        assert len(seen) == len(set(seen)) == 1003 - 1003 % 16
    assert len(set(epochs[0]) & set(epochs[1])) < 0.2 * len(epochs[0])
    dropped = [set(range(1003)) - set().union(*batches) for batches in epochs]
    assert dropped[0] != dropped[1] != dropped[2]  # not always the shortest samples


def test_length_noise_resumes_exactly():
    lengths = _lengths(300)
    sampler = GroupedBatchSampler(300, 8, seed=2, plan=ByLength(lengths, noise=0.1))
    expected = list(sampler)
    sampler.set_epoch(0)
    iterator = iter(sampler)
    taken = [next(iterator) for _ in range(5)]
    resumed = GroupedBatchSampler(300, 8, seed=None, plan=ByLength(lengths, noise=0.1))  # the state carries the seed
    resumed.load_state_dict(sampler.state_dict())
    assert taken + list(resumed) == expected
