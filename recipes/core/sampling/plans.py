"""How an epoch's samples become batches: the plans a :class:`GroupedBatchSampler` takes.

    GroupedBatchSampler(len(dataset), 32, seed=0, plan=ByGroup(aspect_ratio_groups(ratios)))
    GroupedBatchSampler(len(dataset), None, seed=0, plan=TokenBudget(dataset.lengths, 8192))

- :class:`Plan`: the base a plan of yours subclasses; it defines :meth:`Plan.arrange`.
- :class:`Shuffle`: a random order cut into batches (the default).
- :class:`ByGroup`: one small int per sample (portrait/landscape); a batch never mixes two
  groups, as in torchvision's detection reference, and no sample is repeated to fill one.
- :class:`ByLength`: the epoch sorted by length, each sample's place then moved by fresh uniform
  noise of half-width ``jitter`` batches (or its ``log(length)`` by ``noise``), cut into batches
  whose order the sampler shuffles: padding stays near the sorted floor while neighbours in
  length change batchmates every epoch (figures: benchmarks/README.md).
- :class:`TokenBudget`: as ``ByLength`` with ``noise``, cut by ``len(batch) * longest <= max_tokens``.

Plans that must see the samples they batch together (groups, lengths) plan the epoch's order
``window`` places at a time (:class:`Windows`): O(window) memory per rank, not O(samples).

Every plan takes ``draws=``: which indices an epoch draws, ``draws(seed, epoch)`` -> an int array,
or a sequence that arrays of places index (a mixture's ``epoch_indices``); None: each index once.
A plan sees places in the epoch's draws (``order``) and the sample at each place (``index``);
the sampler does the rest: epochs, ranks, seeds and resume. Evaluation only cuts, in order.
"""

from __future__ import annotations

import abc
import copy
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from recipes.core.contracts.parameters import check_count, check_positive
from recipes.core.sampling.permutation import Permutation
from recipes.core.contracts.protocols import DrawsEpochs
from recipes.core.sampling.seeding import sample_seeds

# Half-width of the noise on a sample's place in the sorted order, in batches: it costs padding in
# proportion to the length gaps between neighbours, not to the length (noise on log(length) padded
# 21x the floor where lengths are dense, this 1.15x), and a quarter of the batchmates change every
# epoch even when no two lengths are equal. More = fresher batches, more padding (benchmarks/README.md).
DEFAULT_JITTER = 0.2
# Half-width of the noise on log(length) that TokenBudget takes by default: samples within about
# 10% of each other's length can trade places. Also the plan of a saved state that names
# ByLength(noise=0.05) or no plan, for a ByLength built with defaults (ByLength.earlier_forms).
DEFAULT_LENGTH_NOISE = 0.05
# Places a grouped, length or budget plan orders at once: ~50 MB of planning at the peak, whatever
# the epoch's size. Sorting lengths within 2^20 samples pads as the whole epoch would (each window
# holds the length distribution); ByGroup's partial batches come once per group per window.
DEFAULT_WINDOW = 2**20
_DESCRIBED_MAX = 10**7  # repr counts the groups of at most this many samples
_WINDOW_KEY = (1 << 64) - 7  # later windows' generators live apart from the samples' seeds

Draws = Callable[[int, int], Sequence[int]]


class CutBatches(Sequence):
    """Batches of ``size`` consecutive positions ``lo .. hi - 1`` of ``order`` (None: the positions
    themselves), each computed when asked for: a billion samples cost nothing until a batch is."""

    def __init__(self, order: Permutation | None, lo: int, hi: int, size: int, drop_last: bool) -> None:
        self.order, self.lo, self.size = order, lo, size
        self.hi = hi - (hi - lo) % size if drop_last else hi
        self.count = -(-(self.hi - lo) // size)

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, batch: int) -> np.ndarray:
        if not 0 <= batch < self.count:
            raise IndexError(f"batch {batch} is out of range for {self.count} batches")
        start = self.lo + batch * self.size
        positions = np.arange(start, min(start + self.size, self.hi), dtype=np.int64)
        return positions if self.order is None else self.order[positions]


