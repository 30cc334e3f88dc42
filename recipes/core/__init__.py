"""What the domains share; it imports no domain and names none. Its names are this package's face:
``from recipes.core import build_loader`` whatever room defines it. The rooms, each importing only
the rooms listed before it:

- ``contracts``: what every room reads: the hooks a dataset offers (``protocols``), the bad-input
  policy (``errors``), checked states and parameters, ``ReadOptions``, per-sample tables, collate
  helpers, ``FixedPoint`` (integer samples a batch ships, made float on the device).
- ``workers``: what runs in and around loader workers: the stall ``watchdog``, errors that keep their
  context, workers that end with their parent, batches packed in one buffer a dtype.
- ``sampling``: which sample, when and on which rank: seeds, shuffles, epoch plans and draws, the
  batch sampler, ranks and ``StreamOrder``.
- ``sources``: where samples come from: local paths and fsspec URLs (secrets never shown, retries,
  deadlines), caches, Parquet, tar archives, class folders, self-sharding streams and shard indexes.
- ``pixels``: images: bomb-safe decoding to uint8 CHW RGB, headers, ``decode="device"``'s two sides.
- ``tokens``: tokenizers and encoding, truncation that keeps special tokens, padding ids into batches.
- ``loading``: the loaders themselves: presets and their one composition (``loader``), states,
  mixtures, ``DevicePrefetcher``, trainers' launchers and ``tune_loader``.

Names are loaded on first use (``from recipes.core import MixedDataset`` imports its module then), so
a domain that needs no tokenizer, Parquet or object storage never imports them. A domain's own
parsers, indexes and caches live in its folder, not here.
"""

from __future__ import annotations

import importlib
from typing import Any

# public name -> the module of recipes.core that defines it
HOMES = {
    "IMAGENET_MEAN": "loading.device",
    "IMAGENET_STD": "loading.device",
    "DevicePrefetcher": "loading.device",
    "FixedPoint": "contracts.fixed_point",
    "fixed_to_float": "contracts.fixed_point",
    "normalize_images": "loading.device",
    "to_device": "loading.device",
    "StringArray": "contracts.arrays",
    "sampled_digest": "contracts.states",
    "TokenArray": "contracts.arrays",
    "distributed_rank_and_size": "sampling.distributed",
    "resolve_rank": "sampling.distributed",
    "shared_seed": "sampling.distributed",
    "DataError": "contracts.errors",
    "UserCode": "contracts.errors",
    "SampleError": "contracts.errors",
    "SkippedSampleWarning": "contracts.errors",
    "check_on_error": "contracts.errors",
    "drop_skipped": "contracts.errors",
    "skip_or_raise": "contracts.errors",
    "MAX_PIXELS": "pixels.images",
    "decode_image": "pixels.images",
    "image_size": "pixels.images",
    "read_image": "pixels.images",
    "EncodedBatch": "pixels.device_decode",
    "ImagePlan": "pixels.device_decode",
    "encode_image": "pixels.device_decode",
    "pack_images": "pixels.device_decode",
    "with_decode": "pixels.device_decode",
    "RecipeLoader": "loading.loader",
    "ResumableLoader": "loading.loader",
    "build_loader": "loading.loader",
    "loader_kwargs": "loading.loader",
    "preset_kwargs": "loading.loader",
    "stream_loader": "loading.loader",
    "resolve_device": "loading.loader",
    "usable_cpus": "loading.loader",
    "LoaderStallWarning": "workers.watchdog",
    "LoaderTimeoutError": "workers.watchdog",
    "MixedDataset": "loading.mixing",
    "MixedStream": "loading.mixing",
    "check_relative": "sources.paths",
    "class_folder_files": "sources.class_folders",
    "basename": "sources.urls",
    "is_url": "sources.urls",
    "read_bytes": "sources.storage",
    "shown": "sources.urls",
    "resolve_under": "sources.paths",
    "GroupedBatchSampler": "sampling.samplers",
    "SeededBatchSampler": "sampling.samplers",
    "Plan": "sampling.plans",
    "Shuffle": "sampling.plans",
    "ByGroup": "sampling.plans",
    "ByLength": "sampling.plans",
    "TokenBudget": "sampling.plans",
    "draws_of": "sampling.plans",
    "ReadOptions": "contracts.read_options",
    "read_options_or_default": "contracts.read_options",
    "StreamOrder": "sampling.stream_order",
    "SeededDataset": "sampling.seeding",
    "sample_seeds": "sampling.seeding",
    "seeded": "sampling.seeding",
    "encode_texts": "tokens.encoding",
    "load_tokenizer": "tokens.encoding",
    "pad_batch": "tokens.padding",
    "pad_id_of": "tokens.encoding",
    "Trial": "loading.tuning",
    "tune_loader": "loading.tuning",
    "Described": "contracts.protocols",
    "DeviceView": "pixels.device_decode",
    "describe_sample": "contracts.errors",
    "extra_columns": "contracts.batching",
    "cache_folder": "sources.paths",
    "cached_index": "sources.index_cache",
    "ResumableStream": "sources.streams",
    "ShardEpochs": "sources.shard_index",
    "ShardIndex": "sources.shard_index",
    "SkippedRows": "contracts.errors",
    "TruncatingEncoder": "tokens.encoding",
    "UnderRoot": "sources.paths",
    "check_count": "contracts.parameters",
    "check_positive": "contracts.parameters",
    "expand_shards": "sources.tar_samples",
    "file_identities": "sources.index_cache",
    "find_pad_id": "tokens.encoding",
    "load_index": "sources.index_cache",
    "order_or_default": "sampling.stream_order",
    "read_samples": "sources.tar_samples",
    "save_index": "sources.index_cache",
    "shared_result": "sampling.distributed",
    "DrawsEpochs": "contracts.protocols",
    "Mixable": "contracts.protocols",
    "NeedsPersistentWorkers": "contracts.protocols",
    "RankPlaced": "contracts.protocols",
    "Resumable": "contracts.protocols",
    "NamesItsData": "contracts.protocols",
    "ReadsPaths": "contracts.protocols",
    "ChecksStates": "contracts.protocols",
    "ShardLimited": "contracts.protocols",
    "PadsIds": "contracts.protocols",
    "KnowsAspectRatios": "contracts.protocols",
    "SetsDraftSize": "contracts.protocols",
    "DrawsCropBoxes": "contracts.protocols",
    "UsualCollate": "contracts.protocols",
    "check_hooks": "contracts.protocols",
    "chosen_collate": "contracts.protocols",
    "collate_of": "contracts.protocols",
    "dataset_pad_id": "contracts.protocols",
}
__all__ = sorted(HOMES)  # a new public name is listed once, in HOMES


def __getattr__(name: str) -> Any:
    """Import the module that defines ``name`` on first use (PEP 562)."""
    if name not in HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{HOMES[name]}"), name)  # vendored copies too
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *HOMES})
