"""Building blocks for IterableDatasets that shard themselves: which reader am I, a shuffle that
can resume, the stream's position, a base class for resumable streams, and equal step counts
across ranks.

    slot, slots = reader_slot(self.rank, self.world_size)     # in __iter__, i.e. in the worker
    for block, start, records in shuffled_blocks(records, 10_000, rng_of_block): ...

Every DataLoader worker of every rank runs its own copy of an IterableDataset's ``__iter__``;
unless each copy reads a different part of the data, every sample arrives ``workers x ranks``
times. ``reader_slot`` numbers the copies ``0 .. slots-1``, so a dataset can take its part.
:class:`ResumableStream` holds what every such stream repeats (seed, epochs, state and its
checks, each reader's position); a subclass says what a pass reads and yields.
"""

from __future__ import annotations

import numbers
import random
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch
import torch.distributed as dist
from torch.utils.data import IterableDataset, get_worker_info

from recipes.core.distributed import resolve_rank, shared_seed


SEED_RANGE = (-(2**63), 2**64 - 1)  # what a seed may be: it is folded to 64 bits
EPOCH_RANGE = (0, 2**63 - 1)
CURSOR_FIELDS = ("seed", "epoch", "slots", "position")  # a StreamCursor's state


def check_keys(state: Any, keys: Iterable[str], owner: str) -> None:
    """Refuse a loaded state that is not a dict with exactly ``keys``, naming what is missing or extra."""
    if not isinstance(state, dict):
        raise ValueError(f"{owner} state must be a dict, got {type(state).__name__}")
    expected = set(keys)
    missing, extra = sorted(expected - set(state)), sorted(map(repr, set(state) - expected))
    if missing or extra:
        raise ValueError(
            f"{owner} state: missing keys {missing}, unknown keys [{', '.join(extra)}]; a state of this object has "
            f"exactly {sorted(expected)} (a state of something else?)"
        )


def check_int(value: Any, field: str, owner: str, low: int = 0, high: int | None = None) -> int:
    """``value`` as an int, or a ValueError naming ``field``, the value and the allowed range ``[low, high]``."""
    integer = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if not integer or value < low or (high is not None and value > high):
        shown_value = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
        allowed = f"[{low:,}, {'...' if high is None else f'{high:,}'}]"
        raise ValueError(f"{owner} state: {field} = {shown_value} is not an integer in {allowed}")
    return int(value)


def check_source(state: Any, source: str | None, owner: str) -> dict[str, Any]:
    """The cursor's part of a stream's state, once its ``"source"`` (what the stream reads, in a few
    words: ``"4 shards 1a2b3c4d"``) is this stream's; a state of other data is a ValueError. A state
    with no source, as version 0.1.0 saved them, is read as this stream's: it still loads."""
    if isinstance(state, dict) and "source" not in state:
        check_keys(state, CURSOR_FIELDS, owner)
        return dict(state)
    check_keys(state, (*CURSOR_FIELDS, "source"), owner)
    if not (isinstance(state["source"], str) and state["source"] == source):
        raise ValueError(
            f"{owner} state: source = {str(state['source'])[:60]!r} is not this one's {source!r}: a state of other data"
        )
    return {name: value for name, value in state.items() if name != "source"}


def reader_slot(rank: int, world_size: int) -> tuple[int, int]:
    """``(slot, slots)``: ``rank * num_workers + worker id`` and ``world_size * num_workers``.

    Call it inside ``__iter__`` (it reads ``get_worker_info()``); read ``rank`` and
    ``world_size`` in the main process, as spawned workers have no process group to ask.
    """
    info = get_worker_info()
    worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
    return rank * workers + worker, world_size * workers


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
    ) -> None:
        """Load ``state`` after checking every field; a ValueError names the field, value and range.

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

    Args:
        seed: the seed of every pass's draws; None draws one shared by all ranks.
        rank, world_size: None reads them from ``torch.distributed``.
        source: what the stream reads, in a few words (``"4 shards 1a2b3c4d"``): a state holds it,
            so a state of other data is refused. None: the state names no data.
    """

    def __init__(
        self, seed: int | None, rank: int | None = None, world_size: int | None = None, *, source: str | None = None
    ) -> None:
        # read here, in the main process: a spawned worker has no process group to ask
        self.rank, self.world_size = resolve_rank(rank, world_size)
        self.cursor = StreamCursor(shared_seed(seed))  # the epoch and position, for an exact resume
        self._source = source

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
        return state if self._source is None else {**state, "source": self._source}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Make the next pass continue from ``state``; ``StatefulDataLoader`` calls both for you.

        Every field is checked first (a ValueError names its owner, the field, its value and the
        allowed range): a state of other data or a crafted one is refused, not read from the wrong place.
        """
        self._load_cursor(check_source(state, self._source, type(self).__name__))

    def _load_cursor(self, fields: dict[str, Any]) -> None:
        """Load the cursor's fields (:data:`CURSOR_FIELDS`), each checked, positions by :meth:`_check_position`."""
        self.cursor.load_state_dict(
            fields, owner=type(self).__name__, world_size=self.world_size, check_position=self._check_position,
            max_taken=self._max_taken,
        )

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


_END = object()


class EqualSteps:
    """Iterate a rank's loader so that every rank stops at the same step (training on streams).

        loader = EqualSteps(DataLoader(stream, batch_size=32, num_workers=4))
        for batch in loader:                  # the same number of batches on every rank
            loss = ddp_model(batch).backward()

    A self-sharding stream gives the ranks nearly, not exactly, equal shares (byte ranges, shards
    of unequal size). A rank that runs one step more than the others waits forever in DDP's
    gradient all-reduce. Before each step the ranks agree, with one all-reduce (MIN) of "I have a
    batch" (a 4-byte message, next to the step's own gradient all-reduce), and all stop when the
    first one runs out. The few batches the others still held are not used this epoch; no
    sample goes to two ranks. Outside a process group of more than one rank it passes batches
    through unchanged. The build_loader presets wrap training loaders over an IterableDataset
    in it when a process group is initialised. Other attributes are the loader's.
    """

    def __init__(self, loader: Iterable[Any]) -> None:
        self.loader = loader

    def __getattr__(self, name: str) -> Any:
        if name == "loader":  # not set yet (unpickling): do not recurse
            raise AttributeError(name)
        return getattr(self.loader, name)

    def __iter__(self) -> Iterator[Any]:
        if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
            yield from self.loader
            return
        # NCCL only reduces CUDA tensors; gloo and the others take CPU ones.
        device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")
        batches = iter(self.loader)
        while True:
            batch = next(batches, _END)
            flag = torch.tensor([batch is not _END], dtype=torch.int32, device=device)
            dist.all_reduce(flag, op=dist.ReduceOp.MIN)
            if not flag.item():
                return
            yield batch