class Plan(abc.ABC):
    """How a window of an epoch's places becomes batches: a subclass defines :meth:`arrange`.

    The sampler asks two fast paths first, each None here: :meth:`stretches` (the epoch's
    batches straight from the keyed order, for a plan whose batches are plain cuts of it) and
    :meth:`count` (a window's number of batches without arranging it). A class that defines
    ``arrange`` or ``cut`` and not a fast path does not inherit its parent's, which would
    describe the parent's batches: its own ``arrange`` makes every epoch and counts it.
    """

    window = DEFAULT_WINDOW
    _FAST_PATHS = ("stretches", "count")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "arrange" in vars(cls) or "cut" in vars(cls):
            for name in cls._FAST_PATHS:
                if name not in vars(cls):
                    setattr(cls, name, getattr(Plan, name))

    def __init__(self, *, draws: Draws | None = None) -> None:
        self.draws = draws

    def drawing(self, draws: Draws | None) -> Plan:
        """A copy of this plan that draws each epoch's indices with ``draws``."""
        plan = copy.copy(self)
        plan.draws = draws
        return plan

    def check(self, num_samples: int, batch_size: int | None) -> None:
        """Raise a ValueError if this plan cannot batch ``num_samples`` samples by ``batch_size``."""
        if batch_size is None:
            raise ValueError("give batch_size, or a TokenBudget plan")

    @abc.abstractmethod
    def arrange(self, order: np.ndarray, index: np.ndarray, generator: torch.Generator, batch_size: int | None,
                drop_last: bool) -> list[np.ndarray]:
        """A window's batches (of places in ``order``; ``index`` holds the sample at each place),
        before :class:`Windows` shuffles their order; ``generator`` draws anything random."""

    def stretches(self, permutation: Permutation, batch_size: int | None,
                  drop_last: bool) -> Sequence[np.ndarray] | None:
        """Fast path: the epoch's batches as consecutive stretches of a keyed ``permutation``, each
        computed when asked for (O(1) memory); None: :meth:`arrange` the order window by window."""
        return None

    def count(self, size: int, index: Callable[[], np.ndarray], batch_size: int | None,
              drop_last: bool) -> int | None:
        """Fast path: how many batches :meth:`arrange` makes of a window of ``size`` places whose
        samples ``index()`` gives; None: arrange it to know."""
        return None

    def ordered(self, lo: int, hi: int, batch_size: int | None, drop_last: bool) -> Sequence[np.ndarray]:
        """Evaluation: samples ``lo .. hi - 1`` in order, cut into batches."""
        return CutBatches(None, lo, hi, batch_size, drop_last)

    def earlier_forms(self) -> list[Plan]:
        """Other plans the same arguments have stood for (none here): a loader state saved under
        one of them (its ``plan`` field) resumes with it, and a state that names no plan with the
        first, so a run goes on with the batches it began with."""
        return []

    def cut(self, run: np.ndarray, index: np.ndarray, batch_size: int | None, drop_last: bool) -> list[np.ndarray]:
        """Consecutive batches of ``run``; ``index`` is the sample at each of its places."""
        stop = len(run) - len(run) % batch_size if drop_last else len(run)
        return [run[start : start + batch_size] for start in range(0, stop, batch_size)]

    def __repr__(self) -> str:
        drawn = ", drawn" if self.draws is not None else ""
        return f"{type(self).__name__}({self._describe()}{drawn})"

    def _describe(self) -> str:
        return ""


def _cut_count(size: int, batch_size: int, drop_last: bool) -> int:
    """Batches of ``batch_size`` in ``size`` places: the last partial one kept unless ``drop_last``."""
    return size // batch_size if drop_last else -(-size // batch_size)


