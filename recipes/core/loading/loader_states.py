"""A loader state checked whole before anything reads it, and what it belongs to.

    state = loader.state_dict()       # torchdata's layout + "belongs_to": samples, source, batching
    loader.load_state_dict(state)     # every field checked here: a ValueError names it

torchdata's ``StatefulDataLoader.load_state_dict`` keeps the state and reads it at the next
``iter()``: a damaged field fails there, raw (a ``KeyError``, an ``AssertionError``, a crashed
worker, a ``StopIteration`` out of ``iter()``), or not at all (a whole fresh epoch served), and
the state stays, so every later ``iter()`` fails too. :func:`check_loader_state` reads every
field torchdata reads (type and range), the sampler's or the stream's own state (checked by
them, on a copy) and ``belongs_to`` (:func:`loader_identity`), and changes nothing: a refused
state leaves the loader as it was. The world size is not part of ``belongs_to``: a state resumes
on another (elastic resume).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from torch.utils.data import IterableDataset

from recipes.core.contracts.protocols import ChecksStates, RankPlaced, Resumable
from recipes.core.sampling.samplers import GroupedBatchSampler
from recipes.core.contracts.states import SEED_RANGE, check_belongs, check_int, source_of

BELONGS = "belongs_to"  # the key of a loader state that says what it is a position in
OWNER = "ResumableLoader"
# torchdata 0.11's fields, by where they sit: a state saved without workers, a multi-worker
# state's top level, its "_snapshot", the main process's snapshot and each worker's.
SINGLE_FIELDS = ("_index_sampler_state", "_sampler_iter_state", "_sampler_iter_yielded", "_num_yielded",
                 "_IterableDataset_len_called", "_shared_seed", "fetcher_state", "dataset_state", "_iterator_finished")
MULTI_FIELDS = ("_snapshot", "_steps_since_snapshot", "_iterator_finished")
SNAPSHOT_FIELDS = ("_snapshot_step", "_last_yielded_worker_id", "_main_snapshot", "_worker_snapshots")
MAIN_FIELDS = ("_num_workers", "_sampler_iter_state", "_index_sampler_state", "_sampler_iter_yielded",
               "_IterableDataset_len_called", "_shared_seed", "_base_seed")
WORKER_FIELDS = ("worker_id", "dataset_state", "fetcher_state")
COUNT_MAX = 2**62  # counters torchdata only stores


@dataclass(frozen=True)
class CheckedState:
    """What :func:`check_loader_state` found: the state without ``belongs_to``, the worker count
    it was saved with, the sampler's state (map-style) and the stream's states (one per worker)."""

    torchdata: dict[str, Any]
    saved_workers: int
    sampler_state: dict[str, Any] | None
    stream_states: list[dict[str, Any]]
    steps_since_snapshot: int
    finished: bool


def loader_identity(loader: Any) -> dict[str, Any]:
    """What a state of ``loader`` is a position in: the sampler's ``num_samples``, ``batch_size``
    and ``plan`` (a stream's loader: its ``batch_size``), and the data's ``source``."""
    sampler = loader.batch_sampler
    if isinstance(sampler, GroupedBatchSampler):
        identity = dict(sampler.identity())
    else:
        identity = {"batch_size": loader.batch_size}
    return {**identity, "source": source_of(loader.dataset)}


def check_loader_state(loader: Any, state: Any) -> CheckedState:
    """Check every field of ``state`` for ``loader`` (a :class:`recipes.core.loading.loader.ResumableLoader`);
    a ValueError names the field, its value and what it may be. Changes nothing."""
    if not isinstance(state, dict):
        raise ValueError(f"{OWNER} state must be a dict (a StatefulDataLoader's state_dict()), got "
                         f"{type(state).__name__}")
    belongs = state.get(BELONGS)
    if BELONGS not in state and _names_its_batching(state):
        raise ValueError(f"{OWNER} state: no {BELONGS}, though its sampler state is of a version that always writes "
                         "one (it names the data the state is a position in): pass the state as it was saved")
    if belongs is not None or BELONGS in state:  # states saved before they named their data have none
        if not isinstance(belongs, dict):
            raise ValueError(f"{OWNER} state: {BELONGS} = {_short(belongs)} is not a dict")
        mine = loader.belongs_to()
        if isinstance(loader.batch_sampler, GroupedBatchSampler) and "plan" in mine:  # as the sampler resumes
            sampler = loader.batch_sampler
            mine["plan"] = sampler.plan_name(sampler.resumed_plan(belongs.get("plan")))
        check_belongs(belongs, mine, OWNER, "this loader")
    torchdata = {name: value for name, value in state.items() if name != BELONGS}
    grouped = isinstance(loader.batch_sampler, GroupedBatchSampler)
    iterable = not grouped and isinstance(loader.dataset, IterableDataset)
    if "_snapshot" in torchdata or ("_steps_since_snapshot" in torchdata and "_num_yielded" not in torchdata):
        checked = _check_multi(torchdata, iterable, grouped, loader.batch_size)
    else:
        checked = _check_single(torchdata, iterable, grouped, loader.batch_size)
    if iterable:
        _check_stream_states(loader, checked)
    elif grouped:
        _check_sampler_state(loader.batch_sampler, checked)
    return checked


def _names_its_batching(state: dict[str, Any]) -> bool:
    """Whether the state's sampler state holds ``num_samples``, as every state saved with ``belongs_to`` does."""
    sampler = state.get("_index_sampler_state")
    snapshot = state.get("_snapshot")
    if sampler is None and isinstance(snapshot, dict) and isinstance(snapshot.get("_main_snapshot"), dict):
        sampler = snapshot["_main_snapshot"].get("_index_sampler_state")
    return isinstance(sampler, dict) and "num_samples" in sampler


def _check_single(state: dict[str, Any], iterable: bool, grouped: bool, batch_size: int | None) -> CheckedState:
    _require(state, SINGLE_FIELDS, "")
    _check_main(state, iterable, grouped, batch_size, "")
    check_int(state["_num_yielded"], "_num_yielded", OWNER, 0, COUNT_MAX)
    check_int(state.get("_num_workers", 0), "_num_workers", OWNER, 0, 0)  # not torchdata's here: 0 if any
    # not torchdata's in this layout, but counted by the sampler's position if a state carries it
    steps = check_int(state.get("_steps_since_snapshot", 0), "_steps_since_snapshot", OWNER, 0, COUNT_MAX)
    finished = _check_bool(state["_iterator_finished"], "_iterator_finished")
    worker = _check_worker({"dataset_state": state["dataset_state"], "fetcher_state": state["fetcher_state"]},
                           iterable, "")
    streams = [worker] if worker is not None else []
    return CheckedState(state, 0, state["_index_sampler_state"], streams, steps, finished)


def _check_multi(state: dict[str, Any], iterable: bool, grouped: bool, batch_size: int | None) -> CheckedState:
    _require(state, MULTI_FIELDS, "")
    steps = check_int(state["_steps_since_snapshot"], "_steps_since_snapshot", OWNER, 0, COUNT_MAX)
    finished = _check_bool(state["_iterator_finished"], "_iterator_finished")
    snapshot = _dict(state["_snapshot"], "_snapshot")
    _require(snapshot, SNAPSHOT_FIELDS, "_snapshot")
    main = _dict(snapshot["_main_snapshot"], "_snapshot['_main_snapshot']")
    prefix = "_snapshot['_main_snapshot']"
    _require(main, MAIN_FIELDS, prefix)
    workers = check_int(main["_num_workers"], f"{prefix}['_num_workers']", OWNER, 1, 2**16)
    _check_main(main, iterable, grouped, batch_size, prefix)
    check_int(main["_base_seed"], f"{prefix}['_base_seed']", OWNER, 0, SEED_RANGE[1])
    check_int(snapshot["_snapshot_step"], "_snapshot['_snapshot_step']", OWNER, 0, COUNT_MAX)
    check_int(snapshot["_last_yielded_worker_id"], "_snapshot['_last_yielded_worker_id']", OWNER, 0, workers - 1)
    snapshots = _dict(snapshot["_worker_snapshots"], "_snapshot['_worker_snapshots']")
    expected = [f"worker_{worker}" for worker in range(workers)]
    if sorted(snapshots, key=str) != sorted(expected):
        raise ValueError(
            f"{OWNER} state: _snapshot['_worker_snapshots'] holds {sorted(map(str, snapshots))[:8]}, not the "
            f"{workers} workers {expected[:8]} its _num_workers says"
        )
    streams = []
    for worker, key in enumerate(expected):
        where = f"_snapshot['_worker_snapshots']['{key}']"
        worker_state = _dict(snapshots[key], where)
        _require(worker_state, WORKER_FIELDS, where)
        check_int(worker_state["worker_id"], f"{where}['worker_id']", OWNER, worker, worker)
        stream_state = _check_worker(worker_state, iterable, where)
        if stream_state is not None:
            streams.append(stream_state)
    return CheckedState(state, workers, main["_index_sampler_state"], streams, steps, finished)


def _check_main(main: dict[str, Any], iterable: bool, grouped: bool, batch_size: int | None, prefix: str) -> None:
    """The fields the main process restores: the index sampler's state and torchdata's counters
    (``grouped``: the batch sampler is a GroupedBatchSampler, whose state is the whole position)."""
    where = (lambda name: f"{prefix}['{name}']") if prefix else (lambda name: name)
    yielded = check_int(main["_sampler_iter_yielded"], where("_sampler_iter_yielded"), OWNER, 0, COUNT_MAX)
    if main["_IterableDataset_len_called"] is not None:
        check_int(main["_IterableDataset_len_called"], where("_IterableDataset_len_called"), OWNER, 0, COUNT_MAX)
    if main["_shared_seed"] is not None:
        check_int(main["_shared_seed"], where("_shared_seed"), OWNER, *SEED_RANGE)
    sampler_iter = main["_sampler_iter_state"]
    if iterable:
        _none(main["_index_sampler_state"], where("_index_sampler_state"), "a stream's loader has no index sampler")
        if sampler_iter is not None:  # torchdata's batch sampler over an endless one: it counts samples
            sampler_iter = _dict(sampler_iter, where("_sampler_iter_state"))
            _require(sampler_iter, ("samples_yielded",), where("_sampler_iter_state"))
            # torchdata skips that many samples one by one at iter(): at most the batches' worth
            check_int(sampler_iter["samples_yielded"], where("_sampler_iter_state") + "['samples_yielded']", OWNER,
                      0, yielded * (batch_size or 1))
    elif grouped:
        _dict(main["_index_sampler_state"], where("_index_sampler_state"))
        _none(sampler_iter, where("_sampler_iter_state"), "the batch sampler's state is _index_sampler_state")
    else:  # another batch sampler: torchdata's own, or the user's, which checks its state itself
        for name in ("_index_sampler_state", "_sampler_iter_state"):
            if main[name] is not None:
                _dict(main[name], where(name))


def _check_worker(worker: dict[str, Any], iterable: bool, prefix: str) -> dict[str, Any] | None:
    """A worker's (or the single process's) part: the stream's state, or nothing for a map-style dataset."""
    where = (lambda name: f"{prefix}['{name}']") if prefix else (lambda name: name)
    if not iterable:
        _none(worker["dataset_state"], where("dataset_state"), "a map-style dataset's position is the sampler's")
        _none(worker["fetcher_state"], where("fetcher_state"), "a map-style dataset's fetcher keeps no state")
        return None
    fetcher = worker["fetcher_state"]
    if fetcher is not None:
        fetcher = _dict(fetcher, where("fetcher_state"))
        _require(fetcher, ("dataset_iter_state", "fetcher_ended"), where("fetcher_state"))
        _none(fetcher["dataset_iter_state"], where("fetcher_state") + "['dataset_iter_state']",
              "the stream's state is dataset_state")
        _check_bool(fetcher["fetcher_ended"], where("fetcher_state") + "['fetcher_ended']")
    if worker["dataset_state"] is None:
        return None
    return _dict(worker["dataset_state"], where("dataset_state"))


def _check_sampler_state(sampler: GroupedBatchSampler, checked: CheckedState) -> None:
    """The sampler's own checks (on a copy), then what torchdata replays from there."""
    state = checked.sampler_state
    try:
        remaining, whole = sampler.check_state(state)
    except ValueError as error:
        raise ValueError(f"{OWNER} state: _index_sampler_state: {error}") from None
    if checked.steps_since_snapshot > remaining:
        raise ValueError(
            f"{OWNER} state: _steps_since_snapshot = {checked.steps_since_snapshot} is not an integer in "
            f"[0, {remaining}]: the sampler's state has {remaining} batches of its pass still to come"
        )
    if checked.finished and not (remaining == 0 or whole):
        raise ValueError(
            f"{OWNER} state: _iterator_finished = True, but the sampler's state has {remaining} batches of its pass "
            "still to come: a state of a finished pass is at its end (or at the start of the next)"
        )


def _check_stream_states(loader: Any, checked: CheckedState) -> None:
    """Each worker's stream state, checked by the stream itself on a copy of it."""
    dataset = loader.dataset
    if not checked.stream_states:
        return
    if not isinstance(dataset, Resumable):
        raise ValueError(f"{OWNER} state holds a dataset_state, and {type(dataset).__name__} has no load_state_dict")
    readers = (dataset.world_size if isinstance(dataset, RankPlaced) else 1) * max(1, loader.num_workers)
    same_workers = checked.saved_workers == loader.num_workers
    for number, stream_state in enumerate(checked.stream_states):
        try:
            if isinstance(dataset, ChecksStates):
                dataset.check_state(stream_state)
        except ValueError as error:
            raise ValueError(f"{OWNER} state: worker {number}'s dataset_state: {error}") from None
        slots = stream_state.get("slots")
        if same_workers and isinstance(stream_state.get("position"), list) and slots != readers:
            raise ValueError(
                f"{OWNER} state: worker {number}'s dataset_state was saved in the middle of a pass read by {slots} "
                f"readers (ranks x workers), and this loader has {readers}: resume with the same world size and "
                "num_workers, or from a state taken at the end of a pass"
            )
    most = max(0, getattr(loader, "snapshot_every_n_steps", 1) - 1)
    if checked.steps_since_snapshot > most:
        raise ValueError(
            f"{OWNER} state: _steps_since_snapshot = {checked.steps_since_snapshot} is not an integer in [0, {most}]: "
            f"a loader with snapshot_every_n_steps={most + 1} takes a snapshot at least that often (build this "
            "loader with the snapshot_every_n_steps the state was saved with)"
        )


def _require(state: dict[str, Any], names: Iterable[str], where: str) -> None:
    missing = [name for name in names if name not in state]
    if missing:
        place = f" {where}" if where else ""
        raise ValueError(
            f"{OWNER} state:{place} lacks {missing}: not a state of a StatefulDataLoader like this one (saved with "
            "another num_workers layout, or damaged)"
        )


def _dict(value: Any, field: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError(f"{OWNER} state: {field} = {_short(value)} is not a dict")
    return value


def _none(value: Any, field: str, why: str) -> None:
    if value is not None:
        raise ValueError(f"{OWNER} state: {field} = {_short(value)} is not None: {why}")


def _check_bool(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{OWNER} state: {field} = {_short(value)} is not True or False")
    return value


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
