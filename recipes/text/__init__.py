"""Text recipes: tokenised datasets, padding and packing collates, length-grouped and streaming loaders.

- ``tokenized``: :class:`TokenizedTextDataset` and :func:`text_loader`; ``collates``: :func:`text_collate`
  (padding) and :func:`pack_collate` (packing), for every text dataset.
- ``streaming``: :class:`StreamingTextDataset`, :func:`stream_collate` and
  :func:`streaming_loader`, for files too large to tokenise up front.
- ``instructions``: :class:`InstructionDataset` (chats and prompt/completion pairs, loss on the
  answers only) and :func:`instruction_collate`; ``chat_template`` renders a model's chat template
  (:class:`ChatTemplate`) as transformers does, metered by ``template_sandbox`` within a
  :class:`RenderBudget` per row (``template_budget``).
- ``ray_tokenize``: :class:`TokenizeBatch` and :class:`TokenizeInstructions`, the batch functions that
  tokenise a corpus (instruction rows with their labels) on Ray Data; ``prepare_ids``: :func:`prepare`,
  a corpus tokenised once into Parquet shards of ids, on one machine.
- What only text uses: ``corpus_files`` (.txt/.jsonl/.csv rows), ``parquet_corpus`` (Parquet
  text columns by row group), ``token_cache`` (tokens on disk, memory-mapped back),
  ``token_source`` (the tokenizer or stored ids both datasets read, checked once) and
  ``stream_rows`` (what a stream's readers make of their share).

The folder imports only ``recipes.core`` (tokens, arrays, storage, the sampler and its plans,
streams), so it can be copied into a project that has ``recipes`` installed.
"""

from recipes.text.chat.chat_template import ChatTemplate
from recipes.text.collates import TextCollate, pack_collate, text_collate
from recipes.text.chat.instructions import InstructionCollate, InstructionDataset, instruction_collate
from recipes.text.prepare_ids import prepare
from recipes.text.ray_tokenize import TokenizeBatch, TokenizeInstructions
from recipes.text.streaming import StreamCollate, StreamingTextDataset, stream_collate, streaming_loader
from recipes.text.chat.template_budget import RenderBudget
from recipes.text.tokenized import TokenizedTextDataset, text_loader

__all__ = [
    "ChatTemplate",
    "InstructionCollate",
    "InstructionDataset",
    "RenderBudget",
    "StreamCollate",
    "StreamingTextDataset",
    "TextCollate",
    "TokenizeBatch",
    "TokenizeInstructions",
    "TokenizedTextDataset",
    "instruction_collate",
    "pack_collate",
    "prepare",
    "stream_collate",
    "streaming_loader",
    "text_collate",
    "text_loader",
]
