"""Shared building blocks: each module is readable on its own and imports only this package.

- ``loader``: :func:`loader_kwargs` (the DataLoader preset) and :func:`build_loader`.
- ``device``: :func:`to_device`, :class:`DevicePrefetcher`, GPU-side image normalisation.
- ``distributed``: rank and world size, :func:`shared_seed` (one seed all ranks agree on).
- ``samplers``: :class:`GroupedBatchSampler` (grouped, resumable, rank-aware batches).
- ``seeding``: per-sample seeds from ``(seed, epoch, index)`` and :class:`SeededDataset`.
- ``batching``, ``nested``, ``packing``: :func:`stack_images`; one walk over nested batches
  (``map_tensors``); many small tensors sent from a worker as one shared buffer per dtype.
- ``images``: :func:`read_image` / :func:`decode_image` -> uint8 CHW RGB, bomb-safe; ``image_headers``: sizes
  and orientation from the header bytes, without PIL.
- ``tokens``, ``token_cache``: :func:`load_tokenizer`, :func:`encode_texts`, :func:`pad_batch`; tokens on disk.
- ``arrays``: :class:`StringArray`, :class:`TokenArray`: per-sample tables workers share, not copy.
- ``tuning``: :func:`tune_loader` measures DataLoader settings on your data (``recipes bench``).
- ``errors``, ``paths``: the error policy (bad data, and errors of user code named by sample), safe paths.
- ``corpus_files``, ``caption_files``, ``coco_files``: readers for .txt/.jsonl/.csv corpora, caption
  manifests and COCO instances files; ``coco_index``: a checked COCO index of flat arrays;
  ``tar_shards``: the WebDataset sample layout.
- ``parquet_files``, ``parquet_corpus``, ``parquet_captions``, ``blob_file``: Parquet sources (files,
  globs, URLs, a Hugging Face Dataset) read by row group into numpy indexes; embedded images in
  one memory-mapped file.
- ``streams``: reader slots, a shuffle buffer and equal steps for self-sharding IterableDatasets.
- ``mixing``: :class:`MixedDataset` and :class:`MixedStream`, datasets mixed at chosen weights.
"""

from recipes.core.arrays import StringArray, TokenArray
from recipes.core.device import IMAGENET_MEAN, IMAGENET_STD, DevicePrefetcher, normalize_images, to_device
from recipes.core.distributed import distributed_rank_and_size, resolve_rank, shared_seed
from recipes.core.errors import (
    DataError,
    SampleError,
    SkippedSampleWarning,
    check_on_error,
    drop_skipped,
    skip_or_raise,
)
from recipes.core.images import MAX_PIXELS, decode_image, image_size, read_image
from recipes.core.loader import ResumableLoader, build_loader, loader_kwargs, resolve_device, usable_cpus
from recipes.core.mixing import MixedDataset, MixedStream
from recipes.core.paths import check_relative, resolve_under
from recipes.core.samplers import GroupedBatchSampler
from recipes.core.seeding import SeededDataset, sample_seeds, seeded
from recipes.core.tokens import encode_texts, load_tokenizer, pad_batch, pad_id_of
from recipes.core.tuning import Trial, tune_loader

__all__ = [
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "MAX_PIXELS",
    "DataError",
    "DevicePrefetcher",
    "GroupedBatchSampler",
    "MixedDataset",
    "MixedStream",
    "ResumableLoader",
    "SampleError",
    "SeededDataset",
    "SkippedSampleWarning",
    "StringArray",
    "TokenArray",
    "Trial",
    "build_loader",
    "check_on_error",
    "check_relative",
    "decode_image",
    "distributed_rank_and_size",
    "drop_skipped",
    "encode_texts",
    "image_size",
    "load_tokenizer",
    "loader_kwargs",
    "normalize_images",
    "pad_batch",
    "pad_id_of",
    "read_image",
    "resolve_device",
    "resolve_rank",
    "resolve_under",
    "sample_seeds",
    "seeded",
    "shared_seed",
    "skip_or_raise",
    "to_device",
    "tune_loader",
    "usable_cpus",
]
