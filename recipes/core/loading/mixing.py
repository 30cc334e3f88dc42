"""Datasets of one domain mixed at chosen weights: deterministic and resumable.

    code = TokenizedTextDataset("code.jsonl", tokenizer)
    prose = TokenizedTextDataset("prose.txt", tokenizer)
    mixed = MixedDataset([code, prose], weights=[1, 3], samples_per_epoch=40_000)
    loader = text_loader(mixed, 32, seed=0, stateful=True)  # length grouping, resume, ranks: as for one
    source, local = mixed.locate(index)                     # which sample a batch index is

The rule, for epoch ``e`` (``S = samples_per_epoch``, default the sources' total length):
source ``k`` gives ``round(S * w_k / sum(w))`` samples, the next stretch of an endless sequence of
its permutations (a fresh one, from ``(seed, k, cycle)``, each time it is used up), and the
sources are interleaved at random from ``(seed, epoch)``. So an up-weighted source repeats
evenly (at any point of the run two samples were drawn as often, or one more time), and a
down-weighted one shows every sample before any repeats, across epochs.

Indices are those of the sources laid end to end, as in ``ConcatDataset``: ``mixed[i]`` is the
sample ``locate(i)`` names, and the presets' plans draw each epoch through
:meth:`MixedDataset.epoch_indices`, so every domain loader takes a mixture like any dataset.
:class:`MixedStream` applies the rule to self-sharding streams. A source states what the others
must share in ``batch_contract()``, e.g. ``{"collate": "text_collate", "pad_id": 0}``: sources
that differ are refused, and the mixture answers those names as its first source does; the
arrays its ``"per_sample"`` entry names (``lengths``) are laid end to end.
"""

from __future__ import annotations

import bisect
import copy
import random
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
from torch.utils.data import Dataset, IterableDataset, Subset

from recipes.core.sampling.draws import EpochDraws
from recipes.core.contracts.errors import describe_sample
from recipes.core.contracts.protocols import (
    ChecksStates,
    Mixable,
    NamesItsData,
    RankPlaced,
    ReadsPaths,
    Resumable,
    ShardLimited,
    check_hooks,
    contract_of,
    per_sample_fields,
)
from recipes.core.sampling.seeding import sample_seed
from recipes.core.contracts.states import CURSOR_FIELDS, check_int, check_keys, check_source, sampled_digest
from recipes.core.sources.streams import ResumableStream


