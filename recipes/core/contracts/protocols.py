"""The hooks the core reads from a dataset, each written once as a ``typing.Protocol``.

    class Lines(Dataset):
        def describe(self, index: int) -> str:       # Described: errors name the line
            return f"{self.path} line {index + 1}"

    check_hooks(Lines())       # a TypeError naming the hook if one has the wrong signature

A dataset implements the hooks it needs, and none is required: the core asks with
``isinstance(dataset, Protocol)`` and does without the hook when it is absent. Every hook the core
reads is named here once, never as a string at the call site. :func:`check_hooks` holds the hooks
a dataset does declare to their shapes (once where a loader is built, once where a mixture is), so
``def describe(self)`` fails where the loader is built, not in the middle of an error message.
The hooks the domains read from each other's objects (``pad_id``, ``aspect_ratios``, a
transform's ``draft_size`` and ``draw_box``) are written here too, in ``LIBRARY_HOOKS``.
"""

from __future__ import annotations

import functools
import inspect
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from torch.utils.data import Subset, default_collate


@runtime_checkable
class Described(Protocol):
    """``describe(index) -> str``: where sample ``index`` comes from (a file, ``"a.jsonl line 18"``).

    Called by :func:`recipes.core.contracts.errors.describe_sample` / ``describe_batch`` when a sample, a
    transform or a collate fails. Without it errors name the dataset index only.
    """

    def describe(self, index: int) -> str: ...


@runtime_checkable
class Mixable(Protocol):
    """``batch_contract() -> dict``: how this dataset's items batch, and what sources mixed with it
    must share (``{"collate": "text_collate", "pad_id": 0, "per_sample": ("lengths",)}``, ``classes``...).

    Two keys are read apart from the rest:

    - ``"collate"``: the name of the collate the items need (sources that differ are refused), or
      the collate itself where the domain's usual one would batch the items wrongly (an
      instruction dataset's labels padded with -100): a preset given no ``collate_fn`` then uses
      it (:func:`collate_of`).
    - ``"per_sample"``: names of the dataset's arrays with one entry per sample (``("lengths",)``),
      which a mixture lays end to end, so a plan (``ByLength(mixed.lengths)``) reads a mixture as
      it reads one source.

    Called by :class:`recipes.core.loading.mixing.MixedDataset` / ``MixedStream``, which refuse sources
    whose other entries differ and answer those names as their first source does, and by
    :func:`recipes.core.loading.loader.build_loader` through :func:`chosen_collate`. Without it a
    mixture cannot tell that two sources' batches or labels disagree, nor answer ``pad_id``, and a
    preset batches the items with its domain's usual collate.
    """

    def batch_contract(self) -> dict[str, Any]: ...


@runtime_checkable
class DrawsEpochs(Protocol):
    """``epoch_indices(seed, epoch) -> Sequence[int]``: the indices one epoch draws, when the
    dataset decides them itself (a mixture's weighted draws).

    Read by :func:`recipes.core.sampling.plans.draws_of`, which ``build_loader`` asks; the sampler calls it once
    an epoch. Without it an epoch shows each index once, which ignores a mixture's weights.
    """

    def epoch_indices(self, seed: int, epoch: int) -> Sequence[int]: ...


@runtime_checkable
class Viewable(Protocol):
    """``viewed(view) -> Dataset``: this dataset made of others (a mixture), each of them seen
    through ``view``, with the same draws and names.

    Called by :func:`recipes.core.pixels.device_decode.with_decode` for ``decode="device"``, whose
    ``view`` is a domain's :class:`recipes.core.pixels.device_decode.DeviceView`. Not a hook a
    domain's dataset implements (:class:`recipes.core.loading.mixing.MixedDataset` does). Without it
    the view is asked to wrap the dataset itself, and refuses one that is not its domain's.
    """

    def viewed(self, view: Callable[[Any], Any]) -> Any: ...


@runtime_checkable
class NeedsPersistentWorkers(Protocol):
    """``needs_persistent_workers``: why a stream's DataLoader workers must outlive an epoch
    (a string; empty or None when they need not).

    Read by :func:`recipes.core.loading.loader.stream_loader`, which refuses workers that restart each
    epoch. Without it a stream whose state lives in its workers (a mixture of streams) starts
    over every epoch and repeats the same items.
    """

    needs_persistent_workers: str | None


