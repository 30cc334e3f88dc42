"""A keyed shuffle of ``[0, n)`` computed on demand: ``perm[position] -> index``, O(1) memory.

``torch.randperm(n)`` materialises the whole epoch order on every rank: 8 bytes a sample, 8 GB
per rank for 10^9 samples. Here the order is a keyed bijection instead, so a rank computes the
indices of just the positions it needs (its next batch) from ``(n, key)``.

    perm = Permutation(n=10**9, key=epoch_key)      # e.g. int(sample_seeds(seed, epoch, [0])[0])
    batch = perm[np.arange(256) + 256 * step]        # int64 indices, any positions, any order
    position = perm.inverse(batch[0])                # where an index falls in this epoch

How: a balanced Feistel network on the smallest even bit width ``2h`` with ``4^h >= n`` (a
bijection of ``[0, 4^h)`` whatever the round function), made a bijection of ``[0, n)`` by cycle
walking: a value ``>= n`` is encrypted again until it lands below ``n`` (the domain is under
``4n``, so under 4 steps expected). Round ``r`` maps the right half through SplitMix64 of it
xor a round key (SplitMix64 of the key and ``r``), cut to ``h`` bits. ``h`` is at least 3 (a
domain of 64 for n <= 16): with 2-bit halves some orders of 5 samples came out twice as often.

Six rounds: Luby-Rackoff needs 3 (pseudo-random) or 4 (strong) with truly random round
functions; ours are a fast mixer, so two more are cheap insurance (a round is ~1/6 of a lookup).
Two rounds leave a position-index correlation of ~0.03 at n = 10^6 (~30 sigma); 4 and 6 pass.
A shuffle, not a cipher: the key is not protected from whoever sees the orders.
"""

from __future__ import annotations

import operator

import numpy as np

from recipes.core.sampling.seeding import splitmix64, splitmix64_int

ROUNDS = 6
MIN_HALF_BITS = 3  # smaller halves shuffle unevenly (module docstring); walks of ~64/n steps at n <= 16
# Positions mapped at a time: a round's dozen temporaries of 2^16 values stay in the CPU's cache,
# 2-3x faster than one pass over 10^6 (`python benchmarks/scale.py`, planning times)
_CHUNK = 1 << 16
_TABLE_MAX = 1 << 22  # the largest domain that a request of a quarter of it maps through a table (32 MB)
MAX_N = 2**62  # positions, indices and their negatives all fit in int64
_MASK64 = 0xFFFF_FFFF_FFFF_FFFF


