"""The samples a mixture draws in one epoch, place -> mixture index, computed when asked for.

    draws = EpochDraws(sizes=[1000, 50], counts=[300, 100], seed=0, epoch=3)
    draws[np.arange(256)]     # the first 256 draws: int64 mixture indices
    np.asarray(draws)         # all of them at once (8 bytes a draw)

Source ``k`` draws ``counts[k]`` samples an epoch: draws ``e * counts[k]`` to
``(e + 1) * counts[k] - 1`` of an endless sequence of its permutations, a fresh keyed
:class:`recipes.core.sampling.permutation.Permutation` of its ``sizes[k]`` samples for each cycle. The
epoch's slots (source 0's draws, then source 1's, ...) are interleaved by one more keyed
permutation. So draw ``p`` is two permutation lookups and a search among the sources: a
sampler computes the draws of the batch it yields, and a mixture of billion-sample sources
plans its epoch in O(sources) memory (an epoch of up to 4M draws is computed once, whole).

:meth:`EpochDraws.drawn_by_randperm` draws the same epoch as mixtures drew them with
``torch.randperm`` (materialised), for sampler states saved then (their ``order`` says so).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import torch

from recipes.core.sampling.permutation import Permutation, permute
from recipes.core.sampling.seeding import epoch_generator, epoch_seeds, sample_seed, sample_seeds

_CYCLE_KEY = 1 << 62  # the seeds of the sources' permutations live apart from the samples' seeds
_INTERLEAVE_KEY = (1 << 64) - 5  # and the interleaving's apart from the sampler's order (2**64 - 3)
_CHUNK = 1 << 16  # draws computed at a time when iterating or materialising
# An epoch of at most this many draws is computed whole when first asked for (32 MB at most):
# then a batch costs an index, where its own lookups walk a few dozen numpy calls (~2 ms).
WHOLE_EPOCH_MAX = 1 << 22
_PER_CYCLE = 64  # draws of one cycle from which a lookup of its own beats one shared with other cycles


class EpochDraws(Sequence):
    """The mixture indices epoch ``epoch`` draws (see the module doc); ``draws[p]`` for an int
    is an int, for an integer array, list or slice an int64 array. Pickles, and takes O(sources)
    memory, or 8 bytes a draw up to ``WHOLE_EPOCH_MAX`` draws."""

    def __init__(self, sizes: Sequence[int], counts: Sequence[int], seed: int, epoch: int) -> None:
        self.sizes = np.asarray(sizes, dtype=np.int64)
        self.counts = np.asarray(counts, dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)[:-1]]).astype(np.int64)
        self.firsts = np.concatenate([[0], np.cumsum(self.counts)]).astype(np.int64)  # each source's first slot
        self.seed, self.epoch = seed, epoch
        key = int(sample_seeds(seed, epoch, [_INTERLEAVE_KEY])[0])
        self.interleave = Permutation(int(self.firsts[-1]), key)
        self._whole: np.ndarray | None = None  # an epoch of at most WHOLE_EPOCH_MAX draws, once computed

    def __len__(self) -> int:
        return len(self.interleave)

    def __getitem__(self, places: int | np.ndarray | list[int] | slice) -> int | np.ndarray:
        if len(self) <= WHOLE_EPOCH_MAX:
            if self._whole is None:
                self._whole = np.empty(len(self), dtype=np.int64)
                for start in range(0, len(self), _CHUNK):  # by chunks: the lookups' temporaries stay small
                    self._whole[start : start + _CHUNK] = self._draw(np.asarray(self.interleave[start : start + _CHUNK]))
            draws = self._whole[places]  # numpy's IndexError outside the epoch
        else:
            slots = np.asarray(self.interleave[places])  # raises IndexError outside the epoch
            draws = self._draw(slots.reshape(-1)).reshape(slots.shape)
        return int(draws) if isinstance(places, (int, np.integer)) else draws

    def __iter__(self) -> Iterator[int]:
        for start in range(0, len(self), _CHUNK):
            yield from self[np.arange(start, min(start + _CHUNK, len(self)))].tolist()

    def __array__(self, dtype: np.dtype | None = None, copy: bool | None = None) -> np.ndarray:
        return self[np.arange(len(self))].astype(dtype or np.int64, copy=False)

    def _draw(self, slots: np.ndarray) -> np.ndarray:
        """The mixture index of each slot (a place after the interleaving)."""
        source = np.searchsorted(self.firsts, slots, side="right") - 1
        drawn = self.epoch * self.counts[source] + (slots - self.firsts[source])  # in the source's sequence
        cycle, position = np.divmod(drawn, self.sizes[source])
        indices = np.empty(slots.shape, dtype=np.int64)
        for k in np.unique(source).tolist():
            here = np.flatnonzero(source == k)
            cycles, size = np.unique(cycle[here]), int(self.sizes[k])
            if len(here) < _PER_CYCLE * len(cycles):  # a few draws a cycle (a batch): all cycles in one lookup
                keys = epoch_seeds(self.seed, cycle[here], _CYCLE_KEY + k)  # one permutation a cycle
                indices[here] = permute(size, keys, position[here]) + self.offsets[k]
                continue
            for c in cycles.tolist():  # many (a whole epoch): a Permutation a cycle, which tables small ones
                at = here[cycle[here] == c]
                indices[at] = Permutation(size, sample_seed(self.seed, c, _CYCLE_KEY + k))[position[at]] + self.offsets[k]
        return indices

    def drawn_by_randperm(self) -> np.ndarray:
        """This epoch's draws as drawn with ``torch.randperm``: the same counts per source and
        the same rule, other permutations; O(draws) memory."""
        parts = [self._randperm_stretch(source) for source in range(len(self.sizes))]
        indices = np.concatenate(parts)
        order = torch.randperm(len(indices), generator=epoch_generator(self.seed, self.epoch)).numpy()
        return indices[order]

    def _randperm_stretch(self, source: int) -> np.ndarray:
        """Draws ``e*n .. (e+1)*n - 1`` of the source's endless sequence of randperm permutations."""
        count, size = int(self.counts[source]), int(self.sizes[source])
        first, stop = self.epoch * count, (self.epoch + 1) * count
        pieces = []
        for cycle in range(first // size, -(-stop // size)) if count else ():
            permutation = _randperm(size, sample_seed(self.seed, cycle, _CYCLE_KEY + source))
            lo, hi = max(first, cycle * size) - cycle * size, min(stop, (cycle + 1) * size) - cycle * size
            pieces.append(permutation[lo:hi])
        local = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int64)
        return local.astype(np.int64) + self.offsets[source]

    def __repr__(self) -> str:
        return f"EpochDraws({len(self)} draws from {len(self.sizes)} sources, epoch {self.epoch})"


def _randperm(size: int, key: int) -> np.ndarray:
    return torch.randperm(size, generator=torch.Generator().manual_seed(key)).numpy()
