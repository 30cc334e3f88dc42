"""One batch sampler for every domain: epochs, ranks, resume; how batches form is a plan.

    sampler = SeededBatchSampler(len(dataset), 32, shuffle=True, drop_last=True, seed=0,
                                 plan=ByGroup(aspect_ratio_groups(dataset.aspect_ratios)))
    loader = DataLoader(SeededDataset(dataset), batch_sampler=sampler, collate_fn=...)

What it does that ``RandomSampler`` + ``BatchSampler`` + ``DistributedSampler`` do not:

- Plans: grouping, length sorting, token budgets and a mixture's draws are plan objects
  (:mod:`recipes.core.sampling.plans`); the default shuffles.
- Epochs: each pass draws a new order from ``(seed, epoch)``; the epoch advances by itself.
- Ranks: training deals the epoch's *batches*, whose order does not depend on the world size:
  rank ``r`` of ``W`` takes every ``W``-th from ``r``, fewer than ``W`` left over are dropped, so
  every rank runs the same number of steps. Evaluation gives each rank a contiguous block of
  samples: every sample once, no padding duplicates (``DistributedSampler`` repeats some).
- Resume: after ``load_state_dict(state_dict())`` the next pass yields exactly the batches still
  to come, as torchdata's StatefulDataLoader counts. A training state saved on ``W1`` ranks
  loads on ``W2``: the batches taken stay taken, the rest of the epoch is dealt to the ``W2``
  ranks by the same rule (:meth:`GroupedBatchSampler.load_state_dict`).
- Seeds: :class:`SeededBatchSampler` yields each index with its own seed, from its place in the
  epoch, for :class:`recipes.core.sampling.seeding.SeededDataset`.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import Sampler

from recipes.core.sampling.distributed import resolve_rank, shared_seed
from recipes.core.sampling.draws import EpochDraws
from recipes.core.contracts.parameters import check_count
from recipes.core.sampling.permutation import Permutation
from recipes.core.sampling.plans import Plan, Shuffle, Windows
from recipes.core.sampling.seeding import epoch_generator, sample_seeds
from recipes.core.contracts.states import EPOCH_RANGE, SEED_RANGE, check_belongs, check_int, check_keys, warn_replaced_seed

# How an epoch is drawn, newest first. "keyed": the order a keyed permutation computed on demand
# (recipes.core.sampling.permutation), a mixture's draws too (recipes.core.sampling.draws), grouped and length plans
# window by window (plans.Windows). "permutation": the order keyed, the draws by torch.randperm,
# the epoch planned at once. "randperm": all by torch.randperm; states without "order" are these.
ORDERS = ("keyed", "permutation", "randperm")
_ORDER_KEY = (1 << 64) - 3  # the order's key lives apart from the samples' seeds and the epoch generator
POSITION_FIELDS = ("seed", "epoch", "yielded", "world_size", "offset")  # a state's position, "order" since keyed
IDENTITY_FIELDS = ("num_samples", "batch_size", "plan")  # what the position is in: refused when they differ


class GroupedBatchSampler(Sampler[list[int]]):
    """Yields lists of dataset indices, batched as ``plan`` says; see the module doc.

    Args:
        num_samples: size of the dataset.
        batch_size: samples per batch; with a :class:`recipes.core.sampling.plans.TokenBudget` an upper
            bound (None = no bound).
        shuffle: a new random order every epoch (training); False keeps dataset order (eval).
        drop_last: drop incomplete batches (per group when grouping) instead of yielding them.
        seed: base seed shared by all ranks; None draws one (and broadcasts it across ranks).
        plan: how the epoch's samples form batches (:mod:`recipes.core.sampling.plans`); None shuffles.
            Evaluation only cuts, in order: by count, or by a ``TokenBudget``.
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
        plan: Plan | None = None,
        rank: int | None = None,
        world_size: int | None = None,
    ) -> None:
        if isinstance(num_samples, Sampler):
            self._rebuilt_from(num_samples, batch_size, drop_last)
            return
        batch_size = check_count("batch_size", batch_size, owner=type(self).__name__)
        self.num_samples = int(num_samples)
        self.plan = Shuffle() if plan is None else plan
        self.plan.check(self.num_samples, batch_size)
        self._built_plan = self.plan  # what resumed_plan starts from, whichever state loaded last
        self.batch_size, self.shuffle, self.drop_last = batch_size, shuffle, drop_last
        self.rank, self.world_size = resolve_rank(rank, world_size)
        self.seed, self._given_seed = shared_seed(seed), seed
        self.epoch = 0
        self.order = "keyed"  # how an epoch is drawn: ORDERS
        # (epoch, offset, yielded, world size) of a loaded state; (epoch, offset, yielded) of the running pass
        self._resume: tuple[int, int, int, int] | None = None
        self._position: tuple[int, int, int] | None = None
        self._cache: tuple[int, np.ndarray | None, list[np.ndarray]] | None = None  # an epoch's draws and batches
        self._identity: dict[str, Any] | None = None

    def _rebuilt_from(self, sampler: Sampler, batch_size: int | None, drop_last: bool) -> None:
        """Be the batch sampler whose samples ``sampler`` is, as ``BatchSampler(sampler, batch_size,
        drop_last)`` would: Lightning's ``predict`` rebuilds a loader's batch sampler so. A sampler
        that is not one's share (:class:`recipes.core.loading.trainers.RankShare`) is a TypeError naming the fix."""
        source = getattr(sampler, "batch_sampler", None)
        if not isinstance(source, GroupedBatchSampler) or batch_size != source.batch_size:
            raise TypeError(
                f"{type(self).__name__} deals its own batches and cannot batch a {type(sampler).__name__}: build the "
                "loader with a recipes preset and hand it to the trainer as it is (Lightning: "
                "Trainer(use_distributed_sampler=False) if you replaced its sampler)"
            )
        self.__dict__.update(copy.copy(source).__dict__)
        self.drop_last, self._identity, self._cache = drop_last, None, None

    # -- epochs and state ----------------------------------------------------------------------

    def set_epoch(self, epoch: int) -> None:
        """Use ``epoch`` for the next pass (it then advances by one per pass)."""
        self.epoch = epoch
        self._resume = None

    def state_dict(self) -> dict[str, int]:
        """Where to resume: the epoch, the global batches taken before this rank's count began
        (``offset``), how many this rank yielded since, and the world size they were dealt to."""
        if self._resume is not None:
            epoch, offset, yielded, world_size = self._resume
        elif self._position is not None:
            # A pass still running, even past its last batch: the rest of *this* pass is what
            # is still to come (nothing, then), as torchdata counts. Reporting the next epoch
            # here instead would make a restored multi-worker loader skip a whole epoch: it runs the
            # restored pass out (prefetching) and then starts the one after.
            (epoch, offset, yielded), world_size = self._position, self.world_size
        else:
            epoch, offset, yielded, world_size = self.epoch, 0, 0, self.world_size
        state = {"seed": self.seed, "epoch": epoch, "yielded": yielded, "world_size": world_size, "offset": offset}
        return {**state, "order": self.order, **self.identity()}

    def identity(self) -> dict[str, Any]:
        """What a state of this sampler is a position in: ``num_samples``, ``batch_size`` and
        ``plan`` (the plan's repr, shuffled or in order, drop_last); the world size is not part of
        it, since a state resumes on any. Computed once (a plan's repr may count its groups)."""
        if self._identity is None:
            self._identity = {"num_samples": self.num_samples, "batch_size": self.batch_size,
                              "plan": self.plan_name(self.plan)}
        return self._identity

    def resumed_plan(self, saved: str | None) -> Plan:
        """The plan a state whose identity names the plan ``saved`` (None: a state that names none)
        resumes with: the form of the plan this sampler was built with that it was saved under
        (:meth:`recipes.core.sampling.plans.Plan.earlier_forms`), else that plan."""
        for plan in self._built_plan.earlier_forms():
            if saved is None or saved == self.plan_name(plan):
                return plan
        return self._built_plan

    def plan_name(self, plan: Plan) -> str:
        """``plan`` as this sampler's identity names it: its repr, shuffled or in order, drop_last."""
        order = "shuffled" if self.shuffle else "in order"
        return f"{plan!r}, {order}{', drop_last' if self.drop_last else ''}"

    def check_state(self, state: dict[str, Any]) -> tuple[int, bool]:
        """Raise the ValueError :meth:`load_state_dict` would raise for ``state``, changing nothing;
        else ``(batches of this rank's pass still to come, whether that is the whole pass)``."""
        return self._checked(state, keep=False)[4:]

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Make the next pass continue from ``state`` (see :meth:`state_dict`), on this world size.

        A state saved on ``W1`` ranks (any rank's: in step, they agree) loads on ``W2``: the
        ``offset + yielded * W1`` global batches taken stay taken, and the rest of the epoch is
        dealt to the ``W2`` ranks, at most ``W2 - 1`` dropped; no sample twice, the same number
        of steps on every rank. The state of a pass taken after its last batch resumes nothing
        of it; taken after it ended, the next epoch. An evaluation pass resumes only on its
        own world size. Every field is checked first, against the epoch's own batches: a
        ValueError names the field, its value and the allowed range, and changes nothing. A state
        of another dataset size, batch size or plan (:meth:`identity`) is refused; its seed
        replaces this sampler's, with a warning if ``seed=`` gave another.
        """
        epoch, offset, yielded, world_size, _, _ = self._checked(state, keep=True)
        warn_replaced_seed("GroupedBatchSampler", self._given_seed, self.seed)
        self._given_seed = None  # warned once: the state's seed is this sampler's now
        self.epoch = epoch
        self._resume = (epoch, offset, yielded, world_size)
        self._position = None

    def _checked(self, state: dict[str, Any], *, keep: bool) -> tuple[int, int, int, int, int, bool]:
        """Check every field of ``state`` (see :meth:`load_state_dict`): ``(epoch, offset, yielded,
        world_size, batches still to come, whether that is the whole pass)``. ``keep``: take its
        seed, order and plan (:meth:`resumed_plan`); else this sampler is left as it was."""
        owner = "GroupedBatchSampler"
        # a state without "order" was saved before the keyed permutation: its run goes on as it began
        order = state.get("order", "randperm") if isinstance(state, dict) else None
        known = (*POSITION_FIELDS, "order", *IDENTITY_FIELDS)
        saved_fields = [name for name in known if isinstance(state, dict) and name in state]
        if not set(IDENTITY_FIELDS) & set(saved_fields):  # saved before states named their data
            saved_fields = [*POSITION_FIELDS, *(["order"] if "order" in saved_fields else [])]
        else:
            saved_fields = list(known)
        check_keys(state, saved_fields, owner)
        saved = self.plan, self._identity, self._cache
        self.plan = self.resumed_plan(state.get("plan"))  # the batches of the plan the run began with
        if self.plan is not saved[0]:
            self._identity = self._cache = None
        try:
            checked = self._checked_position(state, order, owner, keep)
        except ValueError:
            self.plan, self._identity, self._cache = saved
            raise
        if not keep:
            self.plan, self._identity, self._cache = saved
        return checked

    def _checked_position(self, state: dict[str, Any], order: str, owner: str,
                          keep: bool) -> tuple[int, int, int, int, int, bool]:
        check_belongs(state, self.identity(), owner, "this sampler")
        if order not in ORDERS:
            raise ValueError(f"{owner} state: order = {str(order)[:40]!r} is not one of {ORDERS}")
        seed = check_int(state["seed"], "seed", owner, *SEED_RANGE)
        epoch = check_int(state["epoch"], "epoch", owner, *EPOCH_RANGE)
        world_size = check_int(state["world_size"], "world_size", owner, 1, 2**31)
        if world_size != self.world_size and not self.shuffle:
            raise ValueError(
                f"this evaluation pass was saved on {world_size} ranks and cannot resume on {self.world_size}: "
                "each rank reads its own block of samples; start the evaluation again"
            )
        saved = self.seed, self.order, self._cache
        if (seed, order) != (self.seed, self.order):
            self.seed, self.order, self._cache = seed, order, None  # batches depend on both
        try:
            if self.shuffle:
                total = len(self._plan(epoch)[1])  # the epoch's global batches
                offset = check_int(state["offset"], "offset", owner, 0, total)
                per_rank = (total - offset) // world_size  # what each of the saving ranks had to take
            else:
                offset = check_int(state["offset"], "offset", owner, 0, 0)
                per_rank = len(self._plan(epoch)[1])
            yielded = check_int(state["yielded"], "yielded", owner, 0, per_rank)
            # where the next pass starts: (global offset, batches to skip), dealt anew on another world size
            begin, skip = (offset, yielded) if world_size == self.world_size else (offset + yielded * world_size, 0)
            remaining = len(self._rank_batches(epoch, begin)) - skip
        except ValueError:
            self.seed, self.order, self._cache = saved
            raise
        if not keep:
            self.seed, self.order, self._cache = saved
        return epoch, offset, yielded, world_size, remaining, begin == 0 and skip == 0

    def __len__(self) -> int:
        epoch = self._resume[0] if self._resume is not None else self.epoch
        return len(self._rank_batches(epoch, 0))

    def __iter__(self) -> Iterator[list[Any]]:
        epoch, offset, start = self._start()
        self.epoch = epoch + 1  # the next pass moves on unless set_epoch/load_state_dict intervene
        numbers = self._rank_batches(epoch, offset)
        draws, batches = self._plan(epoch)
        for position in range(start, len(numbers)):
            self._position = (epoch, offset, position + 1)
            yield self._emit(batches[numbers[position]], draws, epoch)
        self._position = None  # the pass is over: what comes next is the next epoch

    def _start(self) -> tuple[int, int, int]:
        """``(epoch, global offset, batches of this rank's share to skip)`` of the next pass."""
        resume, self._resume = self._resume, None
        if resume is None:
            return self.epoch, 0, 0
        epoch, offset, yielded, world_size = resume
        if world_size == self.world_size:
            return epoch, offset, yielded
        return epoch, offset + yielded * world_size, 0  # elastic: deal the rest of the epoch anew

    def _emit(self, batch: np.ndarray, draws: np.ndarray | None, epoch: int) -> list[Any]:
        """A batch of places in the epoch's draws -> the indices there."""
        return (batch if draws is None else draws[batch]).tolist()

    # -- planning an epoch ---------------------------------------------------------------------

    def batches(self, epoch: int) -> list[np.ndarray]:
        """This rank's batches of a whole pass of ``epoch``, as index arrays."""
        draws, batches = self._plan(epoch)
        return [batches[g] if draws is None else draws[batches[g]] for g in self._rank_batches(epoch, 0)]

    def _rank_batches(self, epoch: int, offset: int) -> range:
        """The numbers of this rank's share of the epoch's batches from global batch ``offset`` on:
        every ``world_size``-th, the same count for every rank (evaluation: its own, in order)."""
        total = len(self._plan(epoch)[1])
        if not self.shuffle:
            return range(total)  # this rank's block of samples, in order
        per_rank = (total - offset) // self.world_size
        return range(offset + self.rank, offset + per_rank * self.world_size, self.world_size)

    def _plan(self, epoch: int) -> tuple[Sequence[int] | None, Sequence[np.ndarray]]:
        """The epoch's draws (None: each index once) and its global batches, or this rank's in
        order when not shuffling (cached for one epoch)."""
        if self._cache is None or self._cache[0] != epoch:
            draws = None
            if self.plan.draws is not None and self.shuffle:
                draws = self.plan.draws(self.seed, epoch)
                if self.order != "keyed" and isinstance(draws, EpochDraws):
                    draws = draws.drawn_by_randperm()  # a mixture's draws as that state's run drew them
            batches = self._shuffled_batches(epoch, draws) if self.shuffle else self._ordered_batches()
            self._cache = (epoch, draws, batches)
        return self._cache[1], self._cache[2]

    def _ordered_batches(self) -> Sequence[np.ndarray]:
        lo = self.rank * self.num_samples // self.world_size
        hi = (self.rank + 1) * self.num_samples // self.world_size
        return self.plan.ordered(lo, hi, self.batch_size, self.drop_last)

    def _shuffled_batches(self, epoch: int, draws: Sequence[int] | None) -> Sequence[np.ndarray]:
        """Batches of places in the epoch's draws (= indices, without draws), in batch order."""
        count = self.num_samples if draws is None else len(draws)
        generator, key = epoch_generator(self.seed, epoch), int(sample_seeds(self.seed, epoch, [_ORDER_KEY])[0])
        if self.order == "randperm":
            order = torch.randperm(count, generator=generator).numpy()
        else:
            order = Permutation(count, key)
            stretches = self.plan.stretches(order, self.batch_size, self.drop_last)
            if stretches is not None:
                return stretches  # consecutive stretches of a random order are random batches already
        window = max(count, 1)  # states saved before windows planned the epoch at once
        if self.order == "keyed":
            window = self.plan.window if self.batch_size is None else max(
                self.plan.window - self.plan.window % self.batch_size, self.batch_size)  # whole batches
        return Windows(self.plan, order, draws=draws, window=window, generator=generator, key=key,
                       batch_size=self.batch_size, drop_last=self.drop_last)


class SeededBatchSampler(GroupedBatchSampler):
    """:class:`GroupedBatchSampler` whose batches hold ``(index, seed)`` pairs for
    :class:`recipes.core.sampling.seeding.SeededDataset`: each sample's seed comes from ``(seed, epoch,
    place in the epoch)``, so a sample drawn twice in an epoch (a mixture's) gets two seeds."""

    def _emit(self, batch: np.ndarray, draws: np.ndarray | None, epoch: int) -> list[Any]:
        indices = batch if draws is None else draws[batch]
        return list(zip(indices.tolist(), sample_seeds(self.seed, epoch, batch).tolist()))
