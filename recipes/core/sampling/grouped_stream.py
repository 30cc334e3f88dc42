"""Batches of one group each from a stream, as detectron2's ``AspectRatioGroupedDataset`` groups the
items of an iterable dataset, and resumed exactly.

    batches = GroupedBatches(CocoShards(...), batch_size=8, group_of=orientation)
    loader = DataLoader(batches, batch_size=None, collate_fn=detection_collate)

Each item goes to its group's bucket (``group_of(item)``, an int). A bucket that holds ``batch_size``
items is handed out as a batch, so that a batch never mixes two groups and an item waits only as
long as its group takes to fill. What the buckets hold when a pass ends is dropped, as a training
loader drops an incomplete last batch.

A state is the stream's as it stood before the oldest item still in a bucket, with ``"grouped"``:
how many items were read since (``replay``) and how many each group holds (``carried``). Resuming
reads those items again and keeps, for each group, the last ones it held, which are the buckets as
they were; the batches still to come are an uninterrupted run's. The price is that one re-read,
in each worker, of the items read since the oldest one carried.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from torch.utils.data import IterableDataset

from recipes.core.contracts.parameters import check_count
from recipes.core.contracts.protocols import ChecksStates, NamesItsData, Resumable
from recipes.core.contracts.states import check_int

GROUPED = "grouped"  # the key of a state that holds what the buckets held


class GroupedBatches(IterableDataset):
    """Lists of ``batch_size`` items of ``stream``, each list of one group (see the module docstring).

    Args:
        stream: an ``IterableDataset``; resumable when it has ``state_dict``/``load_state_dict``.
            Its other attributes (``set_epoch``, ``max_workers``, ``batch_contract``, ...) are this one's.
        batch_size: items a batch.
        group_of: an item's group, an int; it must pickle (a module's function) to reach workers.
    """

    def __init__(self, stream: IterableDataset, batch_size: int, group_of: Callable[[Any], int]) -> None:
        self.stream, self.group_of = stream, group_of
        self.batch_size = check_count("batch_size", batch_size, owner="GroupedBatches", none=False)
        self._reset()
        self._replay: tuple[int, dict[int, int]] | None = None  # a loaded state's re-read, for the next pass

    def __getattr__(self, name: str) -> Any:  # what the loader asks a stream (max_workers, set_epoch, ...)
        if name.startswith("_") or name == "stream":  # unpickling asks before stream is set
            raise AttributeError(name)
        return getattr(self.stream, name)

    def __iter__(self) -> Iterator[list[Any]]:
        items = iter(self.stream)  # the stream's pass begins now, as a plain stream's does
        replay, carried = self._replay or (0, {})
        self._replay = None
        self._reset(self._stream_state())
        return self._batches(items, replay, carried)

    def _batches(self, items: Iterator[Any], replay: int, carried: dict[int, int]) -> Iterator[list[Any]]:
        for item in items:
            group = int(self.group_of(item))
            bucket = self._buckets.setdefault(group, [])
            bucket.append((self._point, self._read, item))  # the stream's state before the item
            self._read += 1
            self._point = self._stream_state()
            if self._read <= replay:  # re-reading a loaded state's items: a group keeps the last it carried
                del bucket[: max(len(bucket) - carried.get(group, 0), 0)]
            elif len(bucket) == self.batch_size:
                del self._buckets[group]
                yield [entry[2] for entry in bucket]
        self._buckets = {}  # incomplete at the end of the pass: dropped

    def state_dict(self) -> dict[str, Any]:
        """The stream's state before the oldest item still in a bucket, and ``"grouped"``."""
        self._require_resumable()
        entries = [entry for bucket in self._buckets.values() for entry in bucket]
        if not entries:
            point = self._point if self._point is not None else self.stream.state_dict()
            return {**point, GROUPED: {"replay": 0, "carried": []}}
        point, first, _ = min(entries, key=lambda entry: entry[1])
        carried = [[group, len(bucket)] for group, bucket in sorted(self._buckets.items()) if bucket]
        return {**point, GROUPED: {"replay": self._read - first, "carried": carried}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Make the next pass go on from ``state``: the stream's own, then its items re-read into the buckets."""
        self._require_resumable()
        stream_state, replay, carried = self._checked(state)
        self.stream.load_state_dict(stream_state)
        self._reset()
        self._replay = None if stream_state.get("position") == "end" else (replay, carried)

    def check_state(self, state: dict[str, Any]) -> None:
        """Raise the ValueError :meth:`load_state_dict` would raise for ``state``, changing nothing."""
        stream_state, _, _ = self._checked(state)
        if isinstance(self.stream, ChecksStates):
            self.stream.check_state(stream_state)

    def adopt_seed(self, state: dict[str, Any]) -> None:
        """The stream's ``adopt_seed`` of ``state`` (checked)."""
        self.stream.adopt_seed(self._checked(state)[0])

    def detached(self) -> GroupedBatches:
        """A copy whose state is its own: what it loads leaves this one as it is."""
        return GroupedBatches(self.stream.detached(), self.batch_size, self.group_of)

    def state_source(self) -> str:
        """What the stream reads, and the batches (a loader state names both)."""
        source = self.stream.state_source() if isinstance(self.stream, NamesItsData) else type(self.stream).__name__
        return f"{source}, grouped in batches of {self.batch_size}"

    def _reset(self, point: dict[str, Any] | None = None) -> None:
        self._buckets: dict[int, list[tuple[Any, int, Any]]] = {}  # group -> (stream state before, read number, item)
        self._read, self._point = 0, point  # items read this pass; the stream's state now

    def _require_resumable(self) -> None:
        if not isinstance(self.stream, Resumable):
            raise ValueError(f"{type(self.stream).__name__} has no state_dict/load_state_dict, and an IterableDataset "
                             "orders and shards itself, so only it can say where it stands: its batches cannot resume")

    def _stream_state(self) -> dict[str, Any] | None:
        return self.stream.state_dict() if isinstance(self.stream, Resumable) else None

    def _checked(self, state: Any) -> tuple[dict[str, Any], int, dict[int, int]]:
        """``state`` split into the stream's state, the items to re-read and the count each group carried."""
        owner = "GroupedBatches"
        if not isinstance(state, dict) or not isinstance(state.get(GROUPED), dict):
            raise ValueError(f"{owner} state: no {GROUPED!r} dict (a state of the stream alone, or damaged): "
                             "pass the state this loader saved")
        grouped = state[GROUPED]
        if sorted(grouped) != ["carried", "replay"]:
            raise ValueError(f"{owner} state: {GROUPED} has the keys {sorted(grouped)}, not ['carried', 'replay']")
        replay = check_int(grouped["replay"], f"{GROUPED}.replay", owner)
        pairs = grouped["carried"]
        if not isinstance(pairs, list) or not all(isinstance(pair, (list, tuple)) and len(pair) == 2 for pair in pairs):
            raise ValueError(f"{owner} state: {GROUPED}.carried = {str(pairs)[:80]} is not a list of [group, count]")
        most = self.batch_size - 1  # a full bucket was handed out
        carried = {check_int(group, f"{GROUPED}.carried group", owner, -2**31, 2**31):
                   check_int(count, f"{GROUPED}.carried count", owner, 1, most) for group, count in pairs}
        if len(carried) != len(pairs) or sum(carried.values()) > replay:
            raise ValueError(f"{owner} state: {GROUPED} = {str(grouped)[:80]} carries more items than it re-reads, "
                             "or a group twice")
        return {name: value for name, value in state.items() if name != GROUPED}, replay, carried
