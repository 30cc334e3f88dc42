"""Building blocks for IterableDatasets that shard themselves: which reader am I, a shuffle that
can resume, the stream's position and a base class for resumable streams.

    slot, slots = reader_slot(self.rank, self.world_size)     # in __iter__, i.e. in the worker
    for block, start, records in shuffled_blocks(records, 10_000, rng_of_block): ...

Every DataLoader worker of every rank runs its own copy of an IterableDataset's ``__iter__``;
unless each copy reads a different part of the data, every sample arrives ``workers x ranks``
times. ``reader_slot`` numbers the copies ``0 .. slots-1``, so a dataset can take its part.
:class:`ResumableStream` holds what every such stream repeats (seed, epochs, state and its
checks, each reader's position); a subclass says what a pass reads and yields.
"""

from __future__ import annotations

import copy
import random
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from torch.utils.data import IterableDataset, get_worker_info

from recipes.core.sampling.distributed import resolve_rank, shared_seed
from recipes.core.sampling.seeding import sample_seed
from recipes.core.sources.storage import retries_made
from recipes.core.contracts.states import (
    CURSOR_FIELDS,
    EPOCH_RANGE,
    SEED_RANGE,
    check_int,
    check_keys,
    check_source,
    warn_replaced_seed,
)


def reader_slot(rank: int, world_size: int) -> tuple[int, int]:
    """``(slot, slots)``: ``rank * num_workers + worker id`` and ``world_size * num_workers``.

    Call it inside ``__iter__`` (it reads ``get_worker_info()``); read ``rank`` and
    ``world_size`` in the main process, as spawned workers have no process group to ask.
    """
    info = get_worker_info()
    worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
    return rank * workers + worker, world_size * workers


def turning_point(first: int, stop: int, epoch: int) -> int:
    """Where a reader starts reading its share ``[first, stop)`` of items (lines, rows) in ``epoch``,
    going on to ``stop`` and then from ``first`` up to it: its first item in even epochs, its middle
    one in odd epochs. A training loader drops each reader's last partial batch (and stops every rank
    at one step): an even epoch leaves out the end of a share, which the odd one reads mid-pass, and
    the odd one leaves out the items before the middle, which the even one read. So every item is
    read within two epochs, in file order, when a reader drops less than half its share.
    """
    return first if epoch % 2 == 0 else first + (stop - first) // 2


def shuffled_blocks(
    records: Iterable[tuple[Any, Any]],
    size: int,
    rng_of_block: Callable[[int], random.Random] | None = None,
    first_block: int = 0,
) -> Iterator[tuple[int, Any, list[Any]]]:
    """Cut ``(position, record)`` pairs into blocks of ``size`` and yield ``(block index, position
    of the block's first record, its records)``, shuffled by ``rng_of_block(index)`` if given.

    A block's order depends on its index alone, so a stream read again from a block's first
    position, with ``first_block`` set to that block's index, yields the same blocks: the resume
    point of a shuffled stream is ``(block, position, items taken)``, no sample data. An item
    moves at most ``size - 1`` places, as in a shuffle buffer of that size.
    """
    block, records_of_block, start = first_block, [], None
    for position, record in records:
        if not records_of_block:
            start = position
        records_of_block.append(record)
        if len(records_of_block) == size:
            yield block, start, _shuffled(records_of_block, rng_of_block, block)
            block, records_of_block = block + 1, []
    if records_of_block:
        yield block, start, _shuffled(records_of_block, rng_of_block, block)


def block_shuffler(seed: int, epoch: int, slot: int, slots: int,
                   buffer: int) -> Callable[[int], random.Random] | None:
    """For :func:`recipes.core.sources.streams.shuffled_blocks`: reader ``slot``'s generator of block
    ``block`` in ``epoch``, or None when a buffer of ``buffer`` samples shuffles nothing."""
    if buffer <= 1:
        return None
    return lambda block: random.Random(sample_seed(seed, epoch, block * slots + slot))


