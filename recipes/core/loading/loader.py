"""DataLoader presets: the keyword arguments worth setting, and the one composition every preset calls.

    loader = DataLoader(dataset, batch_size=64, **loader_kwargs("cuda", train=True, seed=0))

    loader = build_loader(dataset, collate, batch_size=64, plan=ByGroup(groups), train=True, seed=0)

:func:`build_loader` is what every domain preset calls once it has picked a plan and a collate,
and what a dataset of yours can call too: it checks the dataset's hooks, takes the collate it asks
for, applies :func:`preset_kwargs`, the mixture draws of ``draws_of``, a :class:`SeededBatchSampler`
(epochs, ranks, resume), :class:`SeededDataset`, :func:`loader_collate` (errors naming the samples,
batches packed in workers) and the resumable loader, so a preset cannot leave one out; a stream goes to
:func:`stream_loader`. ``loader_kwargs`` answers the questions the DataLoader docs leave open
(how many workers, pin or not, keep workers alive, how far to prefetch) from the device and the
CPUs this process may use. The values are starting points: ``python -m recipes bench`` measures
them on your data.
"""

from __future__ import annotations

import gc
import os
import warnings
from collections.abc import Callable
from functools import partial
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset
from torchdata.stateful_dataloader import StatefulDataLoader

from recipes.core.sampling.distributed import EqualSteps, distributed_rank_and_size
from recipes.core.contracts.errors import NamedCollate
from recipes.core.workers.loader_errors import ReleasingIterator
from recipes.core.loading.loader_states import BELONGS, check_loader_state, loader_identity
from recipes.core.workers.orphans import exit_with_parent
from recipes.core.workers.packing import packed_in_workers
from recipes.core.contracts.parameters import check_count
from recipes.core.sampling.plans import Plan, Shuffle, draws_of
from recipes.core.contracts.protocols import (
    ChecksStates,
    NeedsPersistentWorkers,
    Resumable,
    ShardLimited,
    UsualCollate,
    check_hooks,
    chosen_collate,
)
from recipes.core.sampling.samplers import GroupedBatchSampler, SeededBatchSampler
from recipes.core.sampling.seeding import SeededDataset, random_seed, rank_seed
from recipes.core.loading.trainers import check_built_for_ranks, shards_itself
from recipes.core.workers.watchdog import WatchedIterator, watch_loader
from recipes.core.workers.worker_sockets import check_socket_dir

# More workers than this rarely helps one GPU and each one costs a process, its memory and
# prefetch_factor batches in flight; measure before going higher (python -m recipes bench).
MAX_AUTO_WORKERS = 8
# What torchdata 0.11's StatefulDataLoader makes torch say on construction (a regex, for filterwarnings).
SET_VITAL_WARNING = r"'set_vital' is deprecated, please do not call"