class Shuffle(Plan):
    """Each epoch a random order, cut into batches of ``batch_size``."""

    def arrange(self, order: np.ndarray, index: np.ndarray, generator: torch.Generator, batch_size: int | None,
                drop_last: bool) -> list[np.ndarray]:
        return self.cut(order, index, batch_size, drop_last)

    def stretches(self, permutation: Permutation, batch_size: int | None,
                  drop_last: bool) -> Sequence[np.ndarray] | None:
        return CutBatches(permutation, 0, len(permutation), batch_size, drop_last)

    def count(self, size: int, index: Callable[[], np.ndarray], batch_size: int | None,
              drop_last: bool) -> int | None:
        return _cut_count(size, batch_size, drop_last)


class ByGroup(Plan):
    """A batch never mixes two groups: ``groups`` holds one small int per sample."""

    def __init__(self, groups: Any, *, window: int = DEFAULT_WINDOW, draws: Draws | None = None) -> None:
        super().__init__(draws=draws)
        self.groups = _integers(groups)
        self.window = _check_window(window)

    def check(self, num_samples: int, batch_size: int | None) -> None:
        super().check(num_samples, batch_size)
        _check_per_sample(self.groups, "groups", num_samples)

    def arrange(self, order: np.ndarray, index: np.ndarray, generator: torch.Generator, batch_size: int | None,
                drop_last: bool) -> list[np.ndarray]:
        groups = self.groups[index]
        batches = []
        for group in np.unique(groups):
            run = groups == group
            batches += self.cut(order[run], index[run], batch_size, drop_last)
        return batches

    def count(self, size: int, index: Callable[[], np.ndarray], batch_size: int | None,
              drop_last: bool) -> int | None:
        sizes = np.unique(self.groups[index()], return_counts=True)[1]
        return int((sizes // batch_size).sum() if drop_last else (-(-sizes // batch_size)).sum())

    def _describe(self) -> str:
        if len(self.groups) > _DESCRIBED_MAX:  # counting the groups of a billion would sort them all
            return f"groups of {len(self.groups)} samples"
        return f"{len(np.unique(self.groups))} groups"


class ByLength(Plan):
    """Batches of similar lengths: ``lengths`` holds one int per sample (see module doc).

    Each epoch the samples are sorted by ``log(length)`` plus uniform noise of half-width
    ``noise``, then each one's place in that order moves by uniform noise of half-width
    ``jitter`` batches. Given neither, ``jitter=0.2`` alone (benchmarks/README.md: padding vs
    batchmates kept); given ``noise`` alone, no jitter. ``noise=0`` alone, or ``jitter=0`` alone,
    sorts exactly: least padding, least shuffling; equal lengths stay in random order.
    """

    def __init__(self, lengths: Any, *, noise: float | None = None, jitter: float | None = None,
                 window: int = DEFAULT_WINDOW, draws: Draws | None = None) -> None:
        super().__init__(draws=draws)
        self._defaults = noise is None and jitter is None  # the plan earlier_forms describes
        noise = 0.0 if noise is None else noise
        jitter = (DEFAULT_JITTER if self._defaults else 0.0) if jitter is None else jitter
        for name, value in (("noise", noise), ("jitter", jitter)):
            check_positive(name, value, owner=type(self).__name__, zero=True)
        self.lengths = _integers(lengths)
        self.noise, self.jitter = float(noise), float(jitter)
        self.window = _check_window(window)

    def check(self, num_samples: int, batch_size: int | None) -> None:
        super().check(num_samples, batch_size)
        _check_per_sample(self.lengths, "lengths", num_samples)

    def arrange(self, order: np.ndarray, index: np.ndarray, generator: torch.Generator, batch_size: int | None,
                drop_last: bool) -> list[np.ndarray]:
        order, index = self._trim(order, index, batch_size, drop_last)
        noise = torch.rand(len(order), generator=generator, dtype=torch.float64).numpy()
        key = np.log(np.maximum(self.lengths[index], 1)) + self.noise * (2 * noise - 1)
        # stable sort, longest first: with no noise, equal lengths keep their random order
        sort = np.argsort(-key, kind="stable")
        if self.jitter > 0:
            shift = torch.rand(len(order), generator=generator, dtype=torch.float64).numpy()
            places = np.arange(len(sort)) + self.jitter * batch_size * (2 * shift - 1)
            sort = sort[np.argsort(places, kind="stable")]
        return self.cut(order[sort], index[sort], batch_size, drop_last)

    def count(self, size: int, index: Callable[[], np.ndarray], batch_size: int | None,
              drop_last: bool) -> int | None:
        return _cut_count(size, batch_size, drop_last)  # sorting moves places, cutting is by count

    def _trim(self, order: np.ndarray, index: np.ndarray, batch_size: int | None,
              drop_last: bool) -> tuple[np.ndarray, np.ndarray]:
        """Drop the leftover at random before sorting: after it, it would always be the shortest."""
        if not drop_last:
            return order, index
        keep = len(order) - len(order) % batch_size
        return order[:keep], index[:keep]

    def earlier_forms(self) -> list[Plan]:
        if not self._defaults:
            return []
        plan = copy.copy(self)  # what ByLength(lengths) names ByLength(noise=0.05) in saved states
        plan.noise, plan.jitter = DEFAULT_LENGTH_NOISE, 0.0
        return [plan]

    def _describe(self) -> str:
        jitter = f", jitter={self.jitter:g}" if self.jitter else ""
        return f"noise={self.noise:g}{jitter}"


class TokenBudget(ByLength):
    """:class:`ByLength`, cut by a budget: ``len(batch) * longest <= max_tokens``, at most
    ``batch_size`` samples if the sampler has one; a single longer sample is its own batch."""

    def __init__(self, lengths: Any, max_tokens: int, *, noise: float = DEFAULT_LENGTH_NOISE,
                 window: int = DEFAULT_WINDOW, draws: Draws | None = None) -> None:
        super().__init__(lengths, noise=noise, window=window, draws=draws)
        self.max_tokens = check_count("max_tokens", max_tokens, owner="TokenBudget", none=False)

    def check(self, num_samples: int, batch_size: int | None) -> None:
        _check_per_sample(self.lengths, "lengths", num_samples)

    def _trim(self, order: np.ndarray, index: np.ndarray, batch_size: int | None,
              drop_last: bool) -> tuple[np.ndarray, np.ndarray]:
        return order, index  # budget batches have no fixed size to leave a remainder

    def count(self, size: int, index: Callable[[], np.ndarray], batch_size: int | None,
              drop_last: bool) -> int | None:
        return None  # where the budget cuts depends on the sorted lengths

    def ordered(self, lo: int, hi: int, batch_size: int | None, drop_last: bool) -> Sequence[np.ndarray]:
        run = np.arange(lo, hi)
        return self.cut(run, run, batch_size, drop_last)

    def cut(self, run: np.ndarray, index: np.ndarray, batch_size: int | None, drop_last: bool) -> list[np.ndarray]:
        batches, start, longest = [], 0, 0
        for end, length in enumerate(self.lengths[index].tolist()):
            longest, count = max(longest, length), end - start + 1
            over_budget = count * longest > self.max_tokens
            if count > 1 and (over_budget or (batch_size is not None and count > batch_size)):
                batches.append(run[start:end])
                start, longest = end, length
        if start < len(run):
            batches.append(run[start:])
        return batches

    def _describe(self) -> str:
        return f"max_tokens={self.max_tokens}, noise={self.noise:g}"


class Windows(Sequence):
    """An epoch's batches under a plan that must see the samples it batches together: the
    epoch's ``order`` (a :class:`Permutation` or an array of places) is planned ``window`` places
    at a time, each window's batches in a random order of their own, the windows one after
    another. A window is planned when one of its batches is asked for (the last one is kept),
    so memory is O(window), not O(samples). ``len`` needs each window's count of batches: from
    sizes alone for a fixed batch size, from the window's groups for :class:`ByGroup`, by
    planning every window for a :class:`TokenBudget` (O(samples) time, once an epoch).

    Window 0 draws from ``generator`` as it stands (its state is kept, so a window planned
    twice comes out the same); window ``w > 0`` from a generator seeded by ``(key, w)``. With
    one window this is the whole epoch ordered at once.
    """

    def __init__(self, plan: Plan, order: Permutation | np.ndarray, *, draws: Sequence[int] | None, window: int,
                 generator: torch.Generator, key: int, batch_size: int | None, drop_last: bool) -> None:
        self.plan, self.order, self.draws = plan, order, draws
        self.window, self.key, self.batch_size, self.drop_last = window, key, batch_size, drop_last
        self._first_state = generator.get_state()
        self._planned: tuple[int, list[np.ndarray]] | None = None
        counts = [self._count(w) for w in range(-(-len(order) // window))]
        self.firsts = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)]).astype(np.int64)

    def __len__(self) -> int:
        return int(self.firsts[-1])

    def __getitem__(self, batch: int) -> np.ndarray:
        if not 0 <= batch < len(self):
            raise IndexError(f"batch {batch} is out of range for {len(self)} batches")
        window = int(np.searchsorted(self.firsts, batch, side="right")) - 1
        return self._plan(window)[batch - int(self.firsts[window])]

    def _places(self, window: int) -> np.ndarray:
        lo, hi = window * self.window, min((window + 1) * self.window, len(self.order))
        return np.asarray(self.order[lo:hi], dtype=np.int64)

    def _count(self, window: int) -> int:
        size = min((window + 1) * self.window, len(self.order)) - window * self.window
        counted = self.plan.count(size, lambda: self._index(self._places(window)), self.batch_size, self.drop_last)
        return len(self._plan(window)) if counted is None else counted

    def _index(self, places: np.ndarray) -> np.ndarray:
        return places if self.draws is None else np.asarray(self.draws[places], dtype=np.int64)

    def _plan(self, window: int) -> list[np.ndarray]:
        if self._planned is None or self._planned[0] != window:
            generator = torch.Generator()
            if window == 0:
                generator.set_state(self._first_state)
            else:
                generator.manual_seed(int(sample_seeds(self.key, window, [_WINDOW_KEY])[0]))
            places = self._places(window)
            batches = self.plan.arrange(places, self._index(places), generator, self.batch_size, self.drop_last)
            shuffled = torch.randperm(len(batches), generator=generator).tolist()
            self._planned = (window, [batches[i] for i in shuffled])
        return self._planned[1]


def _integers(values: Any) -> np.ndarray:
    """``values`` as an integer array: an integer array or memmap as it is (no copy of a
    billion-sample ``np.memmap``), anything else converted to int64."""
    array = np.asarray(values)
    return array if np.issubdtype(array.dtype, np.integer) else np.asarray(values, dtype=np.int64)


def _check_window(window: int) -> int:
    if isinstance(window, bool) or not isinstance(window, (int, np.integer)) or window < 1:
        raise ValueError(f"window must be an int >= 1, got {window!r}")
    return int(window)


def _check_per_sample(values: np.ndarray, name: str, num_samples: int) -> None:
    if values.shape != (num_samples,):
        raise ValueError(f"{name} must have one entry per sample ({num_samples}), got {values.shape}")


def draws_of(dataset: Any) -> Draws | None:
    """The epochs a dataset draws itself (a mixture's ``epoch_indices``), else None: each index once.

    :func:`recipes.core.loading.loader.build_loader` asks this once it has checked the dataset's hooks
    (:func:`recipes.core.contracts.protocols.check_hooks`)."""
    return dataset.epoch_indices if isinstance(dataset, DrawsEpochs) else None
