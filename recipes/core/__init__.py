"""What the domains share; it imports no domain and names none. Each module reads alone.

- Loading: ``loader`` (:func:`loader_kwargs`, :func:`preset_kwargs`, :class:`ResumableLoader`),
  ``samplers`` (:class:`GroupedBatchSampler`: epochs, ranks, resume), ``plans`` (how batches
  form: :class:`ByGroup`, :class:`ByLength`, :class:`TokenBudget`), ``seeding`` (per-sample
  seeds, :class:`SeededDataset`), ``streams`` (self-sharding IterableDatasets), ``mixing``
  (:class:`MixedDataset`, :class:`MixedStream`), ``states`` and ``loader_states`` (what a saved
  state belongs to, every field checked at load), ``orphans`` (workers end with their parent), ``watchdog``
  (a stall names its samples), ``parameters`` (checked when built), ``distributed``, ``tuning`` (``recipes bench``).
- Hooks: ``protocols``, what the core reads from a dataset (:class:`Described`, :class:`Mixable`,
  :class:`DrawsEpochs`, ...), each a ``typing.Protocol``, and :func:`check_hooks`.
- Batches: ``batching``, ``nested``, ``packing`` (worker batches in one buffer per dtype),
  ``device`` (:class:`DevicePrefetcher`), ``fixed_point`` (integer samples made float there),
  ``device_decode`` and ``device_augment`` (``decode="device"``).
- Data: ``images`` and ``image_headers`` (bomb-safe decoding to uint8 CHW RGB), ``tokens``
  (tokenizers, encoding), ``padding`` (ids into batches), ``truncation`` (cuts keeping special tokens), ``arrays``
  (per-sample tables workers share), ``class_folders`` (ImageFolder's walk), ``storage``, ``urls`` and
  ``retries`` (local paths and fsspec URLs, secrets never shown, retries logged), ``timeouts`` (a silent
  server is an error), ``disk_cache``, ``tar_stream``, ``parquet_files`` and ``blob_file`` (reading),
  ``errors`` and ``paths`` (the bad-input policy, safe paths), ``read_options`` and ``stream_order``.

Names are loaded on first use (``from recipes.core import MixedDataset`` imports ``mixing``
then), so a domain that needs no tokenizer, Parquet or object storage never imports them.
A domain's own parsers, indexes and caches live in its folder, not here.
"""

from __future__ import annotations

import importlib
from typing import Any

# public name -> the module of recipes.core that defines it
_HOMES = {
    "IMAGENET_MEAN": "device",
    "IMAGENET_STD": "device",
    "DevicePrefetcher": "device",
    "FixedPoint": "fixed_point",
    "fixed_to_float": "fixed_point",
    "normalize_images": "device",
    "to_device": "device",
    "StringArray": "arrays",
    "TokenArray": "arrays",
    "distributed_rank_and_size": "distributed",
    "resolve_rank": "distributed",
    "shared_seed": "distributed",
    "DataError": "errors",
    "SampleError": "errors",
    "SkippedSampleWarning": "errors",
    "check_on_error": "errors",
    "drop_skipped": "errors",
    "skip_or_raise": "errors",
    "MAX_PIXELS": "images",
    "decode_image": "images",
    "image_size": "images",
    "read_image": "images",
    "RecipeLoader": "loader",
    "ResumableLoader": "loader",
    "build_loader": "loader",
    "loader_kwargs": "loader",
    "preset_kwargs": "loader",
    "stream_loader": "loader",
    "resolve_device": "loader",
    "usable_cpus": "loader",
    "LoaderStallWarning": "watchdog",
    "LoaderTimeoutError": "watchdog",
    "MixedDataset": "mixing",
    "MixedStream": "mixing",
    "check_relative": "paths",
    "resolve_under": "paths",
    "GroupedBatchSampler": "samplers",
    "SeededBatchSampler": "samplers",
    "Plan": "plans",
    "Shuffle": "plans",
    "ByGroup": "plans",
    "ByLength": "plans",
    "TokenBudget": "plans",
    "draws_of": "plans",
    "ReadOptions": "read_options",
    "StreamOrder": "stream_order",
    "SeededDataset": "seeding",
    "sample_seeds": "seeding",
    "seeded": "seeding",
    "encode_texts": "tokens",
    "load_tokenizer": "tokens",
    "pad_batch": "padding",
    "pad_id_of": "tokens",
    "Trial": "tuning",
    "tune_loader": "tuning",
    "DefaultCollate": "protocols",
    "Described": "protocols",
    "DeviceDecodable": "protocols",
    "DrawsEpochs": "protocols",
    "Mixable": "protocols",
    "NeedsPersistentWorkers": "protocols",
    "PerSampleFields": "protocols",
    "RankPlaced": "protocols",
    "Resumable": "protocols",
    "NamesItsData": "protocols",
    "ReadsPaths": "protocols",
    "ChecksStates": "protocols",
    "ShardLimited": "protocols",
    "PadsIds": "protocols",
    "KnowsAspectRatios": "protocols",
    "SetsDraftSize": "protocols",
    "DrawsCropBoxes": "protocols",
    "UsualCollate": "protocols",
    "check_hooks": "protocols",
    "chosen_collate": "protocols",
    "collate_of": "protocols",
    "dataset_pad_id": "protocols",
}
__all__ = sorted(_HOMES)  # a new public name is listed once, in _HOMES


def __getattr__(name: str) -> Any:
    """Import the module that defines ``name`` on first use (PEP 562)."""
    if name not in _HOMES:
        raise AttributeError(f"module 'recipes.core' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"recipes.core.{_HOMES[name]}"), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})
