"""Where each sample of a list of tar shards starts: readers' shares of an epoch equal by count.

    index = ShardIndex.build(shards, max_member_bytes=2**28)   # once per job (on rank 0: shared_result)
    for position, sample in index.samples(order, slot, slots, resume_start, read): ...
    epochs = ShardEpochs(index, shuffle_buffer=1000, owner="ImageTextShards")   # what a shard stream's pass reads
    for block, start, items in epochs.blocks(slot, slots, epoch, resume, seed=seed, read=read, items=items): ...

Dealt whole shards, readers hold unequal numbers of samples (shards differ in size, and do not
divide by ``world_size x num_workers``); a training loader on several ranks stops every rank when
the first runs out (:class:`recipes.core.sampling.distributed.EqualSteps`), and the samples the others still
held are not seen that epoch, the same ones every epoch. Here the epoch's samples, shard after
shard in the epoch's shard order, are cut into ``slots`` contiguous runs of ``N // slots`` or
``N // slots + 1`` samples (what litdata and Mosaic streaming do from their index files); a run
starts and ends mid-shard at a sample's first header, so more readers than shards work too. The
index is one walk of the member headers per shard (8 bytes a sample kept), no payload read, on
rank 0 when the dataset is built; with a ``cache_dir`` it is kept there and not walked again.
A training loader still drops each reader's last partial batch: turned, a share starts at its
epoch's turning point (:func:`recipes.core.sources.streams.turning_point`), so what one epoch drops
the next one reads.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from recipes.core.sources.index_cache import cached_index, file_identities
from recipes.core.sampling.seeding import epoch_generator
from recipes.core.contracts.states import check_int
from recipes.core.sources.streams import ResumableStream, block_shuffler, shuffled_blocks, turning_point
from recipes.core.sources.prepared_shards import prepared_listing, verify_shards
from recipes.core.sources.storage import shown
from recipes.core.sources.tar_samples import expand_shards, read_samples, sample_starts

Read = Callable[[list[int], Any], Iterator[tuple[list[int], Any]]]  # (shard numbers, begin) -> read_samples


@dataclass(frozen=True)
class Run:
    """Samples ``[low, high)`` of the epoch's sequence (a reader's share, or part of it): ``shards``
    (shard numbers) read from byte ``begin`` of the first, up to ``stop`` (list position, byte) or their end."""

    shards: list[int]
    begin: int
    stop: tuple[int, int] | None
    low: int
    high: int
    before: np.ndarray  # samples of the epoch ahead of each of ``shards``
    starts: list[np.ndarray]  # each of ``shards``' sample offsets

    def sample(self, position: int, offset: int) -> int:
        """The epoch's number of the sample at byte ``offset`` of ``shards[position]``."""
        return int(self.before[position] + np.searchsorted(self.starts[position], offset))

    def where(self, sample: int) -> tuple[int, int]:
        """``(list position, byte offset)`` of the epoch's sample number ``sample`` (in this run)."""
        position = int(np.searchsorted(self.before, sample, side="right")) - 1
        return position, int(self.starts[position][sample - self.before[position]])


