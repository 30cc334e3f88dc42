"""What a stream of shards is made of: tar shards and their samples, shard indexes and epochs,
block shuffles, the point an epoch's pass starts at, a stream's order or its default, a stream's
items in batches of one group each, and a dataset written once as shards (``prepare``).

``from recipes.core import streams``, then ``streams.expand_shards(...)``: one name of the facade for these, each
documented on the reference page and loaded on first use.
"""

# ruff: noqa: F401  (the TYPE_CHECKING block below imports each name for static readers)
from __future__ import annotations

from typing import TYPE_CHECKING

from recipes.core.contracts.lazy import lazy_names

# public name -> the module of recipes.core that defines it
HOMES = {
    "expand_shards": "sources.tar_samples",
    "is_shards": "sources.tar_samples",
    "read_samples": "sources.tar_samples",
    "split_key": "sources.tar_samples",
    "ShardEpochs": "sources.shard_index",
    "ShardIndex": "sources.shard_index",
    "ShardStream": "sources.shard_index",
    "listed_shards": "sources.shard_index",
    "block_shuffler": "sources.streams",
    "shuffled_blocks": "sources.streams",
    "turning_point": "sources.streams",
    "order_or_default": "sampling.stream_order",
    "GroupedBatches": "sampling.grouped_stream",
    "PrepareRun": "sources.prepared_shards",
    "FileShards": "sources.shard_writers",
    "ParquetShards": "sources.shard_writers",
    "TarShards": "sources.shard_writers",
    "PrepareSummary": "sources.prepared_shards",
    "local_folder": "sources.prepared_shards",
    "add_member": "sources.shard_writers",
    "manifest_problems": "sources.prepared_shards",
    "write_prepared": "sources.prepared_shards",
    "collect_skips": "contracts.errors",
}
__all__ = sorted(HOMES)
__getattr__, __dir__ = lazy_names(__name__, HOMES)

if TYPE_CHECKING:  # where each name lives, for static readers
    from recipes.core.contracts.errors import collect_skips
    from recipes.core.sampling.grouped_stream import GroupedBatches
    from recipes.core.sampling.stream_order import order_or_default
    from recipes.core.sources.prepared_shards import (
        PrepareRun,
        PrepareSummary,
        local_folder,
        manifest_problems,
        write_prepared,
    )
    from recipes.core.sources.shard_index import ShardEpochs, ShardIndex, ShardStream, listed_shards
    from recipes.core.sources.shard_writers import FileShards, ParquetShards, TarShards, add_member
    from recipes.core.sources.streams import block_shuffler, shuffled_blocks, turning_point
    from recipes.core.sources.tar_samples import expand_shards, is_shards, read_samples, split_key
