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

# ruff: noqa: F401  (the TYPE_CHECKING block below imports each name for static readers)
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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
    "BlobFile": "sources.blob_file",
    "BlobWriter": "sources.blob_file",
    "cached_blobs": "sources.blob_file",
    "DiskCache": "sources.disk_cache",
    "file_crc32": "sources.disk_cache",
    "locked_file": "sources.disk_cache",
    "remove_if_abandoned": "sources.disk_cache",
    "rename_locked": "sources.disk_cache",
    "MAX_LINE_CHARS": "contracts.read_options",
    "MAX_ROW_GROUP_BYTES": "sources.parquet_files",
    "PARQUET_SUFFIX": "sources.parquet_files",
    "TablePart": "sources.parquet_files",
    "check_columns": "sources.parquet_files",
    "columns_of": "sources.parquet_files",
    "entry_name": "sources.parquet_files",
    "fingerprint": "sources.parquet_files",
    "is_arrow_dataset": "sources.parquet_files",
    "is_parquet": "sources.parquet_files",
    "iter_rows": "sources.parquet_files",
    "iter_tables": "sources.parquet_files",
    "parquet_entries": "sources.parquet_files",
    "parquet_file": "sources.parquet_files",
    "parquet_listing": "sources.parquet_files",
    "read_footers": "sources.parquet_files",
    "require_pyarrow": "sources.parquet_files",
    "row_counts": "sources.parquet_files",
    "batch_safe_tokenizer": "tokens.encoding",
    "require_pad_id": "tokens.encoding",
    "token_dtype": "tokens.encoding",
    "block_shuffler": "sources.streams",
    "shuffled_blocks": "sources.streams",
    "turning_point": "sources.streams",
    "check_int": "contracts.states",
    "check_truncation": "tokens.truncation",
    "cut_tokens": "tokens.truncation",
    "concat_strings": "contracts.arrays",
    "concat_tokens": "contracts.arrays",
    "filesystem": "sources.storage",
    "glob_sizes": "sources.storage",
    "has_glob": "sources.urls",
    "open_stream": "sources.storage",
    "parent": "sources.urls",
    "stream_sizes": "sources.storage",
    "suffix": "sources.urls",
    "open_image": "pixels.images",
    "read_file": "pixels.images",
    "pad_to_width": "tokens.padding",
    "sample_seed": "sampling.seeding",
    "split_key": "sources.tar_samples",
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
__all__ = sorted(HOMES)  # a new public name is listed in HOMES, and imported below for static readers

if TYPE_CHECKING:  # where each name lives, for static readers: type checkers, IDEs, the API pages
    from recipes.core.contracts.arrays import StringArray, TokenArray, concat_strings, concat_tokens
    from recipes.core.contracts.batching import extra_columns
    from recipes.core.contracts.errors import (
        DataError,
        SampleError,
        SkippedRows,
        SkippedSampleWarning,
        UserCode,
        check_on_error,
        describe_sample,
        drop_skipped,
        skip_or_raise,
    )
    from recipes.core.contracts.fixed_point import FixedPoint, fixed_to_float
    from recipes.core.contracts.parameters import check_count, check_positive
    from recipes.core.contracts.protocols import (
        ChecksStates,
        Described,
        DrawsCropBoxes,
        DrawsEpochs,
        KnowsAspectRatios,
        Mixable,
        NamesItsData,
        NeedsPersistentWorkers,
        PadsIds,
        RankPlaced,
        ReadsPaths,
        Resumable,
        SetsDraftSize,
        ShardLimited,
        UsualCollate,
        check_hooks,
        chosen_collate,
        collate_of,
        dataset_pad_id,
    )
    from recipes.core.contracts.read_options import MAX_LINE_CHARS, ReadOptions, read_options_or_default
    from recipes.core.contracts.states import check_int, sampled_digest
    from recipes.core.loading.device import DevicePrefetcher, IMAGENET_MEAN, IMAGENET_STD, normalize_images, to_device
    from recipes.core.loading.loader import (
        RecipeLoader,
        ResumableLoader,
        build_loader,
        loader_kwargs,
        preset_kwargs,
        resolve_device,
        stream_loader,
        usable_cpus,
    )
    from recipes.core.loading.mixing import MixedDataset, MixedStream
    from recipes.core.loading.tuning import Trial, tune_loader
    from recipes.core.pixels.device_decode import (
        DeviceView,
        EncodedBatch,
        ImagePlan,
        encode_image,
        pack_images,
        with_decode,
    )
    from recipes.core.pixels.images import MAX_PIXELS, decode_image, image_size, open_image, read_file, read_image
    from recipes.core.sampling.distributed import distributed_rank_and_size, resolve_rank, shared_result, shared_seed
    from recipes.core.sampling.plans import ByGroup, ByLength, Plan, Shuffle, TokenBudget, draws_of
    from recipes.core.sampling.samplers import GroupedBatchSampler, SeededBatchSampler
    from recipes.core.sampling.seeding import SeededDataset, sample_seed, sample_seeds, seeded
    from recipes.core.sampling.stream_order import StreamOrder, order_or_default
    from recipes.core.sources.blob_file import BlobFile, BlobWriter, cached_blobs
    from recipes.core.sources.class_folders import class_folder_files
    from recipes.core.sources.disk_cache import DiskCache, file_crc32, locked_file, remove_if_abandoned, rename_locked
    from recipes.core.sources.index_cache import cached_index, file_identities, load_index, save_index
    from recipes.core.sources.parquet_files import (
        MAX_ROW_GROUP_BYTES,
        PARQUET_SUFFIX,
        TablePart,
        check_columns,
        columns_of,
        entry_name,
        fingerprint,
        is_arrow_dataset,
        is_parquet,
        iter_rows,
        iter_tables,
        parquet_entries,
        parquet_file,
        parquet_listing,
        read_footers,
        require_pyarrow,
        row_counts,
    )
    from recipes.core.sources.paths import UnderRoot, cache_folder, check_relative, resolve_under
    from recipes.core.sources.shard_index import ShardEpochs, ShardIndex
    from recipes.core.sources.storage import filesystem, glob_sizes, open_stream, read_bytes, stream_sizes
    from recipes.core.sources.streams import ResumableStream, block_shuffler, shuffled_blocks, turning_point
    from recipes.core.sources.tar_samples import expand_shards, read_samples, split_key
    from recipes.core.sources.urls import basename, has_glob, is_url, parent, shown, suffix
    from recipes.core.tokens.encoding import (
        TruncatingEncoder,
        batch_safe_tokenizer,
        encode_texts,
        find_pad_id,
        load_tokenizer,
        pad_id_of,
        require_pad_id,
        token_dtype,
    )
    from recipes.core.tokens.padding import pad_batch, pad_to_width
    from recipes.core.tokens.truncation import check_truncation, cut_tokens
    from recipes.core.workers.watchdog import LoaderStallWarning, LoaderTimeoutError


def __getattr__(name: str) -> Any:
    """Import the module that defines ``name`` on first use (PEP 562)."""
    if name not in HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{HOMES[name]}"), name)  # vendored copies too
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *HOMES})