class ShardIndex:
    """Each shard's sample start offsets (see the module doc)."""

    def __init__(self, starts: list[np.ndarray]) -> None:
        self.starts = starts
        self.counts = np.array([len(offsets) for offsets in starts], dtype=np.int64)

    @property
    def total(self) -> int:
        return int(self.counts.sum())

    @classmethod
    def build(cls, shards: list[str], *, max_member_bytes: int, storage_options: dict[str, Any] | None = None
              ) -> ShardIndex:
        """Walk every shard's headers once (:func:`recipes.core.sources.tar_samples.sample_starts`)."""
        return cls([sample_starts(shard, max_member_bytes=max_member_bytes, storage_options=storage_options)
                    for shard in shards])

    @classmethod
    def cached(cls, shards: list[str], *, max_member_bytes: int, storage_options: dict[str, Any] | None = None,
               cache_dir: str | os.PathLike | None = None) -> ShardIndex:
        """:meth:`build`, or with a ``cache_dir`` the index an earlier build of these shards left
        there (:mod:`recipes.core.sources.index_cache`: no shard is read again)."""

        def build() -> dict[str, np.ndarray]:
            index = cls.build(shards, max_member_bytes=max_member_bytes, storage_options=storage_options)
            return {"counts": index.counts, "starts": np.concatenate([np.zeros(0, dtype=np.int64), *index.starts])}

        identity = [max_member_bytes, file_identities(shards) if cache_dir is not None else []]
        arrays = cached_index(cache_dir, "shards", identity, build)
        return cls(np.split(arrays["starts"], np.cumsum(arrays["counts"])[:-1]))

    def share(self, order: list[int], slot: int, slots: int) -> tuple[int, int]:
        """Reader ``slot`` of ``slots``' samples ``[low, high)`` of the epoch whose shards come in ``order``."""
        total = int(self.counts[order].sum())
        return slot * total // slots, (slot + 1) * total // slots

    def run(self, order: list[int], low: int, high: int) -> Run:
        """The run of the epoch's samples ``[low, high)``, the shards coming in ``order``."""
        before = np.concatenate([[0], np.cumsum(self.counts[order])]).astype(np.int64)
        if low == high:
            return Run([], 0, None, low, high, before[:0], [])
        first = int(np.searchsorted(before, low, side="right")) - 1  # holds sample low (not an empty shard)
        last = int(np.searchsorted(before, high, side="left")) - 1  # holds sample high - 1
        shards = [int(shard) for shard in order[first : last + 1]]
        ends = high - int(before[last])
        stop = None if ends == self.counts[shards[-1]] else (last - first, int(self.starts[shards[-1]][ends]))
        begin = int(self.starts[shards[0]][low - before[first]])
        return Run(shards, begin, stop, low, high, before[first : last + 1], [self.starts[s] for s in shards])

    def samples(self, order: list[int], slot: int, slots: int, resume: Any, read: Read, owner: str = "stream",
                *, turned_in: int | None = None) -> Iterator[tuple[list, Any]]:
        """``([list position, byte offset, sample number], sample)`` for reader ``slot``'s share, from
        ``resume`` (a position this yielded) on; ``read(shard numbers, begin)`` is ``read_samples``.
        A ``resume`` that is not a sample of the share is a ValueError naming ``owner``'s state.

        With ``turned_in`` (an epoch) the share ``[low, high)`` is read from that epoch's
        :func:`recipes.core.sources.streams.turning_point` to its end, then from its start up to there:
        two runs, a position's list position counting in its own (its sample number says which).
        A two-item ``resume`` was saved when readers were dealt whole shards (``order[slot::slots]``):
        that pass ends as it began, on the whole shards.
        """
        if resume is not None and len(resume) == 2:
            yield from read(order[slot::slots], list(resume))
            return
        low, high = self.share(order, slot, slots)
        middle = low if turned_in is None else turning_point(low, high, turned_in)
        runs = [self.run(order, middle, high), self.run(order, low, middle)]  # unturned, the second is empty
        if resume is not None and runs[1].low <= resume[2] < runs[1].high:
            runs = runs[1:]  # the state was saved in the second run: the first was read whole
        for number, run in enumerate(runs):
            if not run.shards:
                continue
            begin = [0, run.begin] if resume is None or number else self._checked(run, resume, slot, owner)
            samples = read(run.shards, begin)
            with contextlib.closing(samples):
                for (position, offset), sample in samples:
                    if run.stop is not None and (position, offset) >= run.stop:
                        break
                    yield [position, offset, run.sample(position, offset)], sample

    @staticmethod
    def _checked(run: Run, resume: Any, slot: int, owner: str) -> list[int]:
        position, offset, sample = resume
        if not run.low <= sample < run.high or run.where(sample) != (position, offset):
            raise ValueError(
                f"{owner} state: position[1] = {list(resume)} is not a sample of reader {slot}'s share (samples {run.low} to "
                f"{run.high - 1} of the epoch): a state of other shards or readers, or the shards have changed"
            )
        return [position, offset]