class Permutation:
    """A keyed bijection of ``[0, n)``: position -> index, computed on demand (O(1) memory).

    Args:
        n: the number of samples, ``0 <= n <= 2**62``.
        key: any int (taken modulo 2**64); different keys give unrelated orders.

    ``perm[i]`` for an int returns an int; for an integer array (any shape), a list, a slice
    or a range it returns an int64 array of the same shape. Negative positions count from the
    end, as in a sequence; others outside ``[0, n)`` raise ``IndexError``. Plain attributes
    only, so it pickles into DataLoader workers.
    """

    def __init__(self, n: int, key: int) -> None:
        n = operator.index(n)
        if not 0 <= n <= MAX_N:
            raise ValueError(f"n must be in [0, 2**62], got {n}")
        self.n = n
        self.key = operator.index(key) & _MASK64
        self._half_bits = _half_bits(n)
        self._half_mask = (1 << self._half_bits) - 1
        base = splitmix64_int(self.key)
        self._round_keys = tuple(splitmix64_int(base ^ r) for r in range(ROUNDS))

    def __len__(self) -> int:
        return self.n

    def __repr__(self) -> str:
        return f"Permutation(n={self.n}, key={self.key})"

    def __getitem__(self, positions: int | np.ndarray | list[int] | slice | range) -> int | np.ndarray:
        """The index at each position."""
        return self._map(positions, inverse=False)

    def inverse(self, indices: int | np.ndarray | list[int] | slice | range) -> int | np.ndarray:
        """The position of each index: ``perm.inverse(perm[i]) == i``."""
        return self._map(indices, inverse=True)

    def _map(self, values, inverse: bool):
        if isinstance(values, slice):
            values = range(*values.indices(self.n))
        if isinstance(values, range):
            return self._map_array(_range_array(values, self.n), inverse)
        if isinstance(values, (np.ndarray, list, tuple)):
            return self._map_array(np.asarray(values), inverse)
        value = operator.index(values)
        if not -self.n <= value < self.n:
            raise IndexError(f"position {value} is out of range for a Permutation of {self.n}")
        value %= self.n
        walk = self._decrypt_int if inverse else self._encrypt_int
        value = walk(value)
        while value >= self.n:
            value = walk(value)
        return value

    def _map_array(self, values: np.ndarray, inverse: bool) -> np.ndarray:
        if values.size == 0:
            return np.zeros(values.shape, dtype=np.int64)
        if values.dtype.kind not in "iu":
            raise TypeError(f"positions must be integers, got an array of {values.dtype}")
        low, high = int(values.min()), int(values.max())
        if low < -self.n or high >= self.n:
            bad = low if low < -self.n else high
            raise IndexError(f"position {bad} is out of range for a Permutation of {self.n}")
        values = values.astype(np.int64)
        if low < 0:
            values = np.where(values < 0, values + self.n, values)
        walk = self._decrypt if inverse else self._encrypt
        flat = values.reshape(-1).astype(np.uint64)
        domain = 1 << (2 * self._half_bits)
        if 4 * flat.size >= domain and domain <= _TABLE_MAX:
            # Much of a small domain asked for: one pass over all of it, and the walks become
            # gathers in that table (a walk of many steps costs many network passes otherwise).
            table = np.concatenate([walk(np.arange(start, min(start + _CHUNK, domain), dtype=np.uint64))
                                    for start in range(0, domain, _CHUNK)])
            return self._walk(flat, table.__getitem__).astype(np.int64).reshape(values.shape)
        out = np.empty(flat.shape, dtype=np.int64)
        for start in range(0, flat.size, _CHUNK):
            out[start : start + _CHUNK] = self._walk(flat[start : start + _CHUNK], walk)
        return out.reshape(values.shape)

    def _walk(self, values: np.ndarray, walk) -> np.ndarray:
        out = walk(values)
        # Cycle walking, on the still-out-of-range subset only (each step keeps ~1 - n / 4^h of it).
        todo = np.flatnonzero(out >= np.uint64(self.n))
        while todo.size:
            out[todo] = walk(out[todo])
            todo = todo[out[todo] >= np.uint64(self.n)]
        return out

    def _encrypt(self, x: np.ndarray) -> np.ndarray:
        return _encrypt(x, [np.uint64(key) for key in self._round_keys], self._half_bits)

    def _decrypt(self, x: np.ndarray) -> np.ndarray:
        half, mask = np.uint64(self._half_bits), np.uint64(self._half_mask)
        left, right = x >> half, x & mask
        for key in reversed(self._round_keys):
            left, right = right ^ (splitmix64(left ^ np.uint64(key)) & mask), left
        return (left << half) | right

    def _encrypt_int(self, x: int) -> int:
        """:meth:`_encrypt` on one Python int: ~4 us, where numpy's calls on a one-element array take ~70."""
        half, mask = self._half_bits, self._half_mask
        left, right = x >> half, x & mask
        for key in self._round_keys:
            left, right = right, left ^ (splitmix64_int(right ^ key) & mask)
        return (left << half) | right

    def _decrypt_int(self, x: int) -> int:
        half, mask = self._half_bits, self._half_mask
        left, right = x >> half, x & mask
        for key in reversed(self._round_keys):
            left, right = right ^ (splitmix64_int(left ^ key) & mask), left
        return (left << half) | right


def permute(n: int, keys: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """``Permutation(n, keys[i])[positions[i]]`` for every ``i`` in one vectorised pass: positions
    in many permutations of one size at once (a mixture source's passes, each its own key).
    ``keys`` and ``positions`` are 1-d arrays of one length; positions must lie in ``[0, n)``."""
    keys, positions = np.asarray(keys, dtype=np.uint64), np.asarray(positions, dtype=np.int64)
    if positions.size and not (0 <= positions.min() and positions.max() < n):
        raise IndexError(f"positions must lie in [0, {n})")
    half_bits = _half_bits(n)
    base = splitmix64(keys)
    round_keys = np.stack([splitmix64(base ^ np.uint64(r)) for r in range(ROUNDS)])  # as Permutation's, per key
    out = _encrypt(positions.astype(np.uint64), round_keys, half_bits)
    todo = np.flatnonzero(out >= np.uint64(n))
    while todo.size:  # cycle walking, as in Permutation
        out[todo] = _encrypt(out[todo], round_keys[:, todo], half_bits)
        todo = todo[out[todo] >= np.uint64(n)]
    return out.astype(np.int64)


def _half_bits(n: int) -> int:
    """Half the bits of the smallest even-width domain ``4^h >= n``, at least ``MIN_HALF_BITS``."""
    return max((max(n - 1, 0).bit_length() + 1) // 2, MIN_HALF_BITS)


def _encrypt(x: np.ndarray, round_keys, half_bits: int) -> np.ndarray:
    """The Feistel network on ``x``; each round key a uint64 or an array of one per value."""
    half, mask = np.uint64(half_bits), np.uint64((1 << half_bits) - 1)
    left, right = x >> half, x & mask
    for key in round_keys:
        left, right = right, left ^ (splitmix64(right ^ key) & mask)
    return (left << half) | right


def _range_array(values: range, n: int) -> np.ndarray:
    """The positions of ``values`` as int64, after checking they lie in ``[-n, n)``."""
    if len(values) == 0:
        return np.zeros(0, dtype=np.int64)
    low, high = min(values[0], values[-1]), max(values[0], values[-1])
    if low < -n or high >= n:
        bad = low if low < -n else high
        raise IndexError(f"position {bad} is out of range for a Permutation of {n}")
    if len(values) == 1:
        return np.array([values[0]], dtype=np.int64)
    # |step| <= high - low < 2n <= 2**63: no int64 product below overflows
    return np.arange(len(values), dtype=np.int64) * values.step + values.start