class MixedDataset(Dataset):
    """Samples of ``datasets`` mixed at ``weights`` (see the module docstring).

    Args:
        datasets: map-style datasets of one domain, whose items batch together.
        weights: one non-negative weight per dataset (their sum is normalised).
        samples_per_epoch: samples an epoch draws in all; None: the datasets' total length.

    Items that carry an ``"index"`` carry the mixture's, so batches name their samples. A sample
    drawn twice in an epoch is augmented twice with different seeds. A training loader that drops
    its last partial batch drops fewer than ``batch_size`` draws, at random; evaluation
    (``train=False``) reads every sample of every source once, in order. A plain
    ``DataLoader(mixed, shuffle=True)`` knows nothing of the weights and would see the sources
    end to end: give it ``batch_sampler=GroupedBatchSampler(len(mixed), ..., plan=Shuffle(draws=mixed.epoch_indices))``.

    Raises:
        ValueError: datasets that cannot share a collate or a label space (different collates,
            pad ids, classes or categories), an iterable dataset, or bad weights; the message says why.
    """

    def __init__(
        self, datasets: Sequence[Dataset], weights: Sequence[float], *, samples_per_epoch: int | None = None
    ) -> None:
        self.datasets = list(datasets)
        self.weights = _check_weights(self.datasets, weights)
        _check_compatible(self.datasets, iterable=False)
        self.sizes = [len(dataset) for dataset in self.datasets]
        if any(size == 0 and weight > 0 for size, weight in zip(self.sizes, self.weights)):
            raise ValueError(f"a dataset with weight > 0 is empty (sizes {self.sizes})")
        self.offsets = np.cumsum([0, *self.sizes])
        self._starts = self.offsets.tolist()
        total = int(self.offsets[-1])
        self.samples_per_epoch = total if samples_per_epoch is None else int(samples_per_epoch)
        if self.samples_per_epoch < 1:
            raise ValueError(f"samples_per_epoch must be >= 1, got {samples_per_epoch}")
        self.draws = _shares(self.samples_per_epoch, self.weights)  # per epoch, per source
        self.per_sample_fields = tuple(  # those of every source
            name for name in per_sample_fields(self.datasets[0])
            if all(name in per_sample_fields(dataset) for dataset in self.datasets)
        )
        for name in self.per_sample_fields:  # laid end to end, as the indices are
            setattr(self, name, np.concatenate([np.asarray(getattr(d, name)) for d in self.datasets]))

    def __getattr__(self, name: str) -> Any:
        return _shared(self, self.__dict__.get("datasets"), name)

    def batch_contract(self) -> dict[str, Any]:
        """The sources' shared contract (see the module doc), with the arrays laid end to end: a
        mixture mixes, and batches, like its sources."""
        return {**contract_of(self.datasets[0]), "per_sample": self.per_sample_fields}

    def __len__(self) -> int:
        return int(self.offsets[-1])

    def locate(self, index: int) -> tuple[int, int]:
        """``(source, index within that source)`` of a mixture index."""
        if not 0 <= index < self._starts[-1]:
            raise IndexError(f"index {index} is out of range for a mixture of {len(self)} samples")
        source = bisect.bisect_right(self._starts, index) - 1  # on a list: ~0.2 us, numpy's ~1.5
        return source, int(index) - self._starts[source]

    def __getitem__(self, index: int) -> Any:
        """The sample ``locate(index)`` names; a dict item's ``"index"`` becomes the mixture's."""
        source, local = self.locate(index)
        return _as_mixture_item(self.datasets[source][local], index)

    def describe(self, index: int) -> str:
        """Where mixture index ``index`` comes from: ``"source 1, dataset index 20 (labeled.jsonl line 18)"``."""
        source, local = self.locate(index)
        return f"source {source}, {describe_sample(self.datasets[source], local)}"

    def viewed(self, view: Callable[[Dataset], Dataset]) -> MixedDataset:
        """This mixture with each source seen through ``view`` (``decode="device"``'s
        :class:`recipes.core.pixels.device_decode.DeviceView`): the same draws, indices and names,
        each item the view's. The sources' contract was checked here already."""
        mixture = copy.copy(self)
        mixture.datasets = [view(dataset) for dataset in self.datasets]
        return mixture

    def epoch_indices(self, seed: int, epoch: int) -> EpochDraws:
        """The mixture indices epoch ``epoch`` draws (``sum(self.draws)`` of them), interleaved at
        random from ``(seed, epoch)``, each computed when asked for
        (:class:`recipes.core.sampling.draws.EpochDraws`; ``np.asarray`` them for all at once); the same on
        every rank and in every process."""
        return EpochDraws(self.sizes, self.draws, seed, epoch)

    def __repr__(self) -> str:
        parts = ", ".join(f"{type(d).__name__}({n}) x {w:g}" for d, n, w in zip(self.datasets, self.sizes, self.weights))
        return f"MixedDataset([{parts}], {self.samples_per_epoch} samples per epoch)"

    def state_source(self) -> str:
        """What a loader state names as this mixture's data: each source's own, the weights and
        the samples per epoch (the draws change with each)."""
        return _mixture_source(self.datasets, self.weights, self.samples_per_epoch)


