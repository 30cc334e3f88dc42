"""Permutation: a keyed bijection of [0, n) computed on demand, and a good shuffle."""

import collections
import math
import pickle

import numpy as np
import pytest

from recipes.core.sampling.permutation import MAX_N, Permutation, permute

SIZES = [0, 1, 2, 3, 7, 16, 17, 64, 65, 97, 1000, 1024, 4093, 65536, 100003]
KEYS = [0, 1, 12345, -1, 2**64 + 7, 0xDEADBEEF_CAFEBABE]
BIG = 10**6


@pytest.fixture(scope="module")
def big_orders() -> dict[int, np.ndarray]:
    """The whole order of n = 10^6 under two keys, computed once for the statistics tests."""
    return {key: Permutation(BIG, key)[np.arange(BIG)] for key in (3, 4)}


@pytest.mark.parametrize("n", SIZES)
def test_every_index_appears_once_and_inverse_round_trips(n):
    positions = np.arange(n)
    for key in KEYS:
        perm = Permutation(n, key)
        indices = perm[positions]
        assert indices.dtype == np.int64 and len(perm) == n
        np.testing.assert_array_equal(np.sort(indices), positions)
        np.testing.assert_array_equal(perm.inverse(indices), positions)
        np.testing.assert_array_equal(perm[perm.inverse(positions)], positions)