def shard_order(count: int, seed: int, epoch: int, shuffled: bool) -> list[int]:
    """The epoch's order of ``count`` shards: a permutation drawn from ``(seed, epoch)``, or in order."""
    if not shuffled:
        return list(range(count))
    return torch.randperm(count, generator=epoch_generator(seed, epoch)).tolist()


@dataclass(frozen=True)
class ShardEpochs:
    """How every stream of tar shards (image-caption pairs, clips and transcripts) reads an epoch
    and checks a position in one: its :meth:`blocks` are a :class:`recipes.core.sources.streams.ResumableStream`'s
    ``_blocks``, its :meth:`check_position` that stream's ``_check_position``.

    Args:
        index: the shards' :class:`ShardIndex`.
        shuffle_buffer: samples shuffled together (0: shards and samples in order).
        owner: the stream's name, for the messages.
    """

    index: ShardIndex
    shuffle_buffer: int
    owner: str

    def blocks(self, slot: int, slots: int, epoch: int, resume: list[Any] | None, *, seed: int, read: Read,
               items: Callable[..., Iterable[Any]], turns: bool = True) -> Iterator[tuple[int, Any, Iterator[Any]]]:
        """Reader ``slot``'s share of the epoch's samples (shards in an order drawn from ``(seed, epoch)``
        when shuffled), in blocks of ``shuffle_buffer`` shuffled samples: ``(block, start, items)``.
        ``read(shard numbers, begin)`` reads samples (``read_samples``), ``items(shard, key, files)`` are a
        sample's items (none: skipped); a resumed block leaves out the items taken before its state.
        With ``turns`` (the stream's ``cursor.turns``) the share starts at the epoch's
        :func:`recipes.core.sources.streams.turning_point`, so the samples a training loader drops at the
        end of a share in one epoch are read in the next, in file order too."""
        order = shard_order(len(self.index.starts), seed, epoch, shuffled=self.shuffle_buffer > 0)
        first_block, begin, skip = resume if resume is not None else (0, None, 0)
        rng_of_block = block_shuffler(seed, epoch, slot, slots, self.shuffle_buffer)
        samples = self.index.samples(order, slot, slots, begin, read, self.owner, turned_in=epoch if turns else None)
        for block, start, records in shuffled_blocks(samples, max(self.shuffle_buffer, 1), rng_of_block, first_block):
            produced = (item for record in records for item in items(*record))
            yield block, start, itertools.islice(produced, skip if block == first_block else 0, None)

    def check_position(self, position: list[Any], slots: int) -> None:
        """Refuse a resume point ``[block, [shard position in the reader's list, byte offset, sample number],
        taken]`` outside these shards (``[position, offset]``: saved when each reader read whole shards)."""
        owner, start, shards = self.owner, position[1], len(self.index.starts)
        if not isinstance(start, (list, tuple)) or len(start) not in (2, 3):
            raise ValueError(f"{owner} state: position[1] = {str(start)[:80]} is not [shard, byte offset, sample]")
        if len(start) == 2 and slots > shards:
            raise ValueError(f"{owner} state: slots = {slots} is more readers than the {shards} shards")
        longest = -(-shards // slots) if len(start) == 2 else shards  # a reader's list of shards
        check_int(start[0], "position[1][0] (shard)", owner, 0, longest - 1)
        offset = check_int(start[1], "position[1][1] (byte offset)", owner)
        if offset % 512:
            raise ValueError(
                f"{owner} state: position[1][1] (byte offset) = {offset} is not a tar header's (a multiple of 512)"
            )
        if len(start) == 3:
            check_int(start[2], "position[1][2] (sample)", owner, 0, max(self.index.total - 1, 0))

    def max_workers(self, world_size: int) -> int:
        """The most DataLoader workers per rank that all get a sample."""
        return max(self.index.total // world_size, 1)


def listed_shards(paths: Any, storage_options: dict[str, Any] | None = None, *, max_member_bytes: int,
                  cache_dir: str | os.PathLike | None = None, verify: bool = False) -> tuple[list[str], ShardIndex]:
    """The shards ``paths`` names (:func:`recipes.core.sources.tar_samples.expand_shards`) and where
    each one's samples start: one walk of their headers, or the index ``cache_dir`` keeps. A folder
    (local or a URL) that ``recipes prepare`` wrote is listed from its ``manifest.json``, no shard
    opened; with ``verify`` each of its shards is first read against the sha256 there (a DataError
    names one that disagrees), and ``verify`` without such a manifest is a ValueError."""
    listed = prepared_listing(paths, storage_options)
    if verify:
        if listed is None:
            raise ValueError(f"{shown(paths) if isinstance(paths, (str, os.PathLike)) else 'a list of shards'}: "
                             "verify_shards needs the folder recipes prepare wrote, whose manifest.json has the "
                             "shards' sha256")
        verify_shards(listed, storage_options)
    if listed is not None:
        return [entry["path"] for entry in listed], ShardIndex([np.asarray(entry["starts"], dtype=np.int64)
                                                               for entry in listed])
    shards = expand_shards(paths, storage_options)
    return shards, ShardIndex.cached(shards, max_member_bytes=max_member_bytes, storage_options=storage_options,
                                     cache_dir=cache_dir)


class ShardStream(ResumableStream):
    """A stream of the samples of tar shards, shared out by a :class:`ShardEpochs`: what every shard
    stream of a domain has in common (``AudioShards``, ``ImageTextShards``, ``ImageShards``, ``CocoShards``).

    A subclass sets ``self.shards`` and ``self.index`` (:func:`listed_shards`), ``self.epochs`` (their
    :class:`ShardEpochs`) and ``self.shuffle_buffer`` after ``ResumableStream.__init__``, its
    ``max_member_bytes`` (and ``storage_options``, ``on_error``, ``cache`` where it has them), and
    defines what a sample gives; ``_read`` reads the shards with :func:`read_samples` unless it
    is overridden::

        def _items(self, shard, key, files, epoch):     # a sample's items ({extension: bytes} in files)
            return [{"audio": decode(files["flac"]), "key": key}]
    """

    turns = True  # a pass starts at its epoch's turning point (turning_point)
    shards: list[str]
    epochs: ShardEpochs
    shuffle_buffer: int
    max_member_bytes: int  # what the default _read refuses a member above, before reading it
    storage_options: dict[str, Any] | None = None
    on_error: str = "raise"
    cache: Any = None  # a recipes.core.caches.DiskCache of remote shards read whole, or None

    def read_paths(self) -> list[Any]:
        """The shards a pass reads (for :meth:`retries_made`)."""
        return list(self.shards)

    def max_workers(self) -> int:
        """The most DataLoader workers per rank that all get a sample."""
        return self.epochs.max_workers(self.world_size)

    def _max_taken(self, slots: int) -> int | None:
        return max(self.shuffle_buffer, 1)  # one item a sample; a subclass giving several returns None

    def _check_position(self, position: list[Any], slots: int) -> None:
        self.epochs.check_position(position, slots)

    def _blocks(self, slot: int, slots: int, epoch: int, resume: list[Any] | None) -> Iterator[tuple[int, Any, Any]]:
        """One epoch of this reader's share of the samples, in blocks of ``shuffle_buffer`` shuffled samples."""
        items = functools.partial(self._items, epoch=epoch)
        return self.epochs.blocks(slot, slots, epoch, resume, seed=self.cursor.seed, read=self._read, items=items,
                                  turns=self.cursor.turns)

    def _read(self, numbers: list[int], start: Any) -> Iterator[tuple[list[int], Any]]:
        """The samples of ``shards[numbers]`` from ``start``, by :func:`read_samples` with the stream's
        ``max_member_bytes``, ``storage_options``, ``on_error`` and ``cache``; override it to read otherwise."""
        return read_samples([self.shards[number] for number in numbers], start, max_member_bytes=self.max_member_bytes,
                            storage_options=self.storage_options, on_error=self.on_error, cache=self.cache)

    def _items(self, shard: str, key: str, files: dict[str, bytes], epoch: int) -> Iterable[Any]:
        raise NotImplementedError(f"{type(self).__name__} must implement _items(shard, key, files, epoch)")

