"""A mixture's epoch draws are computed when asked for: the mixing rule holds exactly, and a
mixture of billion-sample sources plans its epoch in constant memory."""

import pickle
import tracemalloc
from collections import Counter

import numpy as np
import pytest
from torch.utils.data import Dataset

from recipes.core.sampling import draws as draws_module
from recipes.core.sampling.draws import EpochDraws
from recipes.core.loading.mixing import MixedDataset
from recipes.core.sampling.plans import Shuffle
from recipes.core.sampling.samplers import GroupedBatchSampler, SeededBatchSampler


@pytest.fixture(autouse=True, params=["whole", "lazy"])
def computed(request, monkeypatch):
    """Every test twice: small epochs computed whole, and as a large epoch is, draw by draw."""
    if request.param == "lazy":
        monkeypatch.setattr(draws_module, "WHOLE_EPOCH_MAX", 0)
    return request.param


class Sized(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        return index


@pytest.mark.parametrize(("sizes", "counts"), [([10, 3], [7, 12]), ([1], [5]), ([4, 0, 6], [4, 0, 2]), ([97, 64], [200, 1])])
def test_each_source_draws_its_count_and_shows_every_sample_before_repeating(sizes, counts):
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    per_source = [[] for _ in sizes]
    for epoch in range(4):
        draws = np.asarray(EpochDraws(sizes, counts, seed=2, epoch=epoch))
        assert len(draws) == sum(counts) and draws.dtype == np.int64
        sources = np.searchsorted(offsets, draws, side="right") - 1
        assert Counter(sources.tolist()) == {k: c for k, c in enumerate(counts) if c}
        for k in range(len(sizes)):
            per_source[k] += (draws[sources == k] - offsets[k]).tolist()
    for k, drawn in enumerate(per_source):
        # within a source, the draws are passes of permutations: any run's counts differ by at most one
        seen = Counter(drawn)
        if drawn:
            assert max(seen.values()) - min(seen.get(i, 0) for i in range(sizes[k])) <= 1


def test_any_places_in_any_order_give_the_same_draws(monkeypatch):
    draws = EpochDraws([50, 7, 1000], [30, 40, 100], seed=9, epoch=3)
    with monkeypatch.context() as whole_epochs:
        whole_epochs.setattr(draws_module, "WHOLE_EPOCH_MAX", 1 << 22)
        whole = np.asarray(EpochDraws([50, 7, 1000], [30, 40, 100], seed=9, epoch=3))
    places = np.random.default_rng(0).permutation(len(draws))[:50]
    assert np.array_equal(draws[places], whole[places])
    assert draws[5] == whole[5] and draws[-1] == whole[-1] and isinstance(draws[5], int)
    assert np.array_equal(draws[10:20], whole[10:20]) and list(draws) == whole.tolist()
    assert np.array_equal(pickle.loads(pickle.dumps(draws))[places], whole[places])
    with pytest.raises(IndexError):
        draws[len(draws)]


def test_epochs_and_seeds_draw_differently_and_the_same_twice():
    first = np.asarray(EpochDraws([100, 100], [60, 60], 0, 0))
    assert np.array_equal(first, np.asarray(EpochDraws([100, 100], [60, 60], 0, 0)))
    assert not np.array_equal(first, np.asarray(EpochDraws([100, 100], [60, 60], 0, 1)))
    assert not np.array_equal(first, np.asarray(EpochDraws([100, 100], [60, 60], 1, 0)))


def test_the_randperm_draws_keep_the_counts():
    draws = EpochDraws([10, 3], [7, 12], seed=2, epoch=1)
    keyed, drawn = np.asarray(draws), draws.drawn_by_randperm()
    assert Counter(keyed < 10) == Counter(drawn < 10) and not np.array_equal(keyed, drawn)


def test_a_mixture_of_billion_sample_sources_plans_in_constant_memory():
    mixed = MixedDataset([Sized(10**9), Sized(5 * 10**8)], [1, 3], samples_per_epoch=2 * 10**9)
    tracemalloc.start()
    try:
        sampler = SeededBatchSampler(len(mixed), 256, seed=0, plan=Shuffle(draws=mixed.epoch_indices), rank=7,
                                     world_size=1024)
        batch = next(iter(sampler))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(batch) == 256 and len(sampler) == 2 * 10**9 // 256 // 1024
    assert peak < 50 * 2**20, f"{peak / 2**20:.1f} MB"
    sources = Counter(mixed.locate(index)[0] for index, _ in batch)
    assert sources[1] > sources[0]  # weights 1:3 over sources of 2:1


def test_a_sampler_over_a_mixture_is_exact_across_ranks():
    mixed = MixedDataset([Sized(30), Sized(11)], [2, 1], samples_per_epoch=60)
    plan = Shuffle(draws=mixed.epoch_indices)
    single = list(GroupedBatchSampler(len(mixed), 4, seed=1, plan=plan, rank=0, world_size=1))
    ranks = [list(GroupedBatchSampler(len(mixed), 4, seed=1, plan=plan, rank=r, world_size=3)) for r in range(3)]
    assert [ranks[r][k] for k in range(len(ranks[0])) for r in range(3)] == single[: 3 * len(ranks[0])]
    assert Counter(i for b in single for i in b) == Counter(np.asarray(mixed.epoch_indices(1, 0)).tolist())
