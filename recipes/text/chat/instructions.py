"""Instruction tuning data: chats and prompt/completion pairs, tokenised once, loss on the answers only.

    dataset = InstructionDataset("chat.jsonl", "tokenizer.json", template="tokenizer_config.json",
                                 max_length=2048)
    loader = text_loader(dataset, batch_size=16, seed=0)           # instruction_collate: padded
    for batch in loader:
        loss = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                     labels=batch["labels"]).loss                 # -100 on prompts and padding

    loader = text_loader(dataset, max_tokens=8192, collate_fn=pack_collate)   # padding-free

Rows (:mod:`recipes.text.chat.instruction_rows`) are rendered with the model's chat template
(:mod:`recipes.text.chat.chat_template`, as transformers' ``apply_chat_template`` renders it) and
labelled from the rendered text's character offsets (:mod:`recipes.text.chat.instruction_labels`). The
ids and a learned-token mask are kept nanoGPT-style in flat arrays, as
:class:`recipes.text.TokenizedTextDataset` keeps its ids: workers share them instead of copying.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from tokenizers import Tokenizer
from torch.utils.data import Dataset

from recipes.core import (
    DataError,
    ReadOptions,
    SkippedRows,
    arrays,
    check_on_error,
    checks,
    drop_skipped,
    parquet,
    skip_or_raise,
    tokenizing,
)
from recipes.text.chat.chat_template import ChatTemplate, check_special_tokens, load_template
from recipes.text.corpus_files import sample_index
from recipes.text.chat.instruction_ids import read_instruction_ids
from recipes.text.chat.instruction_labels import Encoded, LabelEncoder, Rendered, cut, render_sample
from recipes.text.chat.instruction_rows import SKIP_HINT, check_record, check_row_size, read_records, source_name
from recipes.text.token_source import from_ids_instance

IGNORE_INDEX = -100  # the label PyTorch's cross_entropy (and every HF model's loss) skips
OVERLONG = ("cut", "refuse")
ITEM_KEYS = ("input_ids", "labels", "index")  # what instruction_collate reads; other item keys are carried
CHUNK_ROWS = 2048  # rows rendered per encode_batch call: enough for Rust's thread pool
INSTRUCTION_READ_OPTIONS = ("max_line_chars",)  # what this reads of its ReadOptions


class InstructionDataset(Dataset):
    """Instruction samples of a JSONL, CSV or Parquet source (or a ``datasets.Dataset``), tokenised once.

    Item ``i`` is ``{"input_ids": int64 [L], "labels": int64 [L], "index": i}``; ``labels`` equal
    ``input_ids`` where the model learns and are -100 elsewhere. A row is one of TRL's formats:
    ``{"messages": [{"role", "content"}, ...]}`` (the assistant's turns are learned, each with its
    end-of-turn token), ``{"prompt", "completion"}`` as strings (the completion is learned, the
    template's ``eos_token`` appended as TRL does) or as message lists (what follows the prompt's
    generation prompt is learned), or ``{"text"}`` (all learned). A chat's ids equal transformers'
    ``apply_chat_template(messages, tokenize=True)``; plain text is encoded with the tokenizer's
    special tokens. ``.lengths`` feeds the length-grouping and token-budget plans.

    Truncation keeps what training needs. ``overlong="cut"`` (default) cuts a long sample from the
    end, keeping the tokenizer's closing special tokens, because the start of a conversation (its
    system prompt and question) is what the answer depends on; a closing token after a cut answer
    is not learned. A sample left with nothing to learn is a DataError (the answer lies wholly past
    ``max_length``). ``overlong="refuse"``: every sample over ``max_length`` is a DataError, for
    data where half an answer is worse than none. With ``on_error="skip"`` such samples are dropped
    with a warning, as bad rows are: an unknown role, a message without content, an empty
    conversation, a template that raises or goes over its budget (:class:`recipes.text.RenderBudget`),
    a row over ``read_options.max_line_chars``. Each error names the file and line (Parquet: row);
    a source whose every row was skipped is a DataError saying how many and why the first was.

    Args:
        source: a ``.jsonl`` or ``.csv`` file, a ``.parquet`` file, list or glob, or a ``datasets.Dataset``.
        tokenizer: a ``tokenizers.Tokenizer`` or a ``tokenizer.json`` path.
        template: a model folder, its ``tokenizer_config.json`` or a ``chat_template.jinja`` path (the
            template and the config's special tokens, read as transformers reads them:
            :meth:`ChatTemplate.from_config`), the Jinja text of a template, or a :class:`ChatTemplate`
            (with its ``budget``); needed for message rows. Its ``bos_token``, ``eos_token`` and
            ``pad_token`` must be in the vocabulary.
        completion_only: learn only the answers (above); False learns every token.
        max_length: keep at most this many ids per sample (None: all).
        on_error: ``"raise"`` or ``"skip"`` (see above).
        overlong: ``"cut"`` or ``"refuse"`` (see above).
        pad_id: the id ``instruction_collate`` pads with; None reads the tokenizer's pad token,
            else the template's ``eos_token`` (padding is masked either way).
        storage_options: passed to fsspec for a URL; never shown.
        read_options: a :class:`recipes.core.ReadOptions`; this reads its
            ``max_line_chars``: a row whose texts hold more characters is a DataError naming it
            (``TokenizedTextDataset``'s bound and default). A row is rendered and tokenised whole,
            whatever ``max_length``: about 100 bytes of memory a character.
    """

    def _init_ids(
        self,
        source: Any,
        tokenizer: Tokenizer | str | os.PathLike | None = None,
        *,
        ids_field: str = "input_ids",
        template: ChatTemplate | str | os.PathLike | None = None,
        completion_only: bool = True,
        max_length: int | None = None,
        on_error: str = "raise",
        overlong: str = "cut",
        pad_id: int | None = None,
        storage_options: dict[str, Any] | None = None,
    ) -> None:
        """:meth:`from_ids`'s reading, on the instance it makes: ids and labels already
        made (:mod:`recipes.text.chat.instruction_ids`), cut as text is."""
        tokenizer = None if tokenizer is None else tokenizing.load_tokenizer(tokenizer)
        tokenizer = self._setup(source, tokenizer, template, completion_only, max_length, on_error, overlong, pad_id)
        if not parquet.is_parquet(source):
            raise ValueError(f"{self._name}: from_ids reads a Parquet column of token-id lists (or a "
                             "datasets.Dataset's); write the ids to Parquet, or pass rows to tokenise")
        vocab = None if tokenizer is None else tokenizer.get_vocab_size(with_added_tokens=True)
        self._line_name = "row"
        kept_ids, kept_learned, kept_numbers = [], [], []
        with SkippedRows(self._name) as skipped:
            ids, learned, numbers = read_instruction_ids(
                parquet.parquet_entries(source, storage_options), ids_field, vocab_size=vocab,
                completion_only=completion_only, on_error=on_error, storage_options=storage_options)
            for row_ids, mask, number in zip(ids, learned, numbers):
                where = f"{self._name} row {number}"
                try:
                    if completion_only and not mask.any():
                        raise DataError(f"{where}: nothing to learn (every label is -100)", skip_hint=SKIP_HINT)
                    row_ids, mask = _cut(Encoded(row_ids.tolist(), mask, 0), where, max_length, overlong, completion_only)
                except DataError as error:
                    skip_or_raise(error, on_error)
                    continue
                kept_ids.append(np.asarray(row_ids, dtype=np.int64))
                kept_learned.append(mask)
                kept_numbers.append(number)
            skipped.check(len(kept_ids))
        dtype = np.dtype(np.uint32) if tokenizer is None else tokenizing.token_dtype(tokenizer)
        self._set(kept_ids, kept_learned, kept_numbers, dtype)

    def __init__(
        self,
        source: str | os.PathLike | list[str | os.PathLike] | Any,
        tokenizer: Tokenizer | str | os.PathLike | None,
        *,
        template: ChatTemplate | str | os.PathLike | None = None,
        completion_only: bool = True,
        max_length: int | None = None,
        on_error: str = "raise",
        overlong: str = "cut",
        pad_id: int | None = None,
        storage_options: dict[str, Any] | None = None,
        read_options: ReadOptions | None = None,
    ) -> None:
        options = checks.read_options_or_default(read_options, "InstructionDataset", INSTRUCTION_READ_OPTIONS)
        tokenizer = self._setup(source, tokenizing.load_tokenizer(tokenizer), template, completion_only, max_length,
                                on_error, overlong, pad_id)
        self.max_chars = options.max_line_chars
        self._line_name, rows = read_records(source, storage_options)
        ids, learned, numbers = [], [], []
        with SkippedRows(self._name) as skipped:
            rendered = _rendered(rows, self.template, completion_only=completion_only, max_chars=self.max_chars,
                                 on_error=on_error)
            for chunk, encoded in LabelEncoder(tokenizer).pipelined(rendered):
                for (row, _), sample in zip(chunk, encoded):
                    try:
                        sample_ids, mask = _cut(sample, row.where, max_length, overlong, completion_only)
                    except DataError as error:
                        skip_or_raise(error, on_error)
                        continue
                    ids.append(np.asarray(sample_ids, dtype=np.int64))
                    learned.append(np.asarray(mask, dtype=bool))
                    numbers.append(row.number)
            skipped.check(len(ids))
        self._set(ids, learned, numbers, tokenizing.token_dtype(tokenizer))

    @classmethod
    def from_ids(
        cls,
        source: str | os.PathLike | list[str | os.PathLike] | Any,
        tokenizer: Tokenizer | str | os.PathLike | None = None,
        *,
        ids_field: str = "input_ids",
        template: ChatTemplate | str | os.PathLike | None = None,
        completion_only: bool = True,
        max_length: int | None = None,
        on_error: str = "raise",
        overlong: str = "cut",
        pad_id: int | None = None,
        storage_options: dict[str, Any] | None = None,
    ) -> InstructionDataset:
        """Instruction samples of a Parquet column of token-id lists and its ``labels`` (or TRL's
        ``assistant_masks`` / ``completion_mask``) column, read as stored: nothing is tokenised
        (:mod:`recipes.text.chat.instruction_ids`; :class:`recipes.text.TokenizeInstructions` writes them).

        Args:
            source: a ``.parquet`` file, list or glob, or a ``datasets.Dataset``.
            tokenizer: None, or the tokenizer that made the ids: it bounds them and names the pad id.
            ids_field: the column of token-id lists.
            template, completion_only, on_error, overlong, pad_id, storage_options: as the
                constructor's; ``max_length`` cuts from the end, as text is cut.
        """
        return from_ids_instance(cls, cls._init_ids, source, tokenizer, ids_field=ids_field, template=template,
                                 completion_only=completion_only, max_length=max_length, on_error=on_error,
                                 overlong=overlong, pad_id=pad_id, storage_options=storage_options)

    def _setup(self, source: Any, tokenizer: Tokenizer | None, template: Any, completion_only: bool,
               max_length: int | None, on_error: str, overlong: str, pad_id: int | None) -> Tokenizer | None:
        """Check and keep the options both readings share; the pad id from them."""
        check_on_error(on_error)
        if overlong not in OVERLONG:
            raise ValueError(f"overlong must be one of {OVERLONG}, got {overlong!r}")
        checks.check_count("max_length", max_length, owner="InstructionDataset")
        self.template = load_template(template)
        check_special_tokens(self.template, tokenizer)
        self.completion_only, self.max_length, self.on_error, self.overlong = completion_only, max_length, on_error, overlong
        self.max_chars = None
        self._name = source_name(source)
        self._pad_id = None if tokenizer is None else tokenizing.find_pad_id(tokenizer, pad_id)
        self._pad_id = int(pad_id) if pad_id is not None else self._pad_id
        eos = None if self.template is None else self.template.eos_token
        if self._pad_id is None and eos is not None and tokenizer is not None:
            self._pad_id = tokenizer.token_to_id(eos)
        return tokenizer

    def _set(self, ids: list[np.ndarray], learned: list[np.ndarray], numbers: list[int], dtype: np.dtype) -> None:
        lengths = np.array([len(part) for part in ids], dtype=np.int64)
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        flat = np.concatenate(ids).astype(dtype) if ids else np.zeros(0, dtype=dtype)
        self.tokens = arrays.TokenArray(flat, offsets)
        self.learned = np.concatenate(learned) if learned else np.zeros(0, dtype=bool)  # aligned with tokens.ids
        self.line_numbers = np.array(numbers, dtype=np.int64)
        self.lengths = self.tokens.lengths  # int64 [N], what the length-grouping sampler sorts by

    @property
    def pad_id(self) -> int:
        """The id ``instruction_collate`` pads with; a ValueError says what to do if there is none."""
        return tokenizing.require_pad_id(self._pad_id, f"InstructionDataset({self._name})")

    def __len__(self) -> int:
        return len(self.tokens)

    def __getitem__(self, index: int) -> dict[str, Any]:
        index = sample_index(index, len(self), self._name)
        start, end = self.tokens.offsets[index], self.tokens.offsets[index + 1]
        ids = self.tokens.ids[start:end].astype(np.int64)
        labels = np.where(self.learned[start:end], ids, IGNORE_INDEX)
        return {"input_ids": torch.from_numpy(ids), "labels": torch.from_numpy(labels), "index": index}

    def describe(self, index: int) -> str:
        """Where sample ``index`` comes from, for messages: ``"chat.jsonl line 18"`` (Parquet: row)."""
        return f"{self._name} {self._line_name} {self.line_numbers[index]}"

    def batch_contract(self) -> dict[str, Any]:
        """What a mixed dataset must share with this one (recipes.core.loading.mixing)."""
        # the collate itself: text_loader's usual text_collate would batch the per-token labels wrongly;
        # without a pad id, its name, and text_loader asks for one (the pad_id property's ValueError)
        collate = "instruction_collate" if self._pad_id is None else InstructionCollate(pad_id=self._pad_id)
        return {"collate": collate, "pad_id": self._pad_id, "per_sample": ("lengths",)}


def _cut(encoded: Encoded, where: str, max_length: int | None, overlong: str,
         completion_only: bool) -> tuple[list[int], np.ndarray]:
    """``encoded`` within ``max_length`` by the ``overlong`` rule, or the DataError that refuses it."""
    if max_length is None or len(encoded.ids) <= max_length:
        return encoded.ids, encoded.learned
    if overlong == "refuse":
        raise DataError(f"{where}: {len(encoded.ids)} tokens, over max_length={max_length} (overlong='refuse')",
                        skip_hint=SKIP_HINT)
    ids, mask = cut(encoded, max_length)
    if completion_only and not mask.any():
        raise DataError(f"{where}: the answer lies wholly past max_length={max_length} "
                        f"({len(encoded.ids)} tokens); raise max_length", skip_hint=SKIP_HINT)
    return ids, mask


def _rendered(rows: Iterable[Any], template: ChatTemplate | None, *, completion_only: bool, max_chars: int | None,
              on_error: str) -> Iterator[list[tuple[Any, Rendered]]]:
    """The rows rendered, ``CHUNK_ROWS`` at a time; a row that fails is skipped or raises here."""
    pending = []
    for row in rows:
        try:
            sample = check_record(row.record, row.where)
            check_row_size(sample, row.where, max_chars)
            pending.append((row, render_sample(sample, template, where=row.where, completion_only=completion_only)))
        except DataError as error:
            skip_or_raise(error, on_error)
        if len(pending) == CHUNK_ROWS:
            yield pending
            pending = []
    if pending:
        yield pending


def instruction_collate(
    batch: list[dict[str, Any] | None],
    *,
    pad_id: int = 0,
    pad_to_multiple_of: int | None = None,
    padding_side: str = "right",
) -> dict[str, torch.Tensor]:
    """Pad instruction items into one batch; ``text_loader`` uses it for an :class:`InstructionDataset`.

    Returns:
        ``input_ids`` int64 [B,T] (padded with ``pad_id``), ``attention_mask`` int64 [B,T] (1 = real
        token), ``labels`` int64 [B,T] (-100 on padding too, so a model's shifted loss skips it),
        ``lengths`` int64 [B] and ``index`` int64 [B]. T is the longest sample, rounded up to
        ``pad_to_multiple_of``. ``None`` items (skipped) are dropped; other item keys are batched
        as :func:`recipes.core.arrays.extra_columns` does.
    """
    batch = drop_skipped(batch)
    options = {"pad_to_multiple_of": pad_to_multiple_of, "padding_side": padding_side}
    input_ids, attention_mask, lengths = tokenizing.pad_batch([item["input_ids"] for item in batch], pad_id=pad_id,
                                                              **options)
    labels = tokenizing.pad_to_width([item["labels"] for item in batch], lengths.numpy(), input_ids.shape[1],
                                     IGNORE_INDEX, padding_side)
    index = torch.from_numpy(np.array([item["index"] for item in batch], dtype=np.int64))
    out = {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels, "lengths": lengths, "index": index}
    return out | arrays.extra_columns(batch, ITEM_KEYS, out, caller="instruction_collate")


@dataclass(frozen=True)
class InstructionCollate:
    """:func:`instruction_collate` with its options as fields (a ``collate_fn`` that pickles and
    shows them): ``InstructionCollate(pad_id=dataset.pad_id)``."""

    pad_id: int = 0
    pad_to_multiple_of: int | None = None
    padding_side: str = "right"

    def __call__(self, batch: list[dict[str, Any] | None]) -> dict[str, torch.Tensor]:
        return instruction_collate(batch, **vars(self))
