"""What the domains share; it imports no domain and names none. Its names are this package's face:
``from recipes.core import build_loader`` whatever room defines it. The rooms, each importing only
the rooms listed before it:

- ``contracts``: what every room reads: the hooks a dataset offers (``protocols``), the bad-input
  policy (``errors``), checked states and parameters, ``ReadOptions``, per-sample tables, collate
  helpers, ``FixedPoint`` (integer samples a batch ships, made float on the device).
- ``workers``: what runs in and around loader workers: the stall ``watchdog``, errors that keep their
  context, workers that end with their parent, batches packed in one buffer a dtype.
- ``sampling``: seeds, shuffles, epoch plans and draws, the batch sampler, ranks, ``StreamOrder``.
- ``sources``: where samples come from: local paths and fsspec URLs (secrets never shown, retries,
  deadlines), caches, Parquet, tar archives, class folders, self-sharding streams and shard indexes.
- ``pixels``: images: bomb-safe decoding to uint8 CHW RGB, headers, ``decode="device"``'s two sides.
- ``tokens``: tokenizers and encoding, truncation that keeps special tokens, padding ids into batches.
- ``loading``: the loaders themselves: presets and their one composition (``loader``), states,
  mixtures, ``DevicePrefetcher``, trainers' launchers and ``tune_loader``.

The facade is small: what a recipe or a dataset of yours uses most (loaders, plans, seeds, errors,
mixtures, ``read_image``), and ten namespaces, one name each, for the rest (``from recipes.core
import storage``, then ``storage.read_bytes(url)``). Every name, a namespace's too, is loaded on first
use, so a domain that needs no tokenizer, Parquet or object storage never imports them. A domain's
own parsers, indexes and caches live in its folder, not here.
"""

# ruff: noqa: F401  (the TYPE_CHECKING block below imports each name for static readers)
from __future__ import annotations

from typing import TYPE_CHECKING

from recipes.core.contracts.lazy import lazy_names

# public name -> the module of recipes.core that defines it
HOMES = {
    "IMAGENET_MEAN": "loading.device",
    "IMAGENET_STD": "loading.device",
    "DevicePrefetcher": "loading.device",
    "FixedPoint": "contracts.fixed_point",
    "fixed_to_float": "contracts.fixed_point",
    "normalize_images": "loading.device",
    "to_device": "loading.device",
    "DataError": "contracts.errors",
    "UserCode": "contracts.errors",
    "SampleError": "contracts.errors",
    "SkippedSampleWarning": "contracts.errors",
    "check_on_error": "contracts.errors",
    "drop_skipped": "contracts.errors",
    "skip_or_raise": "contracts.errors",
    "decode_image": "pixels.images",
    "read_image": "pixels.images",
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
    "GroupedBatchSampler": "sampling.samplers",
    "SeededBatchSampler": "sampling.samplers",
    "Plan": "sampling.plans",
    "Shuffle": "sampling.plans",
    "ByGroup": "sampling.plans",
    "ByLength": "sampling.plans",
    "TokenBudget": "sampling.plans",
    "draws_of": "sampling.plans",
    "ReadOptions": "contracts.read_options",
    "StreamOrder": "sampling.stream_order",
    "SeededDataset": "sampling.seeding",
    "sample_seeds": "sampling.seeding",
    "seeded": "sampling.seeding",
    "Trial": "loading.tuning",
    "tune_loader": "loading.tuning",
    "describe_sample": "contracts.errors",
    "ResumableStream": "sources.streams",
    "ClassFolderDataset": "sources.class_folders",
    "SkippedRows": "contracts.errors",
    "sample_seed": "sampling.seeding",
}
# the namespaces: modules of recipes.core, each a name of the facade (their own HOMES say what they hold)
NAMESPACES = (
    "arrays",
    "caches",
    "checks",
    "hooks",
    "imaging",
    "parquet",
    "ranks",
    "storage",
    "streams",
    "tokenizing",
)
# a new public name is listed in HOMES (or a namespace's), and imported below for static readers
__all__ = sorted([*HOMES, *NAMESPACES])
__getattr__, __dir__ = lazy_names(__name__, HOMES, modules=NAMESPACES)

if TYPE_CHECKING:  # where each name lives, for static readers: type checkers, IDEs, the API pages
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
    from recipes.core.contracts.read_options import ReadOptions
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
    from recipes.core.pixels.images import decode_image, read_image
    from recipes.core.sampling.plans import ByGroup, ByLength, Plan, Shuffle, TokenBudget, draws_of
    from recipes.core.sampling.samplers import GroupedBatchSampler, SeededBatchSampler
    from recipes.core.sampling.seeding import SeededDataset, sample_seed, sample_seeds, seeded
    from recipes.core.sampling.stream_order import StreamOrder
    from recipes.core.sources.class_folders import ClassFolderDataset
    from recipes.core.sources.streams import ResumableStream
    from recipes.core.workers.watchdog import LoaderStallWarning, LoaderTimeoutError