@runtime_checkable
class ShardLimited(Protocol):
    """``max_workers() -> int``: the most DataLoader workers per rank the stream can feed
    (a sample each at least).

    Called by :func:`recipes.core.loading.loader.stream_loader` and by :class:`recipes.core.loading.mixing.MixedStream`.
    Without it the preset starts as many workers as the CPUs allow, and the stream refuses those
    left without a sample.
    """

    def max_workers(self) -> int: ...


@runtime_checkable
class RankPlaced(Protocol):
    """``rank``, ``world_size``: the rank a self-sharding stream reads for, of how many
    (:class:`recipes.core.sources.streams.ResumableStream` sets them).

    Read by :class:`recipes.core.loading.mixing.MixedStream`, which refuses streams built for different
    ranks. Without them a stream counts as rank 0 of 1, and mixing it with streams built for
    rank 3 of 8 is refused.
    """

    rank: int
    world_size: int


@runtime_checkable
class Resumable(Protocol):
    """``state_dict()`` / ``load_state_dict(state)``: where a stream stands, and resuming there.

    Called by :func:`recipes.core.loading.loader.stream_loader` (``stateful=True``), by
    :class:`recipes.core.loading.loader.ResumableLoader` and by :class:`recipes.core.loading.mixing.MixedStream`.
    Without them a stream cannot be resumed: ``stateful=True`` and mixing it are refused.
    """

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


@runtime_checkable
class NamesItsData(Protocol):
    """``state_source() -> str``: a few words that change when the data does (file names, sizes, a
    sampled digest), cheap (no full read) and the same on every rank and machine (no absolute paths).

    Read by :func:`recipes.core.contracts.states.source_of` when a loader saves or loads a state. Without it
    a dataset is named by its type and size only, so a state of other data of that size is not refused.
    """

    def state_source(self) -> str: ...


@runtime_checkable
class ReadsPaths(Protocol):
    """``read_paths() -> list``: the files or URLs a stream reads.

    Read by :class:`recipes.core.loading.mixing.MixedStream`, which gathers its sources' paths for their
    retry counts. Without it a stream's retries are not counted in the mixture's.
    """

    def read_paths(self) -> list[Any]: ...


@runtime_checkable
class ChecksStates(Protocol):
    """What a stream offers a loader state before it is loaded. Called by
    :class:`recipes.core.loading.loader.ResumableLoader` and :class:`recipes.core.loading.mixing.MixedStream`.

    ``check_state(state)`` refuses a worker's state with a ValueError without changing the stream
    (:mod:`recipes.core.loading.loader_states`); ``adopt_seed(state)`` takes a checked state's seed in the main
    process, before the workers get copies; ``detached()`` is a copy whose loaded state leaves the
    stream as it is (a mixture checks its sources on such copies). :class:`recipes.core.sources.streams.ResumableStream`
    has all three. Without them a damaged state is found only where a worker loads it, and a seed
    given to the loader is not replaced by the state's.
    """

    def check_state(self, state: dict[str, Any]) -> Any: ...

    def adopt_seed(self, state: dict[str, Any]) -> None: ...

    def detached(self) -> Any: ...


@runtime_checkable
class DecodesOnDevice(Protocol):
    """``decode_on(device) -> Tensor``: a field of a raw batch that still holds encoded data, and
    what it decodes to on ``device`` (a domain's ``decode="device"`` batch: clips to decode there).

    Called by :class:`recipes.core.device.DevicePrefetcher` on every such leaf of a batch before it
    moves and normalises the batch. Not a dataset's hook (a batch's). Without it the prefetcher
    hands the field on as it came, still encoded.
    """

    def decode_on(self, device: Any) -> Any: ...


HOOKS = (Described, Mixable, DrawsEpochs, NeedsPersistentWorkers, ShardLimited,
         RankPlaced, Resumable, NamesItsData, ReadsPaths, ChecksStates)