class MixedStream(ResumableStream):
    """Self-sharding streams of one domain mixed at ``weights`` (see the module docstring).

    Each reader slot (rank x DataLoader worker) draws its share of ``samples_per_epoch``, source
    ``k`` contributing ``round(share * w_k / sum(w))`` items in an order drawn from ``(seed, epoch,
    slot)``. Each source keeps its own pass going from one mixed epoch to the next, and starts its
    next pass (its next epoch) when it runs out, so a small up-weighted source repeats and a
    large one is read on where the last epoch left it. Those running passes live in the reader,
    so a loader must keep its workers (``persistent_workers=True``, as the presets set) or have
    none: a worker started afresh at a later epoch would start every source over, and a large
    source would show the same items every epoch. That is refused, by the presets when the loader
    is built and by the mixture itself in a reader that starts an epoch its sources are not at.

    Args:
        streams: IterableDatasets with ``state_dict``/``load_state_dict`` (``ImageTextShards``,
            ``StreamingTextDataset``) of one domain, built for the same ranks.
        weights: one non-negative weight per stream.
        samples_per_epoch: items an epoch holds across all ranks and workers.
        seed: the interleaving seed; None draws one shared by all ranks.
    """

    # what the loader presets read: workers must outlive an epoch, and why
    needs_persistent_workers = (
        "its sources' passes run on in the workers from one epoch to the next, and fresh workers would start "
        "every source over"
    )

    def __init__(
        self, streams: Sequence[IterableDataset], weights: Sequence[float], *, samples_per_epoch: int,
        seed: int | None = None,
    ) -> None:
        self.streams = list(streams)
        self.weights = _check_weights(self.streams, weights)
        _check_compatible(self.streams, iterable=True)
        placements = {(s.rank, s.world_size) if isinstance(s, RankPlaced) else (0, 1) for s in self.streams}
        if len(placements) > 1:
            raise ValueError(f"the streams were built for different ranks (rank, world size): {sorted(placements)}")
        rank, world_size = placements.pop()
        if samples_per_epoch < 1:
            raise ValueError(f"samples_per_epoch must be >= 1, got {samples_per_epoch}")
        self.samples_per_epoch = int(samples_per_epoch)
        super().__init__(seed, rank, world_size, source=_mixture_source(self.streams, self.weights, samples_per_epoch))
        self._passes: list[Iterator[Any] | None] = [None] * len(self.streams)  # each source's running pass
        self._sources_epoch = 0  # the mixed epoch whose start the sources' own states stand at
        self._ran = False  # a pass began in this copy: the sources' running passes are here

    def __getattr__(self, name: str) -> Any:
        return _shared(self, self.__dict__.get("streams"), name)

    def batch_contract(self) -> dict[str, Any]:
        """The streams' shared contract (see the module doc): a mixture batches like its sources."""
        return contract_of(self.streams[0])

    def max_workers(self) -> int:
        """The most DataLoader workers per rank that every stream can feed (``sys.maxsize``: none limits them)."""
        return min((stream.max_workers() for stream in self.streams if isinstance(stream, ShardLimited)),
                   default=sys.maxsize)

    def state_dict(self) -> dict[str, Any]:
        """The mixture's seed, epoch and draws taken, and each source's own stream state."""
        return {**super().state_dict(), "sources": [stream.state_dict() for stream in self.streams]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume from ``state``: every field, and each source's state, is checked first (a
        ValueError names it); a refused state leaves the mixture and its sources as they were."""
        owner = type(self).__name__
        if isinstance(state, dict) and "source" in state:  # saved before states named their data: none
            check_source({name: state[name] for name in (*CURSOR_FIELDS, "source") if name in state}, self._source,
                         owner)
        check_keys(state, (*CURSOR_FIELDS, "sources", *(["source"] if "source" in state else [])), owner)
        sources = state["sources"]
        if not isinstance(sources, list) or len(sources) != len(self.streams):
            count = len(sources) if isinstance(sources, list) else type(sources).__name__
            raise ValueError(f"{owner} state: sources holds {count} states for {len(self.streams)} streams")
        before, number = [stream.state_dict() for stream in self.streams], None
        try:
            for number, (stream, source_state) in enumerate(zip(self.streams, sources)):
                stream.load_state_dict(source_state)
            number = None
            self._load_cursor({name: state[name] for name in CURSOR_FIELDS})
        except ValueError as error:
            for stream, previous in zip(self.streams, before):
                stream.load_state_dict(previous)
            if number is None:
                raise
            raise ValueError(f"{owner} state: sources[{number}]: {error}") from None
        self._passes = [None] * len(self.streams)  # resume each source from its state, not a running pass
        self._sources_epoch = int(state["epoch"]) + (state["position"] == "end")
        self._ran = False

    def read_paths(self) -> list[Any]:
        """The files or URLs the sources read."""
        return [path for stream in self.streams if isinstance(stream, ReadsPaths) for path in stream.read_paths()]

    def adopt_seed(self, state: dict[str, Any]) -> None:
        """The mixture's seed and each source's, from a checked ``state`` (see ``ResumableStream``)."""
        super().adopt_seed(state)
        for stream, source_state in zip(self.streams, state["sources"]):
            if isinstance(stream, ChecksStates):
                stream.adopt_seed(source_state)

    def detached(self) -> MixedStream:
        """A copy whose state, and its sources', is its own (see ``ResumableStream.detached``)."""
        copied = super().detached()
        copied.streams = [stream.detached() if isinstance(stream, ChecksStates) else copy.deepcopy(stream)
                          for stream in self.streams]
        return copied

    def _max_taken(self, slots: int) -> int:
        return -(-self.samples_per_epoch // slots)  # the largest share of the epoch's draws a reader takes

    def _check_position(self, position: list[Any], slots: int) -> None:
        """A pass is one block of draws: ``[0, 0, taken]``."""
        check_int(position[0], "position[0] (block)", type(self).__name__, 0, 0)
        check_int(position[1], "position[1] (start)", type(self).__name__, 0, 0)

    def __getstate__(self) -> dict[str, Any]:
        # running passes are generators, which do not pickle: a copy starts from the sources' state
        return {**self.__dict__, "_passes": [None] * len(self.streams), "_ran": False}

    def _begin(self, slots: int) -> tuple[int, Any]:
        """Refuse a reader that starts an epoch its sources' states are not at (see the class doc)."""
        epoch, resume = self.cursor.begin(slots)
        if resume is None and not self._ran and epoch != self._sources_epoch:
            raise ValueError(
                f"MixedStream: this reader starts epoch {epoch}, but its sources stand at the start of epoch "
                f"{self._sources_epoch}: their passes run on inside the reader that read the earlier epochs. "
                "Keep the DataLoader's workers (persistent_workers=True, the presets' default) or use "
                "num_workers=0, and resume from a state_dict rather than set_epoch"
            )
        self._ran, self._sources_epoch = True, epoch + 1
        return epoch, resume

    def _blocks(self, slot: int, slots: int, epoch: int, resume: list[Any] | None) -> Iterator[tuple[int, int, Any]]:
        """This reader's draws, one block: its share of the epoch, sources in an order from ``(seed, epoch, slot)``."""
        share = self.samples_per_epoch // slots + (slot < self.samples_per_epoch % slots)
        order = [k for k, count in enumerate(_shares(share, self.weights)) for _ in range(count)]
        random.Random(sample_seed(self.cursor.seed, epoch, slot)).shuffle(order)
        taken = resume[2] if resume is not None else 0
        yield 0, 0, (self._next_of(source) for source in order[taken:])

    def _next_of(self, source: int) -> Any:
        """The next item of a source, starting its next pass when it runs out."""
        for _ in range(3):  # a resumed pass that had ended is empty; so is an empty stream
            if self._passes[source] is None:
                self._passes[source] = iter(self.streams[source])
            item = next(self._passes[source], _END)
            if item is not _END:
                return item
            self._passes[source] = None
        raise ValueError(f"stream {source} ({type(self.streams[source]).__name__}) yields nothing for this reader")


_END = object()


def _mixture_source(sources: Sequence[Any], weights: list[float], samples_per_epoch: int) -> str:
    """A mixture's data in a few words: its sources' (``state_source()``, else the type and size),
    weights and samples per epoch; a long list is digested."""
    names = [source.state_source() if isinstance(source, NamesItsData) else type(source).__name__
             for source in sources]
    if len(names) > 4:
        names = [f"{len(names)} sources {sampled_digest(names)}"]
    return f"mixture of [{'; '.join(names)}] at {[round(w, 6) for w in weights]}, {samples_per_epoch} per epoch"


def _as_mixture_item(item: Any, index: int) -> Any:
    """A source's item under its mixture index: a dict item's ``"index"`` becomes ``index``."""
    return {**item, "index": index} if isinstance(item, dict) and "index" in item else item


def _shared(mixture: Any, sources: list[Any] | None, name: str) -> Any:
    """What the sources' contract names (``pad_id``, ``classes``...) is the first source's, read
    as it reads (a tokenizer without a pad token says what to do)."""
    if sources and name not in ("collate", "per_sample") and name in (_contract(sources[0]) or {}):
        return getattr(sources[0], name)
    raise AttributeError(f"{type(mixture).__name__!r} object has no attribute {name!r}")


def _check_weights(datasets: list[Any], weights: Sequence[float]) -> list[float]:
    if not datasets or len(weights) != len(datasets):
        raise ValueError(f"give one weight per dataset: {len(datasets)} datasets, {len(weights)} weights")
    values = [float(weight) for weight in weights]
    if not all(np.isfinite(w) and w >= 0 for w in values) or sum(values) <= 0:
        raise ValueError(f"weights must be finite, >= 0 and not all 0, got {list(weights)}")
    return values


def _shares(total: int, weights: list[float]) -> list[int]:
    """``round(total * w_k / sum(w))`` for each weight."""
    scale = total / sum(weights)
    return [round(weight * scale) for weight in weights]


def _check_compatible(datasets: list[Dataset], *, iterable: bool) -> None:
    """Refuse sources whose items could not share a batch or a label space, saying why."""
    for dataset in datasets:
        check_hooks(dataset)
        if isinstance(dataset, IterableDataset) != iterable:
            use = "MixedStream" if not iterable else "MixedDataset"
            raise ValueError(f"{type(dataset).__name__} cannot be mixed here: use recipes.core.{use}")
        if iterable and not isinstance(dataset, Resumable):
            raise ValueError(f"{type(dataset).__name__} has no state_dict: a mixture of streams resumes through them")
    contracts = [contract for contract in map(_contract, datasets) if contract is not None]
    collates = sorted({str(contract.get("collate")) for contract in contracts})
    if len(collates) > 1:
        raise ValueError(f"cannot mix datasets whose items need different collate functions ({', '.join(collates)})")
    names = dict.fromkeys(name for contract in contracts for name in contract if name not in ("collate", "per_sample"))
    for name in names:  # in the contracts' own order: the most telling field first
        values = [contract.get(name) for contract in contracts]
        if any(not _equal(value, values[0]) for value in values[1:]):
            why = "batches are padded with one pad id" if name == "pad_id" else "labels would mean different things"
            raise ValueError(f"cannot mix datasets with different {name} ({_short(values)}): {why}")


def _contract(dataset: Dataset) -> dict[str, Any] | None:
    """A dataset's ``batch_contract()`` (through Subsets), None for one that has none."""
    while isinstance(dataset, Subset):
        dataset = dataset.dataset
    return dataset.batch_contract() if isinstance(dataset, Mixable) else None


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return a is not None and b is not None and np.array_equal(a, b)
    return a == b


def _short(values: list[Any]) -> str:
    return ", ".join(repr(value)[:40] for value in values)