@pytest.mark.parametrize("n", [1, 2, 7, 65, 4093])
def test_scalar_lookups_agree_with_array_lookups(n):
    perm = Permutation(n, 99)
    indices = perm[np.arange(n)]
    some = range(0, n, max(1, n // 50))
    assert [perm[i] for i in some] == indices[list(some)].tolist()
    assert all(type(perm[i]) is int for i in some)
    assert [perm.inverse(int(indices[i])) for i in some] == list(some)
    assert perm[np.int32(n - 1)] == indices[-1]


def test_slices_ranges_lists_and_shapes():
    perm = Permutation(1000, 5)
    every = perm[np.arange(1000)]
    np.testing.assert_array_equal(perm[:], every)
    np.testing.assert_array_equal(perm[10:500:7], every[10:500:7])
    np.testing.assert_array_equal(perm[::-3], every[::-3])
    np.testing.assert_array_equal(perm[990:2000], every[990:])
    np.testing.assert_array_equal(perm[range(3, 40, 4)], every[3:40:4])
    np.testing.assert_array_equal(perm[[5, 1, 5]], every[[5, 1, 5]])
    np.testing.assert_array_equal(perm[np.arange(12, dtype=np.uint16).reshape(3, 4)], every[:12].reshape(3, 4))
    assert perm[5:5].shape == (0,) and perm[5:5].dtype == np.int64
    assert perm[[]].shape == (0,)


def test_negative_positions_count_from_the_end_and_others_raise():
    perm = Permutation(100, 1)
    assert perm[-1] == perm[99] and perm[-100] == perm[0]
    np.testing.assert_array_equal(perm[np.array([-1, -100, 3])], perm[[99, 0, 3]])
    np.testing.assert_array_equal(perm[range(-3, 0)], perm[97:])
    for bad in (100, -101, np.array([0, 100]), np.array([-101]), np.array([2**63], dtype=np.uint64), range(98, 101)):
        with pytest.raises(IndexError, match="out of range for a Permutation of 100"):
            perm[bad]
    with pytest.raises(IndexError):
        Permutation(0, 1)[0]
    with pytest.raises(TypeError, match="must be integers"):
        perm[np.array([0.5])]
    with pytest.raises(ValueError, match=r"2\*\*62"):
        Permutation(MAX_N + 1, 0)


def test_different_keys_give_different_orders():
    orders = {tuple(Permutation(1000, key)[:].tolist()) for key in KEYS}
    assert len(orders) == len(KEYS)
    # a key is taken modulo 2**64
    np.testing.assert_array_equal(Permutation(1000, -1)[:], Permutation(1000, 2**64 - 1)[:])
    np.testing.assert_array_equal(Permutation(1000, 7)[:], Permutation(1000, 2**64 + 7)[:])


def _correlation(a: np.ndarray, b: np.ndarray) -> float:
    """Pearson correlation; on two permutations of [0, n) it is Spearman's (values are ranks)."""
    a, b = a.astype(np.float64), b.astype(np.float64)
    a -= a.mean()
    b -= b.mean()
    return float(a @ b / math.sqrt((a @ a) * (b @ b)))


def test_position_and_index_are_uncorrelated(big_orders):
    positions = np.arange(BIG)
    for order in big_orders.values():
        assert abs(_correlation(positions, order)) < 0.01  # a random order: ~0.001
        # high bits (coarse location) and low bits carry no trace of the position either
        assert abs(_correlation(positions >> 10, order >> 10)) < 0.01
        assert abs(_correlation(positions & 1, order & 1)) < 0.01


def test_two_keys_give_uncorrelated_orders(big_orders):
    first, second = big_orders.values()
    assert abs(_correlation(first, second)) < 0.01
    # not a shift of each other either: first[i] - second[i] spreads over the whole range
    assert np.unique((first - second) % BIG).size > BIG // 2


def test_fixed_points_and_neighbours_look_like_a_random_order(big_orders):
    positions = np.arange(BIG)
    for order in big_orders.values():
        # a random permutation has 1 fixed point on average (Poisson(1)): 10 is a 1e-7 event
        assert np.count_nonzero(order == positions) <= 10
        # consecutive positions land far apart: E|U - V| = n / 3 for two uniform draws
        assert abs(np.abs(np.diff(order)).mean() / BIG - 1 / 3) < 0.01


def test_small_orders_are_about_equally_likely_over_keys():
    # 4,800 keys over the 24 orders of 4 samples: ~200 each (chi-square, 23 degrees of freedom)
    counts = collections.Counter(tuple(Permutation(4, key)[i] for i in range(4)) for key in range(4800))
    assert len(counts) == 24
    chi2 = sum((count - 200) ** 2 / 200 for count in counts.values())
    assert chi2 < 60  # p ~ 5e-5 for a uniform draw; 2-bit halves (a domain of 16) score ~110
    # and the first position of 10 samples goes anywhere alike
    first = np.bincount([Permutation(10, key)[0] for key in range(5000)], minlength=10)
    assert first.min() > 400 and first.max() < 600


@pytest.mark.parametrize("n", [10**9, 2**40, MAX_N])
def test_a_batch_anywhere_in_a_huge_epoch(n):
    perm = Permutation(n, 2024)
    rng = np.random.default_rng(0)
    for positions in (np.arange(256), np.arange(n - 256, n), rng.integers(0, n, 256)):
        indices = perm[positions]
        assert indices.min() >= 0 and indices.max() < n
        assert np.unique(indices).size == np.unique(positions).size
        np.testing.assert_array_equal(perm.inverse(indices), positions)
    assert perm[n - 1] == perm[-1] == int(perm[np.array([n - 1])][0])


def test_pickles_to_the_same_order():
    perm = Permutation(12345, 77)
    copy = pickle.loads(pickle.dumps(perm))
    assert (copy.n, copy.key) == (perm.n, perm.key) and repr(copy) == "Permutation(n=12345, key=77)"
    np.testing.assert_array_equal(copy[:], perm[:])


@pytest.mark.parametrize("n", [5, 97, 1000, 5216, 70_000])
def test_a_whole_small_domain_through_its_table_gives_what_lookups_one_by_one_give(n):
    permutation = Permutation(n, 77)
    whole = permutation[np.arange(n)]  # a quarter of the domain or more: the table
    few = np.array([0, n // 3, n - 1])
    assert whole[few].tolist() == [permutation[int(p)] for p in few] == permutation[few].tolist()
    assert np.array_equal(np.sort(whole), np.arange(n))


def test_positions_in_many_permutations_at_once_are_each_permutations_own():
    rng = np.random.default_rng(4)
    for n in (1, 10, 97, 5000, 10**9):
        keys, positions = rng.integers(0, 2**63, 200, dtype=np.uint64), rng.integers(0, n, 200)
        expected = [Permutation(n, int(key))[int(p)] for key, p in zip(keys, positions)]
        assert permute(n, keys, positions).tolist() == expected
    with pytest.raises(IndexError):
        permute(10, np.zeros(1, dtype=np.uint64), np.array([10]))