# The hooks one part of the library reads from another's objects: a preset from a dataset, the device
# path from a transform. check_hooks leaves them alone: a pad id may be asked for only where padding needs it.


@runtime_checkable
class PadsIds(Protocol):
    """``pad_id``: the id a dataset's token ids are padded with (None where nothing names one).

    Read by the presets whose items hold ids (``text_loader``, ``streaming_loader``,
    ``multimodal_loader``, ``audio_loader``) through :func:`dataset_pad_id`, to build their usual
    collate. A dataset that knows no pad id may raise a ValueError saying what to pass
    (``TokenizedTextDataset`` does). Without it the preset pads with its default, or asks for one.
    """

    pad_id: int | None


@runtime_checkable
class KnowsAspectRatios(Protocol):
    """``aspect_ratios``: every sample's image width / height, one float a sample, known without
    decoding (``CocoDataset`` reads them from the annotations).

    Read by ``detection_loader``, which groups training batches by them. Without it the preset
    needs ``groups=`` (one int a sample) or ``train=False``.
    """

    aspect_ratios: Sequence[float]


@runtime_checkable
class SetsDraftSize(Protocol):
    """``draft_size``: the smallest ``(width, height)`` a transform lets a JPEG be decoded at (or None),
    set by ``train_transform`` and ``eval_transform``.

    Read by ``ImageFolderDataset(draft_size="auto")``. Without it every JPEG is decoded at full size.
    """

    draft_size: tuple[int, int] | None


@runtime_checkable
class DrawsCropBoxes(Protocol):
    """``draw_box(height, width) -> {"top", "left", "height", "width"}``: the box a random resized
    crop draws for an image of that size, from torch's generator as the transform itself draws it.

    Called by :class:`recipes.core.pixels.device_decode.ImagePlan` (``decode="device"``), so the device crops
    the box the worker path would. Without it ``decode="device"`` refuses the crop: use ``"worker"``.
    """

    def draw_box(self, height: int, width: int) -> dict[str, int]: ...


LIBRARY_HOOKS = (PadsIds, KnowsAspectRatios, SetsDraftSize, DrawsCropBoxes)


def _shapes() -> dict[str, tuple[type, list[str] | None]]:
    """Each hook's name -> its protocol and, for a method, the parameters after ``self`` (None: an attribute)."""
    shapes: dict[str, tuple[type, list[str] | None]] = {}
    for protocol in HOOKS:
        for name, value in vars(protocol).items():
            if inspect.isfunction(value) and not name.startswith("_"):
                shapes[name] = (protocol, list(inspect.signature(value).parameters)[1:])
        for name in vars(protocol).get("__annotations__", {}):
            shapes[name] = (protocol, None)
    return shapes


SHAPES = _shapes()


def check_hooks(dataset: Any) -> Any:
    """``dataset`` itself, once each hook it declares has the shape its protocol gives.

    Raises:
        TypeError: a method hook that is not callable or does not take the arguments the
            protocol gives, ``needs_persistent_workers`` that is not a string, ``rank`` or
            ``world_size`` that is not an int, a contract's ``"per_sample"`` that is not a tuple of
            the dataset's attribute names; the message names the hook.
    """
    owner = type(dataset).__name__
    for name, (protocol, parameters) in SHAPES.items():
        value = getattr(dataset, name, None)  # name: a hook of SHAPES
        if value is None:
            continue
        if parameters is not None:
            _check_method(f"{owner}.{name}", protocol, f"{name}({', '.join(parameters)})", value, len(parameters))
        elif name == "needs_persistent_workers" and not isinstance(value, str):
            raise TypeError(f"{owner}.{name} must be a string saying why ({protocol.__name__}), got {value!r}")
        elif protocol is RankPlaced and (isinstance(value, bool) or not isinstance(value, numbers.Integral)):
            raise TypeError(f"{owner}.{name} must be an int ({protocol.__name__}), got {value!r}")
    per_sample_fields(dataset)  # the contract's arrays, a TypeError naming a wrong one
    return dataset


def contract_of(dataset: Any) -> dict[str, Any]:
    """``dataset.batch_contract()`` (of the dataset under its ``Subset``; :class:`Mixable`), ``{}`` where it has none."""
    while isinstance(dataset, Subset):
        dataset = dataset.dataset
    return dataset.batch_contract() if isinstance(dataset, Mixable) else {}


