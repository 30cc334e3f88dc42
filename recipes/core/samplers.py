"""One batch sampler for every domain: grouped, shuffled per epoch, resumable and rank-aware.

    sampler = GroupedBatchSampler(len(dataset), 32, shuffle=True, drop_last=True, seed=0,
                                  groups=aspect_ratio_bucket)        # or lengths=..., max_tokens=...
    loader = DataLoader(SeededDataset(dataset), batch_sampler=sampler, collate_fn=...)

What it does that ``RandomSampler`` + ``BatchSampler`` + ``DistributedSampler`` do not:

- Groups: ``groups`` (one small int per sample, e.g. portrait/landscape) keeps every batch within
  one group, like torchvision's detection reference, but never repeats a sample to fill one.
- Lengths: ``lengths`` sorts the whole epoch by ``log(length) + uniform(-length_noise,
  length_noise)``, drawn anew each epoch, cuts it into batches and shuffles their order. Batches
  hold similar lengths, so padding stays near the fully sorted floor, while samples whose lengths
  differ by less than about ``2 * length_noise`` (relative) trade places: batchmates change
  every epoch.
  ``max_tokens`` cuts by a token budget (batch size x longest sample) instead of a fixed count.
  Trade-off figures: benchmarks/README.md (``python benchmarks/text.py``).
- Epochs: each pass draws a new order from ``(seed, epoch)``; the epoch advances by itself at
  every new pass (``set_epoch`` still works, for code written for DistributedSampler).
- Resume: ``state_dict()`` is ``{"seed", "epoch", "yielded"}``; after ``load_state_dict`` the next
  pass yields exactly the batches that were still to come in the pass the state was taken from
  (none, if taken after its last batch but before it ended; the next epoch, if taken after it
  ended), as torchdata's StatefulDataLoader counts. That loader calls both for you.
- Ranks: with an initialised ``torch.distributed`` process group (or explicit ``rank`` and
  ``world_size``), training splits the epoch's *batches* across ranks and drops the few left
  over, so every rank runs the same number of steps (a rank that runs one step fewer hangs the
  others in all-reduce). Evaluation splits the samples into contiguous blocks: every sample is
  seen exactly once, with no padding duplicates (``DistributedSampler`` repeats samples to make
  the ranks even, which biases metrics); ranks may then differ by one batch.
- Seeds: with ``keyed=True`` each index comes with its own seed, ``(index, seed)``, for
  :class:`recipes.core.seeding.SeededDataset`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import Sampler

from recipes.core.distributed import resolve_rank, shared_seed
from recipes.core.seeding import epoch_generator, sample_seeds

# Half-width of the noise on log(length): samples within about 10% of each other's length can
# trade places. More = fresher batchmates every epoch and more padding (benchmarks/README.md).
DEFAULT_LENGTH_NOISE = 0.05


class GroupedBatchSampler(Sampler[list[Any]]):
    """Yields lists of dataset indices (or ``(index, seed)`` pairs when ``keyed``); see module doc.

    Args:
        num_samples: size of the dataset.
        batch_size: samples per batch; with ``max_tokens`` an upper bound (None = no bound).
        shuffle: a new random order every epoch (training); False keeps dataset order (eval).
        drop_last: drop incomplete batches (per group when grouping) instead of yielding them.
        seed: base seed shared by all ranks; None draws one (and broadcasts it across ranks).
        groups: int array [num_samples]; a batch never mixes two groups. Ignored in order mode.
        lengths: int array [num_samples] of sample lengths: batches of similar lengths.
        max_tokens: token budget per batch (needs ``lengths``): ``len(batch) * max(lengths)``.
        length_noise: half-width of the noise on log-length (needs ``lengths``); None =
            ``DEFAULT_LENGTH_NOISE``, 0 = sorted exactly (equal lengths still in random order).
        keyed: yield ``(index, per-sample seed)`` pairs for SeededDataset.
        rank, world_size: override what is read from ``torch.distributed``.
    """

    def __init__(
        self,
        num_samples: int,
        batch_size: int | None,
        *,
        shuffle: bool = True,
        drop_last: bool = False,
        seed: int | None = None,
        groups: Sequence[int] | np.ndarray | None = None,
        lengths: Sequence[int] | np.ndarray | None = None,
        max_tokens: int | None = None,
        length_noise: float | None = None,
        keyed: bool = False,
        rank: int | None = None,
        world_size: int | None = None,
    ) -> None:
        if batch_size is None and max_tokens is None:
            raise ValueError("give batch_size, max_tokens, or both")
        if batch_size is not None and batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if max_tokens is not None and lengths is None:
            raise ValueError("max_tokens needs the sample lengths (lengths=...)")
        if groups is not None and lengths is not None:
            raise ValueError("group by groups or by lengths, not both")
        if length_noise is not None and (lengths is None or length_noise < 0):
            raise ValueError(f"length_noise needs lengths=... and a value >= 0, got {length_noise}")
        self.length_noise = DEFAULT_LENGTH_NOISE if length_noise is None else float(length_noise)
        self.num_samples = int(num_samples)
        self.batch_size, self.max_tokens = batch_size, max_tokens
        self.shuffle, self.drop_last, self.keyed = shuffle, drop_last, keyed
        self.groups = self._per_sample(groups, "groups")
        self.lengths = self._per_sample(lengths, "lengths")
        self.rank, self.world_size = resolve_rank(rank, world_size)
        self.seed = shared_seed(seed)
        self.epoch = 0
        self._resume: tuple[int, int] | None = None  # (epoch, batches already yielded)
        self._position: tuple[int, int] | None = None  # where the running pass stands
        self._cache: tuple[int, list[np.ndarray]] | None = None

    def _per_sample(self, values: Any, name: str) -> np.ndarray | None:
        if values is None:
            return None
        array = np.asarray(values, dtype=np.int64)
        if array.shape != (self.num_samples,):
            raise ValueError(f"{name} must have one entry per sample ({self.num_samples}), got {array.shape}")
        return array

    # -- epochs and state ----------------------------------------------------------------------

    def set_epoch(self, epoch: int) -> None:
        """Use ``epoch`` for the next pass (it then advances by one per pass)."""
        self.epoch = epoch
        self._resume = None

    def state_dict(self) -> dict[str, int]:
        """Where to resume: the epoch and how many of its batches this rank already yielded."""
        if self._resume is not None:
            epoch, yielded = self._resume
        elif self._position is not None:
            # A pass still running, even past its last batch: the rest of *this* pass is what
            # is still to come (nothing, then), as torchdata counts. Reporting the next epoch
            # here instead made a restored multi-worker loader skip a whole epoch: it runs the
            # restored pass out (prefetching) and then starts the one after.
            epoch, yielded = self._position
        else:
            epoch, yielded = self.epoch, 0
        return {"seed": self.seed, "epoch": epoch, "yielded": yielded}

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Make the next pass continue from ``state`` (see :meth:`state_dict`)."""
        self.seed = int(state["seed"])
        self.epoch = int(state["epoch"])
        self._resume = (self.epoch, int(state["yielded"]))
        self._position = None

    def __len__(self) -> int:
        epoch = self._resume[0] if self._resume is not None else self.epoch
        return len(self.batches(epoch))

    def __iter__(self) -> Iterator[list[Any]]:
        epoch, start = self._resume if self._resume is not None else (self.epoch, 0)
        self._resume = None
        self.epoch = epoch + 1  # the next pass moves on unless set_epoch/load_state_dict intervene
        batches = self.batches(epoch)
        for position in range(start, len(batches)):
            self._position = (epoch, position + 1)
            yield self._emit(batches[position], epoch)
        self._position = None  # the pass is over: what comes next is the next epoch

    def _emit(self, batch: np.ndarray, epoch: int) -> list[Any]:
        if not self.keyed:
            return batch.tolist()
        return list(zip(batch.tolist(), sample_seeds(self.seed, epoch, batch).tolist()))

    # -- planning an epoch ---------------------------------------------------------------------

    def batches(self, epoch: int) -> list[np.ndarray]:
        """This rank's batches for ``epoch``, as index arrays (cached for the latest epoch)."""
        if self._cache is None or self._cache[0] != epoch:
            if self.shuffle:
                everyone = self._shuffled_batches(epoch)
                per_rank = len(everyone) // self.world_size
                mine = everyone[self.rank : per_rank * self.world_size : self.world_size]
            else:
                mine = self._ordered_batches()
            self._cache = (epoch, mine)
        return self._cache[1]

    def _ordered_batches(self) -> list[np.ndarray]:
        lo = self.rank * self.num_samples // self.world_size
        hi = (self.rank + 1) * self.num_samples // self.world_size
        return self._cut(np.arange(lo, hi))

    def _shuffled_batches(self, epoch: int) -> list[np.ndarray]:
        generator = epoch_generator(self.seed, epoch)
        order = torch.randperm(self.num_samples, generator=generator).numpy()
        if self.groups is not None:
            batches = [batch for group in np.unique(self.groups) for batch in self._cut(order[self.groups[order] == group])]
        elif self.lengths is not None:
            if self.drop_last and self.max_tokens is None:
                # drop the leftover at random now: after sorting it would always be the shortest
                order = order[: len(order) - len(order) % self.batch_size]
            noise = torch.rand(len(order), generator=generator, dtype=torch.float64).numpy()
            key = np.log(np.maximum(self.lengths[order], 1)) + self.length_noise * (2 * noise - 1)
            # stable sort, longest first: with no noise, equal lengths keep their random order
            batches = self._cut(order[np.argsort(-key, kind="stable")])
        else:
            batches = self._cut(order)
        permutation = torch.randperm(len(batches), generator=generator).tolist()
        return [batches[i] for i in permutation]

    def _cut(self, indices: np.ndarray) -> list[np.ndarray]:
        """Cut a run of indices into consecutive batches by count or by token budget."""
        if self.max_tokens is None:
            size = self.batch_size
            stop = len(indices) - len(indices) % size if self.drop_last else len(indices)
            return [indices[start : start + size] for start in range(0, stop, size)]
        batches, start, longest = [], 0, 0
        for end, length in enumerate(self.lengths[indices].tolist()):
            longest, count = max(longest, length), end - start + 1
            over_budget = count * longest > self.max_tokens
            if count > 1 and (over_budget or (self.batch_size is not None and count > self.batch_size)):
                batches.append(indices[start:end])
                start, longest = end, length
        if start < len(indices):
            batches.append(indices[start:])
        return batches
