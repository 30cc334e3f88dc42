"""Image-caption pairs: a manifest dataset, dict batches for CLIP-style models, and tar shards.

    from recipes.multimodal import ImageTextDataset, multimodal_loader, CLIP_MEAN, CLIP_STD

- ``pairs``: :class:`ImageTextDataset`, :func:`multimodal_collate`, :func:`multimodal_loader`.
- ``shards``: :class:`ImageTextShards` (WebDataset tar shards, rank x worker split) and
  :func:`expand_shards` (shard lists, globs, ``{000..099}`` ranges).
- ``shard_writer``: :func:`write_shards` (manifest -> shards; also a command line).
- ``prepare_shards``: :func:`prepare` (a training-ready copy: images re-encoded once at a bounded
  size beside their captions, in those shards, with a manifest; ``recipes prepare multimodal``).
- What only multimodal uses: ``caption_files`` (caption manifests, COCO captions),
  ``parquet_captions`` (Parquet captions and embedded images), ``tar_shards`` (the WebDataset
  sample layout the reader and the writer share).

Besides ``recipes.core`` it uses ``recipes.text``'s corpus rules; the layout allows it
``recipes.vision`` and ``recipes.text``, whose composition it is, and no other domain.
"""

from recipes.multimodal.pairs import (
    CLIP_MEAN,
    CLIP_STD,
    ImageTextDataset,
    MultimodalCollate,
    multimodal_collate,
    multimodal_loader,
)
from recipes.multimodal.prepare_shards import prepare
from recipes.multimodal.shard_writer import write_shards
from recipes.multimodal.shards import ImageTextShards, expand_shards

__all__ = [
    "CLIP_MEAN",
    "CLIP_STD",
    "ImageTextDataset",
    "ImageTextShards",
    "MultimodalCollate",
    "expand_shards",
    "multimodal_collate",
    "multimodal_loader",
    "prepare",
    "write_shards",
]