def _shuffled(records: list[Any], rng_of_block: Callable[[int], random.Random] | None, block: int) -> list[Any]:
    if rng_of_block is not None:
        rng_of_block(block).shuffle(records)
    return records


class StreamCursor:
    """Where a self-sharding stream stands: its seed, the epoch of its pass and its reader's
    position in that pass, so that a ``StatefulDataLoader`` can resume it mid-epoch exactly.

        epoch, resume = self.cursor.begin(slots)     # in __iter__: this pass's epoch, where to start
        ...                                          # then for each item handed out:
        self.cursor.advance(block, start, taken)     # shuffled_blocks' block and start, items taken
        self.cursor.finish()                         # after the last one

    ``state_dict()`` is ``{"seed", "epoch", "slots", "position"}``; ``position`` is None (the pass
    has not begun), ``[block, start, taken]`` or ``"end"``. The epoch advances by one at every
    new pass; ``set_epoch`` and ``load_state_dict`` choose the next one.
    """

    def __init__(self, seed: int) -> None:
        self.seed, self.epoch = seed, 0
        self.slots: int | None = None
        self.position: Any = None
        self._resume: Any = None
        self._begun = False  # a pass of self.epoch has begun: the next one is the next epoch
        # passes start at their epoch's turning point; a run resumed from a state saved before they did, not
        self.turns = True

    def set_epoch(self, epoch: int) -> None:
        self.epoch, self.position, self._resume, self._begun = epoch, None, None, False

    def begin(self, slots: int) -> tuple[int, Any]:
        """Start a pass read by ``slots`` reader slots: ``(its epoch, resume position or None)``."""
        if self._begun:
            self.epoch += 1
        resume, self._resume = self._resume, None
        if isinstance(resume, list) and self.slots != slots:  # mid-pass ("end" and None fit any readers)
            raise ValueError(
                f"this stream's state was saved in the middle of a pass read by {self.slots} readers (ranks x "
                f"workers) and is resumed with {slots}: each reader reads its own shards, so resume with the same "
                "world size and num_workers, or from a state taken at the end of a pass"
            )
        self.slots, self.position, self._begun = slots, resume, True
        return self.epoch, resume

    def advance(self, block: int, start: Any, taken: int) -> None:
        self.position = [block, start, taken]

    def finish(self) -> None:
        self.position = "end"

    def state_dict(self) -> dict[str, Any]:
        # a loaded state whose pass has not begun yet is still where the stream stands
        position = self._resume if self._resume is not None else self.position
        return {"seed": self.seed, "epoch": self.epoch, "slots": self.slots, "position": position}

    def load_state_dict(
        self,
        state: dict[str, Any],
        *,
        owner: str = "stream",
        world_size: int = 1,
        check_position: Callable[[list[Any], int], None] | None = None,
        max_taken: int | Callable[[int], int | None] | None = None,
        turns: bool = True,
    ) -> None:
        """Load ``state`` after checking every field; a ValueError names the field, value and range.
        ``turns``: the run's passes start at their epoch's :func:`turning_point` (a state saved before
        they did: False, and the run goes on as it began).

        ``position`` must be None, ``"end"`` or ``[block >= 0, start, taken >= 0]`` (``taken`` at
        most ``max_taken``, or ``max_taken(slots)``), and ``slots`` a multiple of ``world_size`` mid-pass;
        ``check_position(position, slots)`` raises for a position the stream cannot resume from.
        """
        check_keys(state, CURSOR_FIELDS, owner)
        seed = check_int(state["seed"], "seed", owner, *SEED_RANGE)
        epoch = check_int(state["epoch"], "epoch", owner, *EPOCH_RANGE)
        slots, position = state["slots"], state["position"]
        if slots is not None:
            slots = check_int(slots, "slots", owner, 1, 2**31)
        if isinstance(position, (list, tuple)):
            if len(position) != 3:
                raise ValueError(f"{owner} state: position = {str(position)[:80]} is not [block, start, taken]")
            if slots is None or slots % world_size:
                raise ValueError(
                    f"{owner} state: slots = {slots!r}: saved in the middle of a pass read by {slots} readers (ranks x "
                    f"workers), it cannot resume on {world_size} ranks; resume with the same world size and "
                    "num_workers, or from a state taken at the end of a pass"
                )
            block = check_int(position[0], "position[0] (block)", owner)
            most = max_taken(slots) if callable(max_taken) else max_taken
            taken = check_int(position[2], "position[2] (items taken)", owner, 0, most)
            position = [block, position[1], taken]
            if check_position is not None:
                check_position(position, slots)
        elif not (position is None or (isinstance(position, str) and position == "end")):
            raise ValueError(
                f"{owner} state: position = {str(position)[:80]!r} is not None, 'end' or [block, start, taken]"
            )
        self.seed, self.epoch, self.slots = seed, epoch, slots
        self.position, self._resume, self._begun = None, position, False
        self.turns = turns