def usable_cpus() -> int:
    """CPUs this process may run on (the affinity mask, which containers and SLURM narrow)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS and Windows have no sched_getaffinity
        return os.cpu_count() or 1


def freeze_inherited_objects(worker_id: int, then: Callable[[int], Any] | None = None) -> None:
    """Worker start-up: hide every object inherited from the parent from the garbage collector.

    A forked worker shares the parent's memory until it writes to it, and a full collection
    writes to every object it visits (their reference counts and GC links). Without this, a
    worker that runs one grows by ~80 MB of copied interpreter heap (torch's modules, mostly),
    whatever the dataset (tests/detection/test_worker_memory.py, benchmarks/memory.py); the
    Python docs' ``gc.freeze`` entry describes the same fix (``freeze`` itself only splices the
    collector's lists). The worker also exits within seconds if the training process dies, even
    in the middle of a read (:func:`recipes.core.workers.orphans.exit_with_parent`). Then
    ``then(worker_id)``, the user's own ``worker_init_fn``.
    """
    gc.freeze()
    exit_with_parent()
    if then is not None:
        then(worker_id)


def resolve_device(device: str | torch.device | None) -> torch.device:
    """``None`` -> the available accelerator, else CPU; strings and devices pass through."""
    if device is None:
        accelerator = torch.accelerator.current_accelerator(check_available=True)
        return accelerator if accelerator is not None else torch.device("cpu")
    return torch.device(device)


def loader_kwargs(
    device: str | torch.device | None = None,
    *,
    train: bool,
    num_workers: int | None = None,
    seed: int | None = None,
) -> dict[str, Any]:
    """DataLoader keyword arguments tuned for ``device``.

    Args:
        device: ``"cuda"``, ``"cpu"``, a ``torch.device``, ``"debug"`` (no workers, so a
            breakpoint in ``__getitem__`` works), or None to detect the accelerator.
        train: training drops the last incomplete batch; evaluation keeps every sample.
        num_workers: override the worker count derived from the usable CPUs.
        seed: seeds the loader's generator, hence each worker's base seed (mixed with the
            rank on ranks other than 0, so no two (rank, worker) pairs share a seed).

    Returns:
        A dict for ``DataLoader(**kwargs)``: ``num_workers``, ``pin_memory``, ``drop_last``, and
        with workers ``persistent_workers``, ``prefetch_factor`` and ``worker_init_fn``
        (:func:`freeze_inherited_objects`); ``generator`` with
        a seed or in a process group.
    """
    debug = device == "debug"
    device = torch.device("cpu") if debug else resolve_device(device)
    on_accelerator = device.type != "cpu"
    if num_workers is None:
        if debug:
            num_workers = 0
        elif on_accelerator:
            # All usable CPUs feed the accelerator, shared between the ranks on this node.
            local_ranks = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
            num_workers = min(MAX_AUTO_WORKERS, max(1, usable_cpus() // local_ranks))
        else:
            # On CPU the model's own threads need the cores too: give loading half of them.
            num_workers = min(MAX_AUTO_WORKERS, max(1, usable_cpus() // 2))
    check_socket_dir(num_workers)
    kwargs: dict[str, Any] = {
        "num_workers": num_workers,
        # Page-locked batches let the host-to-GPU copy run as DMA, async with non_blocking=True;
        # on CPU pinning only costs a copy.
        "pin_memory": device.type == "cuda",
        # A partial last batch changes the loss scale and BatchNorm statistics in training;
        # evaluation must see every sample.
        "drop_last": train,
    }
    if num_workers > 0:
        # Keep workers (and their open files, imports, caches) alive between epochs instead of
        # forking them again, which stalls the start of every epoch.
        kwargs["persistent_workers"] = True
        # Batches each worker keeps ready. A GPU step is short and a slow JPEG is bursty: four
        # absorb the bursts; on CPU the model is slow anyway and two save memory.
        kwargs["prefetch_factor"] = 4 if on_accelerator else 2
        # Copy-on-read: see freeze_inherited_objects (pytorch issue 13246 is the data side of it).
        kwargs["worker_init_fn"] = freeze_inherited_objects
    rank, world_size = distributed_rank_and_size()
    if seed is None and world_size > 1:
        # Every rank usually calls torch.manual_seed(same): the default base seeds would match.
        seed = random_seed()
    if seed is not None:
        # Workers derive their seeds from this generator: same seed, same worker seeds. Other
        # ranks mix in their rank, or worker w of every rank would draw the same numbers (the
        # per-sample seeds of SeededDataset do not reach an IterableDataset's own draws).
        kwargs["generator"] = torch.Generator().manual_seed(seed if rank == 0 else rank_seed(seed, rank))
    return kwargs


def preset_kwargs(
    device: str | torch.device | None = None, *, train: bool, seed: int | None = None, **overrides: Any
) -> dict[str, Any]:
    """:func:`loader_kwargs` with the caller's DataLoader keyword arguments on top: what a preset
    hands to ``DataLoader``, plus ``shuffle`` and ``drop_last`` for its batch sampler to pop.

    ``overrides`` replace the preset's values (``num_workers=0``, ``pin_memory=False``,
    ``multiprocessing_context="spawn"``, ``drop_last=False``, ``shuffle=False``, ``timeout=60``,
    ``stall_warning_s=None``: the watchdog's, :mod:`recipes.core.workers.watchdog`, ...); a
    ``worker_init_fn`` runs after the preset's own start-up (:func:`freeze_inherited_objects`)
    instead of replacing it. Without workers, the worker-only arguments are left out.
    """
    kwargs = loader_kwargs(device, train=train, num_workers=overrides.pop("num_workers", None), seed=seed)
    kwargs["shuffle"] = train
    user_init = overrides.pop("worker_init_fn", None)
    kwargs.update(overrides)
    if user_init is not None:
        kwargs["worker_init_fn"] = partial(kwargs.get("worker_init_fn", freeze_inherited_objects), then=user_init)
    if kwargs["num_workers"] == 0:
        kwargs.pop("persistent_workers", None)
        kwargs.pop("prefetch_factor", None)
        if kwargs.get("worker_init_fn") is freeze_inherited_objects:
            kwargs.pop("worker_init_fn")  # nothing is forked, nothing to freeze
    return kwargs


def build_loader(
    dataset: Dataset,
    collate_fn: Callable[[list[Any]], Any] | UsualCollate | None,
    *,
    batch_size: int | None,
    train: bool,
    device: str | torch.device | None = None,
    seed: int | None = None,
    stateful: bool = False,
    plan: Plan | None = None,
    **overrides: Any,
) -> DataLoader | EqualSteps:
    """The one composition of a loader: every domain preset picks its plan and collate and calls
    this, and a dataset of yours gets the same loader.

    The dataset's hooks are checked once, first (:func:`recipes.core.contracts.protocols.check_hooks`).
    ``collate_fn`` is used as given; None or a preset's :class:`recipes.core.contracts.protocols.UsualCollate`
    takes the collate the dataset asks for (its ``batch_contract()``'s ``"collate"``, :func:`recipes.core.contracts.protocols.collate_of`), else
    that usual one (None: torch's ``default_collate``): :func:`recipes.core.contracts.protocols.chosen_collate`.
    A map-style dataset gets a :class:`SeededBatchSampler` (shuffled per epoch and batched as
    ``plan`` says when training, in order when not, split across ranks) and
    :class:`SeededDataset`, so each sample's augmentation is seeded by ``(seed, epoch, index)``;
    ``plan`` None shuffles; a mixture's epochs (``epoch_indices``, :func:`recipes.core.sampling.plans.draws_of`)
    are drawn by the plan, and a plan that draws its own as well (``draws=``) is a ValueError naming
    both. An ``IterableDataset`` goes to :func:`stream_loader`. ``overrides``: see :func:`preset_kwargs`.
    Either way ``collate_fn``'s errors name the batch's samples
    (:class:`recipes.core.contracts.errors.NamedCollate`) and its batches leave worker processes in one
    buffer per dtype (:func:`recipes.core.workers.packing.packed_in_workers`). ``stateful=True`` returns a
    :class:`ResumableLoader`, whose ``state_dict()`` resumes mid-epoch with exactly the batches
    still to come, also on another world size or ``num_workers``.
    """
    if isinstance(dataset, IterableDataset):
        if plan is not None:
            raise ValueError("plan= needs a map-style dataset: an IterableDataset orders and shards itself")
        options = {"train": train, "device": device, "seed": seed, "stateful": stateful}
        return stream_loader(dataset, collate_fn, batch_size, **options, **overrides)  # it checks the hooks
    check_hooks(dataset)
    collate_fn = chosen_collate(dataset, collate_fn)
    kwargs = preset_kwargs(device, train=train, seed=seed, **overrides)
    draws = draws_of(dataset)
    plan = Shuffle() if plan is None else plan
    if plan.draws is None:
        plan = plan.drawing(draws)
    elif draws is not None:
        raise ValueError(
            f"{type(dataset).__name__} draws its own epochs (epoch_indices: a mixture's weighted draws) and the "
            f"plan {plan!r} was given draws= of its own: one of them would be ignored; pass the plan without draws= "
            "(it then draws the mixture's epochs), or the mixture's sources without the mixture"
        )
    sampler = SeededBatchSampler(
        len(dataset), batch_size, shuffle=kwargs.pop("shuffle"), drop_last=kwargs.pop("drop_last"), seed=seed, plan=plan
    )
    loader = ResumableLoader if stateful else RecipeLoader
    return loader(SeededDataset(dataset), batch_sampler=sampler, collate_fn=loader_collate(collate_fn), **kwargs)


def stream_loader(
    dataset: IterableDataset,
    collate_fn: Callable[[list[Any]], Any] | UsualCollate | None,
    batch_size: int | None,
    *,
    train: bool,
    device: str | torch.device | None = None,
    seed: int | None = None,
    stateful: bool = False,
    **overrides: Any,
) -> DataLoader | EqualSteps:
    """The preset for a stream, an ``IterableDataset`` that orders and shards itself
    (:mod:`recipes.core.sources.streams`): :func:`preset_kwargs` with a plain ``batch_size``, and
    ``collate_fn`` as :func:`build_loader` chooses and applies it (:func:`loader_collate`).

    A stream with a limit on its readers (:class:`recipes.core.contracts.protocols.ShardLimited`: tar shards
    need a sample per worker) gets no more workers than that, unless ``num_workers`` says otherwise.
    ``stateful=True`` needs the stream's ``state_dict``/``load_state_dict``. Training on more
    than one rank wraps the loader in :class:`recipes.core.sampling.distributed.EqualSteps`, so that every
    rank stops at the same step. A stream whose ``needs_persistent_workers`` says why (a
    mixture of streams, whose sources' passes run on across epochs) is refused without them, and
    a hook of the wrong shape is a ``TypeError`` naming it (:func:`recipes.core.contracts.protocols.check_hooks`).
    """
    check_hooks(dataset)
    collate_fn = chosen_collate(dataset, collate_fn)
    check_count("batch_size", batch_size, owner=f"the loader of a {type(dataset).__name__}")
    if stateful and not isinstance(dataset, Resumable):
        raise ValueError(
            f"stateful=True: {type(dataset).__name__} has no state_dict/load_state_dict, and an IterableDataset "
            "orders and shards itself, so only it can say where it stands"
        )
    if overrides.get("num_workers") is None and isinstance(dataset, ShardLimited):
        # a worker past the stream's limit would have nothing to read
        overrides["num_workers"] = min(loader_kwargs(device, train=train)["num_workers"], dataset.max_workers())
    kwargs = preset_kwargs(device, train=train, seed=seed, **overrides)
    kwargs.pop("shuffle")  # a stream shuffles itself
    if batch_size is None:  # the stream hands out batches itself (streams.GroupedBatches)
        kwargs["drop_last"] = False
    reason = dataset.needs_persistent_workers if isinstance(dataset, NeedsPersistentWorkers) else None
    if reason and kwargs["num_workers"] > 0 and not kwargs.get("persistent_workers"):
        raise ValueError(f"a {type(dataset).__name__} needs persistent_workers=True with workers: {reason}")
    loader = (ResumableLoader if stateful else RecipeLoader)(
        dataset, batch_size=batch_size, collate_fn=loader_collate(collate_fn), **kwargs
    )
    return EqualSteps(loader) if train and distributed_rank_and_size()[1] > 1 else loader


def watched(loader: DataLoader, iterator: Any) -> ReleasingIterator:
    """``loader``'s iterator, watched for stalls where the loader has a watch (workers), and releasing on error."""
    watch = loader.__dict__.get("watch")
    if watch is None:
        return ReleasingIterator(iterator)
    dataset = loader.dataset.dataset if isinstance(loader.dataset, SeededDataset) else loader.dataset
    return WatchedIterator(iterator, watch, dataset)


def loader_collate(collate_fn: Callable[[list[Any]], Any]) -> NamedCollate:
    """``collate_fn`` as the loaders call it: its batches packed in worker processes, one transfer
    a dtype rather than one a tensor (benchmarks/README.md), and its errors naming the samples."""
    if isinstance(collate_fn, NamedCollate):  # named once
        collate_fn = collate_fn.collate_fn
    return NamedCollate(packed_in_workers(collate_fn))


@shards_itself  # Lightning and Accelerate take it without sharding it again (recipes.core.loading.trainers)
class RecipeLoader(DataLoader):
    """torch's ``DataLoader``, whose iterator leaves no reference cycle behind when it raises
    (:mod:`recipes.core.workers.loader_errors`): a caught error does not keep the workers alive. A stall
    names the samples in flight and the silent worker's stack (:mod:`recipes.core.workers.watchdog`):
    past ``timeout=`` as an error, past ``stall_warning_s=`` (five minutes; None: off) as one warning."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs, self.watch = watch_loader(kwargs)
        super().__init__(*args, **kwargs)

    def __iter__(self) -> ReleasingIterator:
        check_built_for_ranks(self)
        return watched(self, super().__iter__())


@shards_itself
class ResumableLoader(StatefulDataLoader):
    """torchdata's ``StatefulDataLoader`` whose state also loads with another ``num_workers``.

    torchdata keeps each worker's state and refuses a state saved with a different worker count.
    A map-style recipe loader needs none of it: its workers only load the indices the batch
    sampler (in this process) hands them, so the sampler's state is the whole position, and
    :class:`recipes.core.sampling.samplers.GroupedBatchSampler` deals the rest of an epoch to any world
    size. With the worker count unchanged, loading is torchdata's own. A stream (an
    IterableDataset, whose workers read parts of the data themselves) loads with another worker
    count only from a state taken at the end of a pass; mid-pass that is a ``ValueError`` that
    says so.

    The state's layout is torchdata's; ``tests/core/test_mixing.py`` pins the keys read here.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        with warnings.catch_warnings():
            # torchdata 0.11's constructor calls torch.set_vital, which torch deprecates; nothing we
            # pass avoids it. tests/core/test_loader.py fails once a torchdata release stops calling it.
            warnings.filterwarnings("ignore", message=SET_VITAL_WARNING, category=UserWarning)
            kwargs, self.watch = watch_loader(kwargs)
            super().__init__(*args, **kwargs)
        self._belongs_to: dict[str, Any] | None = None

    def __iter__(self) -> ReleasingIterator:
        check_built_for_ranks(self)
        return watched(self, super().__iter__())

    def belongs_to(self) -> dict[str, Any]:
        """The samples, source and batching a state of this loader is a position in
        (:func:`recipes.core.loading.loader_states.loader_identity`), computed once."""
        if self._belongs_to is None:
            self._belongs_to = loader_identity(self)
        return dict(self._belongs_to)

    def state_dict(self) -> dict[str, Any]:
        """torchdata's state, and ``belongs_to`` (:meth:`belongs_to`), so another loader refuses it."""
        return {**super().state_dict(), BELONGS: self.belongs_to()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load ``state_dict`` (torchdata's layout): every field is checked now
        (:func:`recipes.core.loading.loader_states.check_loader_state`), torchdata's own, the sampler's or
        the stream's and ``belongs_to``; a ValueError names the field and changes nothing, so the
        loader goes on as it was. The state's seed wins (a warning if ``seed=`` gave another)."""
        checked = check_loader_state(self, state_dict)
        other_workers = checked.saved_workers != self.num_workers
        stream = not isinstance(self.batch_sampler, GroupedBatchSampler)
        states, ended = checked.stream_states, checked.finished  # ended: every reader got to the end of its part
        if stream and other_workers and not (ended or all(state.get("position") in (None, "end") for state in states)):
            raise ValueError(
                f"this stream's state was saved with num_workers={checked.saved_workers} in the middle of a pass; "
                f"its workers read their own shards, so it resumes mid-pass only with "
                f"num_workers={checked.saved_workers} (and the same world size), or from a state taken at the end "
                "of a pass"
            )
        # checked whole: from here on nothing is refused
        if not stream:
            sampler_state = checked.sampler_state
            if other_workers:  # torchdata's state of other workers is not used: the sampler's position is the whole
                sampler_state = {**sampler_state, "yielded": sampler_state["yielded"] + checked.steps_since_snapshot}
            self.batch_sampler.load_state_dict(sampler_state)  # it warns of a replaced seed, once
            self._belongs_to = None  # the sampler may have taken the plan the state was saved under
        elif states and isinstance(self.dataset, ChecksStates):
            self.dataset.adopt_seed(states[0])  # before the workers get their copies
        if not other_workers:
            super().load_state_dict(checked.torchdata)
            return
        super().load_state_dict({})  # torchdata's way to drop the running pass and keep no state of its own
        if stream and states:  # none: taken before the first pass, nothing to restore
            self.dataset.load_state_dict({**states[0], "position": "end"} if ended else states[0])
