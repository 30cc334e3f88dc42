"""Text recipes: tokenised datasets, padding and packing collates, length-grouped and streaming loaders.

- ``tokenized``: :class:`TokenizedTextDataset`, :func:`text_collate`, :func:`pack_collate`,
  :func:`text_loader`.
- ``streaming``: :class:`StreamingTextDataset`, :func:`stream_collate` and
  :func:`streaming_loader`, for files too large to tokenise up front.
"""

from recipes.text.streaming import StreamingTextDataset, stream_collate, streaming_loader
from recipes.text.tokenized import TokenizedTextDataset, pack_collate, text_collate, text_loader

__all__ = [
    "StreamingTextDataset",
    "TokenizedTextDataset",
    "pack_collate",
    "stream_collate",
    "streaming_loader",
    "text_collate",
    "text_loader",
]