def collate_of(dataset: Any) -> Callable[[list[Any]], Any] | None:
    """The collate ``dataset`` (or the dataset under its ``Subset``) asks for: its contract's
    ``"collate"`` where that is a collate, not a name (:class:`Mixable`); None where it asks for
    none. Its hooks are the caller's to check first (:func:`check_hooks`; ``build_loader`` and the
    mixtures do)."""
    asked = contract_of(dataset).get("collate")
    return asked if callable(asked) else None


def per_sample_fields(dataset: Any) -> tuple[str, ...]:
    """The names of ``dataset``'s arrays with one entry per sample (its contract's ``"per_sample"``;
    :class:`Mixable`), none where it names none, or for a ``Subset`` (whose arrays are not the dataset's).

    Raises:
        TypeError: ``"per_sample"`` is not a tuple of the dataset's attribute names.
    """
    if isinstance(dataset, Subset):
        return ()
    fields = contract_of(dataset).get("per_sample", ())
    owner = type(dataset).__name__
    if isinstance(fields, str) or not isinstance(fields, Sequence) or not all(isinstance(f, str) for f in fields):
        raise TypeError(f"{owner}.batch_contract()['per_sample'] must be a tuple of attribute names, got {fields!r}")
    missing = [name for name in fields if not hasattr(dataset, name)]
    if missing:
        raise TypeError(f"{owner}.batch_contract()['per_sample'] names {missing}, which {owner} does not have")
    return tuple(fields)


@dataclass(frozen=True)
class UsualCollate:
    """A preset's own collate, built for the dataset only where it is used: where the caller passes
    no ``collate_fn`` and the dataset asks for none (:func:`collate_of`), ``make(dataset)``
    (``TextCollate`` with the dataset's pad id). :func:`chosen_collate` builds it."""

    make: Callable[[Any], Callable[[list[Any]], Any]]

    @classmethod
    def of(cls, collate_fn: Callable[[list[Any]], Any]) -> UsualCollate:
        """A usual collate that does not depend on the dataset (``image_collate``)."""
        return cls(functools.partial(_same, collate_fn))


def _same(collate_fn: Callable[[list[Any]], Any], dataset: Any) -> Callable[[list[Any]], Any]:
    return collate_fn


def chosen_collate(dataset: Any, collate_fn: Callable[[list[Any]], Any] | UsualCollate | None) -> Callable[[list[Any]], Any]:
    """The collate a loader batches ``dataset`` with: ``collate_fn`` as given; for None or a
    :class:`UsualCollate`, the one the dataset asks for (:func:`collate_of`), else the usual one
    built for it (for None, torch's ``default_collate``). The caller checks the hooks first."""
    if collate_fn is not None and not isinstance(collate_fn, UsualCollate):
        return collate_fn
    asked = collate_of(dataset)
    if asked is not None:
        return asked
    return default_collate if collate_fn is None else collate_fn.make(dataset)


def dataset_pad_id(dataset: Any, default: int | None = None) -> int | None:
    """The ``pad_id`` of ``dataset`` (or of the dataset under its ``Subset``; :class:`PadsIds`),
    ``default`` where it has none or it is None; the dataset's own ValueError where it must name one."""
    while isinstance(dataset, Subset):
        dataset = dataset.dataset
    found = dataset.pad_id if isinstance(dataset, PadsIds) else None
    return default if found is None else found


def _check_method(where: str, protocol: type, shape: str, value: Any, arguments: int) -> None:
    if not callable(value):
        raise TypeError(f"{where} must be a method {shape} ({protocol.__name__}), got {type(value).__name__}")
    try:
        signature = inspect.signature(value)
    except (TypeError, ValueError):  # a builtin without a signature: nothing to check
        return
    try:
        signature.bind(*[None] * arguments)
    except TypeError:
        raise TypeError(
            f"{where}{signature} does not take the arguments the core passes: define it as {shape} "
            f"(recipes.core.contracts.protocols.{protocol.__name__})"
        ) from None