class ResumableStream(IterableDataset):
    """A self-sharding stream that resumes mid-pass exactly: its seed, epochs, state and the
    state's checks, and where each reader stands in its pass. A subclass says what a pass reads:

        class Lines(ResumableStream):
            def __init__(self, lines, *, seed=None):
                self.lines = lines
                super().__init__(seed, source=f"{len(lines)} lines")

            def _blocks(self, slot, slots, epoch, resume):  # a pass of one block, which starts at 0
                taken = resume[2] if resume is not None else 0
                yield 0, 0, self.lines[slot::slots][taken:]

    ``_blocks`` yields reader ``slot``'s pass as ``(block, start, items)``, as :func:`shuffled_blocks`
    cuts it, from ``resume`` on: None, or ``[block, start, taken]``, whose block's first ``taken``
    items are left out. ``_max_taken`` and ``_check_position`` bound the positions a state may
    hold; ``_begin`` refuses a pass when ``iter()`` is called.

    A subclass whose passes start at their epoch's :func:`turning_point` sets ``turns = True``: its
    states say so (``"turns"``), and a run resumed from a state saved before it did (without one) goes
    on unturned (``self.cursor.turns`` False), with exactly the items it had still to give.

    Args:
        seed: the seed of every pass's draws; None draws one shared by all ranks.
        rank, world_size: None reads them from ``torch.distributed``.
        source: what the stream reads, in a few words (``"4 shards 1a2b3c4d"``): a state holds it,
            so a state of other data is refused. None: the state names no data.
    """

    turns = False  # passes start at their epoch's turning_point (a subclass says so)

    def __init__(
        self, seed: int | None, rank: int | None = None, world_size: int | None = None, *, source: str | None = None
    ) -> None:
        # read here, in the main process: a spawned worker has no process group to ask
        self.rank, self.world_size = resolve_rank(rank, world_size)
        self.cursor = StreamCursor(shared_seed(seed))  # the epoch and position, for an exact resume
        self._source, self._given_seed = source, seed

    @property
    def seed(self) -> int:
        return self.cursor.seed

    def set_epoch(self, epoch: int) -> None:
        """Use ``epoch`` for the next pass. Without calls the epoch advances by one each pass, in
        each worker copy (with ``persistent_workers``; non-persistent workers get a fresh copy
        from the main process every epoch, so call this there to reshuffle)."""
        self.cursor.set_epoch(epoch)

    def state_dict(self) -> dict[str, Any]:
        """Seed, epoch, this reader's position (see :class:`StreamCursor`) and ``source``, the data
        it is a position in."""
        state = self.cursor.state_dict()
        state = state if self._source is None else {**state, "source": self._source}
        return {**state, "turns": self.cursor.turns} if self.turns else state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Make the next pass continue from ``state``; ``StatefulDataLoader`` calls both for you.

        Every field is checked first (a ValueError names its owner, the field, its value and the
        allowed range): a state of other data or a crafted one is refused, not read from the wrong place.
        The state's seed wins, with a warning if ``seed=`` gave this stream another.
        """
        owner, turns = type(self).__name__, True
        if self.turns and isinstance(state, dict):
            state, turns = {name: value for name, value in state.items() if name != "turns"}, state.get("turns", False)
            if not isinstance(turns, bool):
                raise ValueError(f"{owner} state: turns = {str(turns)[:40]!r} is not True or False")
        self._load_cursor(check_source(state, self._source, owner), turns=turns)

    def state_source(self) -> str:
        """What this stream reads, in a few words (the ``source`` its states hold)."""
        return self._source if self._source is not None else type(self).__name__

    def read_paths(self) -> list[Any]:
        """The files or URLs a pass reads (a subclass that reads any says which)."""
        return []

    def retries_made(self) -> int:
        """Reads of this stream's data retried after a transient fault, in this process: a DataLoader
        worker counts its own, and logs each retry on the ``recipes`` logger (:mod:`recipes.core.sources.storage`)."""
        return retries_made(self.read_paths())

    def check_state(self, state: dict[str, Any]) -> None:
        """Raise the ValueError :meth:`load_state_dict` would raise for ``state``, changing nothing."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a replaced seed is the real load's to tell
            self.detached().load_state_dict(state)

    def adopt_seed(self, state: dict[str, Any]) -> None:
        """Take the seed of a checked ``state`` now, with :func:`warn_replaced_seed`'s warning: a
        loader calls it once in the main process, before its workers get copies of this stream."""
        warn_replaced_seed(type(self).__name__, self._given_seed, state["seed"])
        self.cursor.seed, self._given_seed = int(state["seed"]), None

    def detached(self) -> ResumableStream:
        """A shallow copy whose state is its own: what it loads leaves this stream as it is."""
        copied = copy.copy(self)
        copied.cursor = copy.copy(self.cursor)
        return copied

    def _load_cursor(self, fields: dict[str, Any], *, turns: bool = True) -> None:
        """Load the cursor's fields (:data:`CURSOR_FIELDS`), each checked, positions by :meth:`_check_position`."""
        self.cursor.load_state_dict(
            fields, owner=type(self).__name__, world_size=self.world_size, check_position=self._check_position,
            max_taken=self._max_taken, turns=turns,
        )
        given, self._given_seed = self._given_seed, None  # warned once: the state's seed is this stream's now
        warn_replaced_seed(type(self).__name__, given, self.cursor.seed)

    def _max_taken(self, slots: int) -> int | None:
        """The most items a block of a pass read by ``slots`` readers holds; None: no bound."""
        return None

    def _check_position(self, position: list[Any], slots: int) -> None:
        """Raise a ValueError naming the field for a mid-pass ``[block, start, taken]`` (block and
        taken already checked) that this stream, read by ``slots`` readers, cannot resume from."""

    def __iter__(self) -> Iterator[Any]:
        slot, slots = reader_slot(self.rank, self.world_size)
        epoch, resume = self._begin(slots)
        return self._pass(slot, slots, epoch, resume)

    def _begin(self, slots: int) -> tuple[int, Any]:
        """Start a pass read by ``slots`` readers: ``(its epoch, resume position or None)``. An
        override refuses a pass before or after ``self.cursor.begin(slots)``, which it calls."""
        return self.cursor.begin(slots)

    def _pass(self, slot: int, slots: int, epoch: int, resume: Any) -> Iterator[Any]:
        """The items of :meth:`_blocks`; after each, the cursor holds the items of its block taken so far."""
        if resume == "end":
            return
        first_block, _, skip = resume if resume is not None else (None, None, 0)
        for block, start, items in self._blocks(slot, slots, epoch, resume):
            taken = skip if block == first_block else 0  # a resumed block: its first items were taken
            for item in items:
                taken += 1
                self.cursor.advance(block, start, taken)
                yield item
        self.cursor.finish()

    def _blocks(self, slot: int, slots: int, epoch: int, resume: list[Any] | None) -> Iterator[tuple[int, Any, Any]]:
        """``(block, start, items)`` of reader ``slot``'s pass in ``epoch``, from ``resume`` on (see the class doc)."""
        raise NotImplementedError(f"{type(self).__name__} must define _blocks: what a pass reads")
