"""GroupedBatchSampler with a ByLength plan: a jittered full sort, new batchmates every epoch, no repeats."""

from itertools import pairwise

import numpy as np
import pytest

from recipes.core.sampling.plans import DEFAULT_JITTER, DEFAULT_LENGTH_NOISE, ByLength, TokenBudget
from recipes.core.sampling.samplers import GroupedBatchSampler


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


def test_lengths_alone_use_the_default_jitter_and_noise_alone_no_jitter():
    lengths = _lengths(500)
    default = GroupedBatchSampler(500, 8, seed=4, plan=ByLength(lengths))
    explicit = GroupedBatchSampler(500, 8, seed=4, plan=ByLength(lengths, noise=0, jitter=DEFAULT_JITTER))
    assert (default.plan.noise, default.plan.jitter) == (0, DEFAULT_JITTER)
    assert list(default) == list(explicit)
    assert ByLength(lengths, noise=0.1).jitter == 0 and ByLength(lengths, jitter=0.5).noise == 0


def test_jitter_changes_batchmates_of_distinct_lengths_at_little_padding():
    lengths = np.random.default_rng(2).permutation(np.arange(1, 2001))  # no two equal: no ties to shuffle
    rank = np.empty(2000, dtype=int)
    rank[np.argsort(-lengths)] = np.arange(2000)
    floor = _waste([np.argsort(-lengths)[i : i + 16] for i in range(0, 2000, 16)], lengths)
    sampler = GroupedBatchSampler(2000, 16, seed=0, plan=ByLength(lengths, jitter=0.25))
    epochs = [[np.array(b) for b in sampler] for _ in range(2)]
    for batches in epochs:
        # keys move by < 4 places (0.25 batches), so a sample by < 8: a batch spans < 16 + 2 * 8 ranks
        assert max(int(np.ptp(rank[b])) for b in batches) < 16 + 16
        assert _waste(batches, lengths) <= 1.3 * floor
    kept = {frozenset(b.tolist()) for b in epochs[0]} & {frozenset(b.tolist()) for b in epochs[1]}
    assert len(kept) < 0.5 * len(epochs[0])
    exact = GroupedBatchSampler(2000, 16, seed=0, plan=ByLength(lengths, noise=0))
    assert {frozenset(b) for b in exact} == {frozenset(b) for b in exact}  # without jitter: the same batches


@pytest.mark.parametrize("named", [True, False], ids=["plan-named", "no-identity"])
def test_a_default_plan_resumes_a_state_saved_under_noise_0_05_with_its_batches(named):
    lengths = _lengths(300)
    sampler = GroupedBatchSampler(300, 8, seed=2, plan=ByLength(lengths, noise=DEFAULT_LENGTH_NOISE))
    expected = list(sampler)
    sampler.set_epoch(0)
    iterator = iter(sampler)
    taken = [next(iterator) for _ in range(5)]
    state = sampler.state_dict()
    if not named:  # as saved before states named their data
        state = {k: v for k, v in state.items() if k not in ("num_samples", "batch_size", "plan")}
    resumed = GroupedBatchSampler(300, 8, seed=2, plan=ByLength(lengths))
    resumed.load_state_dict(state)
    assert taken + list(resumed) == expected
    assert resumed.identity()["plan"] == "ByLength(noise=0.05), shuffled"  # and so its later states
    today = GroupedBatchSampler(300, 8, seed=2, plan=ByLength(lengths))
    today_batches = list(today)
    today.set_epoch(0)
    resumed.load_state_dict(today.state_dict())  # a state of today's default, on the same sampler
    assert list(resumed) == today_batches
    with pytest.raises(ValueError, match="plan=ByLength"):  # a plan the user chose is not swapped
        GroupedBatchSampler(300, 8, seed=2, plan=ByLength(lengths, noise=0.1)).load_state_dict(sampler.state_dict())


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
