"""Tokenizers, encoding and padding shared by the text and multimodal recipes.

    tokenizer = load_tokenizer("tokenizer.json")
    tokens = encode_texts(tokenizer, ["a cat", "a dog on a mat"], max_length=77)
    tokens[1]                        # np.ndarray of ids, a view into one flat array
    tokens.lengths                   # np.ndarray [N]
    ids, mask, lengths = pad_batch([torch.tensor([5, 6]), torch.tensor([7])], pad_id=0)

Encoded ids come back as a :class:`recipes.core.arrays.TokenArray`: one flat ``uint16`` array
(``uint32`` when the vocabulary has more than 65,536 entries) plus int64 offsets, which workers
share instead of copying (see that module).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from tokenizers import Tokenizer

from recipes.core.arrays import TokenArray
from recipes.core.storage import shown

PAD_TOKENS = ("[PAD]", "<pad>", "<|pad|>", "<PAD>", "[pad]")
ENCODE_CHUNK = 4096  # texts per encode_batch call: large enough for Rust's thread pool


def load_tokenizer(tokenizer: Tokenizer | str | os.PathLike) -> Tokenizer:
    """A ``tokenizers.Tokenizer`` as is, or one loaded from a ``tokenizer.json`` path."""
    if isinstance(tokenizer, Tokenizer):
        return tokenizer
    path = Path(tokenizer)
    if not path.is_file():  # a URL is not read either: the message shows it without credentials
        raise FileNotFoundError(f"tokenizer file {shown(tokenizer)} does not exist (expected a tokenizer.json)")
    return Tokenizer.from_file(str(path))


def pad_id_of(tokenizer: Tokenizer, pad_id: int | None = None) -> int:
    """The padding id: ``pad_id`` if given, else the tokenizer's padding config, else its pad token."""
    if pad_id is not None:
        return int(pad_id)
    if tokenizer.padding is not None:
        return int(tokenizer.padding["pad_id"])
    for token in PAD_TOKENS:
        token_id = tokenizer.token_to_id(token)
        if token_id is not None:
            return token_id
    raise ValueError(
        f"the tokenizer has no padding config and none of the pad tokens {PAD_TOKENS}; "
        "pass pad_id=... explicitly (any id works: padded positions are masked out)"
    )


def batch_safe_tokenizer(tokenizer: Tokenizer) -> Tokenizer:
    """``tokenizer``, or a copy of it, whose ``encode_batch`` gives what ``encode`` gives per text.

    Batch-longest padding is the one setting where they differ: it pads each text to the
    longest in its batch. Fixed-length padding and truncation apply per text, so they stay.
    """
    padding = tokenizer.padding
    if padding is None or padding.get("length") is not None:
        return tokenizer
    copy = Tokenizer.from_str(tokenizer.to_str())
    copy.no_padding()
    return copy


def token_dtype(tokenizer: Tokenizer) -> np.dtype:
    """``uint16`` when every id fits in 16 bits, else ``uint32``."""
    return np.dtype(np.uint16 if tokenizer.get_vocab_size(with_added_tokens=True) <= 2**16 else np.uint32)


def encode_texts(
    tokenizer: Tokenizer,
    texts: Sequence[str],
    *,
    max_length: int | None = None,
    progress: bool | None = None,
    description: str = "tokenizing",
) -> TokenArray:
    """Tokenise ``texts`` with ``encode_batch`` into a :class:`TokenArray`.

    Each sequence equals ``tokenizer.encode(text).ids[:max_length]``, special tokens included.
    ``progress`` shows a tqdm bar; None shows it only for more than 100k texts.
    """
    encoder = batch_safe_tokenizer(tokenizer)
    # encode_batch_fast (tokenizers >= 0.21) gives the same ids, faster: it skips the character
    # offsets we never store.
    encode = getattr(encoder, "encode_batch_fast", encoder.encode_batch)
    dtype = token_dtype(tokenizer)
    chunks, lengths = [], np.zeros(len(texts), dtype=np.int64)
    show = len(texts) > 100_000 if progress is None else progress
    from tqdm.auto import tqdm

    with tqdm(total=len(texts), desc=description, unit="text", disable=not show) as bar:
        for start in range(0, len(texts), ENCODE_CHUNK):
            batch = encode(list(texts[start : start + ENCODE_CHUNK]))
            for offset, encoding in enumerate(batch):
                ids = encoding.ids if max_length is None else encoding.ids[:max_length]
                lengths[start + offset] = len(ids)
                chunks.append(np.asarray(ids, dtype=dtype))
            bar.update(len(batch))
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    ids = np.concatenate(chunks) if chunks else np.zeros(0, dtype=dtype)
    return TokenArray(ids, offsets)


def pad_batch(
    sequences: Sequence[torch.Tensor],
    *,
    pad_id: int = 0,
    pad_to_multiple_of: int | None = None,
    padding_side: str = "right",
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Pad 1-D int sequences into one tensor with a single scatter, no per-row Python loop.

    Returns:
        ``input_ids`` int64 [B,T], ``attention_mask`` int64 [B,T] (1 = real token) and
        ``lengths`` int64 [B]. T is the longest length, rounded up to ``pad_to_multiple_of``.
    """
    if padding_side not in ("right", "left"):
        raise ValueError(f"padding_side must be 'right' or 'left', got {padding_side!r}")
    sequences = list(sequences)
    if not all(map(torch.is_tensor, sequences)):
        sequences = [torch.as_tensor(sequence, dtype=torch.int64) for sequence in sequences]
    # All in numpy, with one boolean-mask fill: on small tensors torch's per-call overhead costs
    # more than the copy itself, and a collate runs for every batch in every worker.
    lengths = np.array([sequence.shape[0] for sequence in sequences], dtype=np.int64)
    width = int(lengths.max()) if sequences else 0
    if pad_to_multiple_of:
        width = -(-width // pad_to_multiple_of) * pad_to_multiple_of
    positions = np.arange(width)
    if padding_side == "right":
        mask = positions < lengths[:, None]
    else:
        mask = positions >= (width - lengths)[:, None]
    input_ids = np.full((len(sequences), width), pad_id, dtype=np.int64)
    if sequences:
        # fills the True positions in row-major order: each row's tokens land in order
        input_ids[mask] = torch.cat(sequences).to(torch.int64).numpy()
    return torch.from_numpy(input_ids), torch.from_numpy(mask.astype(np.int64)), torch.from_numpy(lengths)
