"""Tokenizers and encoding: in the core because text, captions and transcripts (audio) share them.

    tokenizer = load_tokenizer("tokenizer.json")
    tokens = encode_texts(tokenizer, ["a cat", "a dog on a mat"], max_length=77)
    tokens[1]                        # np.ndarray of ids, a view into one flat array
    tokens.lengths                   # np.ndarray [N]

Encoded ids come back as a :class:`recipes.core.contracts.arrays.TokenArray`: one flat ``uint16`` array
(``uint32`` when the vocabulary has more than 65,536 entries) plus int64 offsets, which workers
share instead of copying (see that module).

Truncation to ``max_length`` is the tokenizer's own (``Tokenizer.enable_truncation``): the content
is cut and the post-processor's special tokens (``[CLS] ... [SEP]``, CLIP's BOS/EOT) are kept.
A long text is tokenised from a bounded prefix, so memory follows ``max_length``, not the text
(:class:`TruncatingEncoder`); ids stored already (a pre-tokenised column) are cut the same way by
its ``cut_ids``, without a loop over the sequences (:mod:`recipes.core.tokens.truncation`, which finds
where the special tokens sit).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from tokenizers import Encoding, Tokenizer

from recipes.core.contracts.arrays import TokenArray
from recipes.core.sources.storage import shown
from recipes.core.tokens.truncation import check_truncation, copy_tokenizer, cut_tokens, special_counts, special_ends

PAD_TOKENS = ("[PAD]", "<pad>", "<|pad|>", "<PAD>", "[pad]")
ENCODE_CHUNK = 4096  # texts per encode_batch call: large enough for Rust's thread pool
PREFIX_CHARS_PER_ID = 16  # first prefix of a long text, per kept id: ample for natural-language tokens
MIN_PREFIX_CHARS = 1024
WHOLE_TEXT_CHARS = 65_536  # shorter texts are encoded whole, in one fast batch: a few MB of tokenizer memory


def load_tokenizer(tokenizer: Tokenizer | str | os.PathLike) -> Tokenizer:
    """A ``tokenizers.Tokenizer`` as is, or one loaded from a ``tokenizer.json`` path."""
    if isinstance(tokenizer, Tokenizer):
        return tokenizer
    path = Path(tokenizer)
    if not path.is_file():  # a URL is not read either: the message shows it without credentials
        raise FileNotFoundError(f"tokenizer file {shown(tokenizer)} does not exist (expected a tokenizer.json)")
    return Tokenizer.from_file(str(path))


def pad_id_of(tokenizer: Tokenizer, pad_id: int | None = None) -> int:
    """The padding id: ``pad_id`` if given, else the tokenizer's padding config, else its pad token;
    else the ValueError of :func:`require_pad_id`."""
    return require_pad_id(find_pad_id(tokenizer, pad_id), "pad_id_of")


def find_pad_id(tokenizer: Tokenizer, pad_id: int | None = None) -> int | None:
    """:func:`pad_id_of`, or None where the tokenizer has none: a dataset that may never pad
    (``pack_collate``) asks :func:`require_pad_id` only when padding needs it."""
    if pad_id is not None:
        return int(pad_id)
    if tokenizer.padding is not None:
        return int(tokenizer.padding["pad_id"])
    for token in PAD_TOKENS:
        token_id = tokenizer.token_to_id(token)
        if token_id is not None:
            return token_id
    return None


def require_pad_id(pad_id: int | None, owner: str) -> int:
    """``pad_id``, or the one ValueError for a tokenizer with no pad id, naming ``owner``."""
    if pad_id is None:
        raise ValueError(
            f"{owner}: the tokenizer has no padding config and none of the pad tokens {PAD_TOKENS}; "
            f"pass pad_id=... (any id works: padded positions are masked out)"
        )
    return pad_id


def batch_safe_tokenizer(tokenizer: Tokenizer) -> Tokenizer:
    """``tokenizer``, or a copy of it, whose ``encode_batch`` gives what ``encode`` gives per text.

    Batch-longest padding is the one setting where they differ: it pads each text to the
    longest in its batch. Fixed-length padding and truncation apply per text, so they stay.
    """
    padding = tokenizer.padding
    if padding is None or padding.get("length") is not None:
        return tokenizer
    copy = copy_tokenizer(tokenizer)
    copy.no_padding()
    return copy


def token_dtype(tokenizer: Tokenizer) -> np.dtype:
    """``uint16`` when every id fits in 16 bits, else ``uint32``."""
    return np.dtype(np.uint16 if tokenizer.get_vocab_size(with_added_tokens=True) <= 2**16 else np.uint32)


class TruncatingEncoder:
    """Encode texts to at most ``max_length`` ids, reading only a bounded prefix of a long text.

    ``truncation="tokenizer"`` (default): ids equal ``tokenizer.encode(text).ids`` of a copy of the
    tokenizer with ``enable_truncation(max_length)``: the content is cut and the special tokens of
    the post-processor are kept, as the model saw them in training (BERT's ``[SEP]``, CLIP's EOT,
    where its pooled embedding is read). A truncation config the tokenizer already has is kept
    (strategy, direction) with the smaller max_length; fixed-length padding stops at max_length. ``truncation="slice"``: ids equal
    ``tokenizer.encode(text).ids[:max_length]`` (a cut sequence loses its closing token). The
    caller's tokenizer is never changed. A tokenizer that does not pad is used as given and its ids
    cut here (a copy costs ~70 ms for a 30k vocabulary); changing its truncation or padding while
    the encoder is in use is refused by the next call. One that pads is copied, once.

    Args:
        tokenizer: a ``tokenizers.Tokenizer`` or the path of a ``tokenizer.json``.
        max_length: keep at most this many ids per text, special tokens included; None keeps all.
        truncation: ``"tokenizer"`` or ``"slice"``, as above.
    """

    def __init__(
        self, tokenizer: Tokenizer | str | os.PathLike, max_length: int | None = None, *, truncation: str = "tokenizer"
    ) -> None:
        check_truncation(max_length, truncation)
        tokenizer = load_tokenizer(tokenizer)
        self.max_length, self.truncation, self.dtype = max_length, truncation, token_dtype(tokenizer)
        self.tokenizer, self.kept, self._given = batch_safe_tokenizer(tokenizer), 0, tokenizer
        self._raw: Tokenizer | None = None  # the tokenizer without truncation or padding, made when first needed
        self.prefix_chars = self.whole_chars = 0  # set with max_length
        given = tokenizer.truncation or {}
        # what encode's own truncation cuts to (special tokens kept), and which end of the content it keeps
        self.limit, self.keep_end = given.get("max_length"), given.get("direction", "right") == "left"
        self._ends: tuple[list[int], list[int]] | None = None  # the special ids around the content, found once
        self._python_cut: tuple[int, int, int] | None = None  # (limit, head, tail) when _cut does the tokenizer's cut
        self.prefixes = False  # whether a long text is read from a bounded prefix
        if max_length is None:
            return
        added = tokenizer.post_processor.num_special_tokens_to_add(False) if tokenizer.post_processor else 0
        if truncation == "tokenizer":
            if max_length < added:
                raise ValueError(
                    f"max_length={max_length} leaves no room for the {added} special tokens the tokenizer adds; "
                    f"use max_length >= {added + 1} (or truncation='slice' to cut them off)"
                )
            limit = self.limit = min(max_length, given.get("max_length", max_length))
            counts = special_counts(self.tokenizer, added) if self.tokenizer.padding is None else None
            if counts is not None:
                # the cut of enable_truncation(limit), done on the ids of the tokenizer as given: copying a
                # tokenizer to truncate it costs more than the cut (~70 ms for a 30k WordPiece vocabulary)
                self._python_cut = (limit, *counts)
                self._settings = (self.tokenizer.truncation, self.tokenizer.padding)  # checked at each call
            else:
                self.tokenizer = copy_tokenizer(self.tokenizer) if self.tokenizer is tokenizer else self.tokenizer
                # no stride: it only shapes the overflow pieces, which are never kept (and a stride the
                # smaller length cannot hold would panic)
                strategy, direction = given.get("strategy", "longest_first"), given.get("direction", "right")
                self.tokenizer.enable_truncation(limit, strategy=strategy, direction=direction)
                padding = self.tokenizer.padding
                if padding is not None and padding["length"] is not None and padding["length"] > limit:
                    self.tokenizer.enable_padding(**{**padding, "length": limit})  # never past max_length
            self.kept = limit - added  # content ids that survive the cut
        else:
            self.kept = max_length  # at least the content ids that the slice can hold
        # a left cut keeps the end, and a given max_length under the special tokens cuts nothing:
        # both read the whole text
        self.prefixes = given.get("direction", "right") == "right" and self.kept >= 0
        self.prefix_chars = max(MIN_PREFIX_CHARS, PREFIX_CHARS_PER_ID * max_length)
        self.whole_chars = max(WHOLE_TEXT_CHARS, 4 * self.prefix_chars)

    @property
    def raw(self) -> Tokenizer:
        """The tokenizer without truncation or padding, which encodes the prefixes of long texts."""
        if self._raw is None:
            self._raw = copy_tokenizer(self._given)
            self._raw.no_truncation()
            self._raw.no_padding()
        return self._raw

    @raw.setter
    def raw(self, tokenizer: Tokenizer) -> None:
        self._raw = tokenizer

    def __call__(self, texts: Sequence[str]) -> list[list[int]]:
        """The ids of each text (one ``encode_batch`` call for the short ones, prefixes for the long)."""
        texts = list(texts)
        if self._python_cut is not None and (self.tokenizer.truncation, self.tokenizer.padding) != self._settings:
            raise ValueError(
                "the tokenizer given to this encoder (or dataset) has had its truncation or padding changed since; "
                "pass a copy (Tokenizer.from_str(tokenizer.to_str())) to change one while the other is in use"
            )
        # encode_batch_fast (tokenizers >= 0.21) gives the same ids, faster: it skips the character
        # offsets that only the prefix check needs.
        encode = getattr(self.tokenizer, "encode_batch_fast", self.tokenizer.encode_batch)
        long = [i for i, text in enumerate(texts) if len(text) > self.whole_chars] if self.prefixes else []
        if not long:
            return [self._cut(encoding.ids) for encoding in encode(texts)]
        out: list[list[int]] = [[] for _ in texts]
        short = [i for i, text in enumerate(texts) if len(text) <= self.whole_chars]
        for i, encoding in zip(short, encode([texts[i] for i in short])):
            out[i] = self._cut(encoding.ids)
        for i, ids in self._long(texts, long):
            out[i] = ids
        return out

    def cut_ids(self, tokens: TokenArray) -> TokenArray:
        """Stored ids of this tokenizer (a pre-tokenised column, special tokens included) cut as
        ``__call__`` cuts a text's: to the tokenizer's truncation length with its special tokens
        kept, then with ``truncation="slice"`` to ``max_length``. Check the rows first with
        :meth:`unmarked_rows`: a cut row that does not end in the special tokens would lose content."""
        if self.limit is not None and len(tokens) and int(tokens.lengths.max()) > self.limit:
            head, tail = self.special_ends()
            tokens = cut_tokens(tokens, self.limit, head=len(head), tail=len(tail), keep_end=self.keep_end)
        if self.truncation == "slice" and self.max_length is not None:
            tokens = cut_tokens(tokens, self.max_length)
        return tokens

    def unmarked_rows(self, tokens: TokenArray) -> np.ndarray:
        """Indices of the sequences :meth:`cut_ids` would cut with the tokenizer's truncation that
        do not begin and end with the special ids of :meth:`special_ends` (ids stored without them,
        or padded): cutting those would drop content and keep content as if it were ``[SEP]``."""
        lengths = tokens.lengths
        long = np.flatnonzero(lengths > self.limit) if self.limit is not None else np.zeros(0, dtype=np.int64)
        if long.size == 0:
            return long
        head, tail = self.special_ends()
        starts, ends = tokens.offsets[long], tokens.offsets[long + 1]
        good = np.ones(len(long), dtype=bool)
        for k, token_id in enumerate(head):
            good &= tokens.ids[starts + k] == token_id
        for k, token_id in enumerate(tail):
            good &= tokens.ids[ends - len(tail) + k] == token_id
        return long[~good]

    def special_ends(self) -> tuple[list[int], list[int]]:
        """The ids the post-processor puts before and after a single text's content
        (``([CLS], [SEP])`` for BERT, ``([], [</s>])`` for T5); ValueError if it cannot be told."""
        if self._ends is None:
            self._ends = special_ends(self.tokenizer)
        return self._ends

    def _cut(self, ids: list[int]) -> list[int]:
        if self._python_cut is not None and len(ids) > self._python_cut[0]:
            limit, head, tail = self._python_cut
            if self.keep_end:  # the tokenizer's left truncation: the last content ids stay
                return ids[:head] + ids[len(ids) - (limit - head) :]
            return ids[: limit - tail] + ids[len(ids) - tail :]
        return ids[: self.max_length] if self.truncation == "slice" and self.max_length is not None else ids

    def _long(self, texts: list[str], indices: list[int]) -> list[tuple[int, list[int]]]:
        """Texts over ``whole_chars``: grow a prefix until its kept ids are the whole text's.

        A prefix of ``k`` characters is encoded (no special tokens, no truncation) with the one of
        ``2k``; the first ``kept`` ids of the ``k`` prefix are taken for the whole text's when
        :func:`_settled` says so, and post-processed (truncated, special tokens, padding) exactly as
        ``encode`` post-processes the whole text's encoding. Else ``k`` doubles; a text no prefix
        settles is encoded whole (a line-long run that the model makes one token: WordPiece's
        ``[UNK]`` for a long word, Unigram's fused unknown characters). Memory follows the prefix: a few times ``max_length`` tokens for natural text,
        whatever the line's length.
        """
        done = []
        size = {i: self.prefix_chars for i in indices}
        encode = self.raw.encode_batch
        previous = dict(zip(indices, encode([texts[i][: size[i]] for i in indices], add_special_tokens=False)))
        while size:
            whole = [i for i in size if 2 * size[i] >= len(texts[i])]
            for i, encoding in zip(whole, self.tokenizer.encode_batch([texts[i] for i in whole])):
                done.append((i, self._cut(encoding.ids)))
                del size[i]
            growing = list(size)
            for i, longer in zip(growing, encode([texts[i][: 2 * size[i]] for i in growing], add_special_tokens=False)):
                if _settled(previous[i], longer, size[i], self.kept):
                    done.append((i, self._cut(self.tokenizer.post_process(previous[i]).ids)))
                    del size[i]
                else:
                    previous[i], size[i] = longer, 2 * size[i]
        return done


def _settled(prefix: Encoding, longer: Encoding, chars: int, kept: int) -> bool:
    """True when the first ``kept`` tokens of a ``chars``-character prefix are the whole text's.

    Why this holds: the normalizers (NFKC, lowercase, BERT's, ``Replace`` of a string...) change a
    character or a combining sequence, and the pre-tokenizers (whitespace, punctuation, Metaspace,
    byte-level's GPT-2 pattern) decide each split from the characters around it, looking ahead at
    most into the next word (``\\s+(?!\\S)``); the model (BPE, WordPiece, Unigram, WordLevel) then
    encodes each word on its own. So cutting the text changes only its last word and the one
    before: tokens in earlier words are the whole text's. Inside one word (a line without spaces,
    or a tokenizer without a pre-tokenizer, e.g. Llama's) BPE merges and Unigram's best path
    depend on the characters around each token: there the tokens must end in the first half of
    the prefix. In both cases the prefix twice as long must give the same tokens (ids and
    offsets): a pattern that looks further ahead than assumed shows there and the prefix grows.
    """
    if kept == 0:
        return True  # only the special tokens remain
    if len(prefix.ids) <= kept or len(longer.ids) <= kept:
        return False
    if prefix.ids[:kept] != longer.ids[:kept] or prefix.offsets[:kept] != longer.offsets[:kept]:
        return False
    words = prefix.word_ids
    if words[kept - 1] is not None and words[-1] is not None and words[kept - 1] < words[-1] - 1:
        return True  # a whole word lies between the kept tokens and the one the cut falls in
    return prefix.offsets[kept - 1][1] <= chars // 2


def encode_texts(
    tokenizer: Tokenizer | TruncatingEncoder,
    texts: Sequence[str],
    *,
    max_length: int | None = None,
    progress: bool | None = None,
    description: str = "tokenizing",
    truncation: str = "tokenizer",
) -> TokenArray:
    """Tokenise ``texts`` with ``encode_batch`` into a :class:`TokenArray`.

    Each sequence equals ``tokenizer.encode(text).ids`` of the tokenizer with
    ``enable_truncation(max_length)``: special tokens kept, the content cut (a copy is truncated,
    never ``tokenizer`` itself). ``truncation="slice"`` gives ``tokenizer.encode(text).ids[:max_length]``
    instead. A long text is read from a bounded prefix (:class:`TruncatingEncoder`).

    Args:
        tokenizer: a ``tokenizers.Tokenizer``, or a :class:`TruncatingEncoder` made once for many
            calls (then ``max_length`` and ``truncation`` are its own).
        texts: the texts.
        max_length: keep at most this many ids per text (None: all).
        progress: show a tqdm bar; None shows it only for more than 100k texts.
        description: the bar's label.
        truncation: ``"tokenizer"`` or ``"slice"`` (see :class:`TruncatingEncoder`).
    """
    if isinstance(tokenizer, TruncatingEncoder):
        encoder = tokenizer
        if max_length is not None and max_length != encoder.max_length:
            raise ValueError(f"max_length={max_length} differs from the encoder's {encoder.max_length}")
    else:
        encoder = TruncatingEncoder(tokenizer, max_length, truncation=truncation)
    chunks, lengths = [], np.zeros(len(texts), dtype=np.int64)
    show = len(texts) > 100_000 if progress is None else progress
    from tqdm.auto import tqdm

    with tqdm(total=len(texts), desc=description, unit="text", disable=not show) as bar:
        for start in range(0, len(texts), ENCODE_CHUNK):
            batch = encoder(texts[start : start + ENCODE_CHUNK])
            for offset, ids in enumerate(batch):
                lengths[start + offset] = len(ids)
                chunks.append(np.asarray(ids, dtype=encoder.dtype))
            bar.update(len(batch))
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    ids = np.concatenate(chunks) if chunks else np.zeros(0, dtype=encoder.dtype)
    return TokenArray(ids, offsets)
