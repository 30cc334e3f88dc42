"""Tokenised text classification / language-model data: the dataset and its length-grouped loader.

    dataset = TokenizedTextDataset("train.jsonl", "tokenizer.json", label_field="label",
                                   max_length=512, cache_dir="~/.cache/recipes")
    loader = text_loader(dataset, batch_size=32, device="cuda", seed=0)   # length-grouped
    for batch in loader:
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])

    loader = text_loader(dataset, max_tokens=4096, collate_fn=pack_collate)   # no padding at all
    dataset = TokenizedTextDataset.from_ids("train-*.parquet", ids_field="input_ids", pad_id=0)   # ids already made

The file is tokenised once, at construction, with ``encode_batch`` (Rust, all cores), and the ids
are kept nanoGPT-style in one flat uint16/uint32 array plus offsets: no list of Python lists to
copy into every worker (pytorch issue 13246). ``cache_dir`` keeps them as ``.npy`` files that the
next run memory-maps (:mod:`recipes.text.token_cache`). Length-grouped batches cut padding; the
padding and packing collates are in :mod:`recipes.text.collates`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tokenizers import Tokenizer
from torch.utils.data import DataLoader, Dataset

from recipes.core import (
    ByLength,
    ReadOptions,
    SkippedRows,
    TokenBudget,
    arrays,
    build_loader,
    check_on_error,
    checks,
    hooks,
    parquet,
    storage,
    tokenizing,
)
from recipes.text.collates import text_collate_for
from recipes.text.corpus_files import (
    TEXT_FORMATS,
    check_extra_fields,
    check_format,
    extra_arrays,
    label_ids,
    read_rows,
    sample_index,
)
from recipes.text.chat.instructions import InstructionDataset
from recipes.text.parquet_corpus import parquet_source
from recipes.text.parquet_ids import read_id_corpus
from recipes.text.token_cache import cache_prefix, load_cache, reuse_cache, save_cache
from recipes.text.token_source import (
    IDS_READ_OPTIONS,
    from_ids_instance,
    token_source,
)

TEXT_READ_OPTIONS = ("truncation", "max_line_chars", "max_row_group_bytes", "verify_cache")


class TokenizedTextDataset(Dataset):
    """Samples of a ``.txt`` (a line a sample), ``.jsonl``, ``.csv`` or Parquet file, tokenised once.

    Item ``i`` is ``{"input_ids": int64 [L], "index": i}`` plus ``"label": int`` with a
    ``label_field``. ``input_ids`` equal ``tokenizer.encode(text).ids`` with the tokenizer's own
    truncation, ``enable_truncation(max_length)``: the text is cut and the special tokens of the
    post-processor are kept (a long text still ends in ``[SEP]``/``</s>``); the tokenizer you
    pass is not changed. A long line is tokenised from a bounded prefix, so memory follows
    ``max_length``, not the line (:class:`recipes.core.tokenizing.TruncatingEncoder`).

    Reading rules (:mod:`recipes.text.corpus_files`): blank lines are not samples;
    ``line_numbers[i]`` is the file line of sample ``i``. Invalid UTF-8, bad JSON, a missing or
    empty field raise a DataError naming the file and line (``on_error="skip"``: drop the line
    with a warning). Integer labels (CSV digits too) are kept; string labels become their index
    in the sorted ``label_names``.

    Parquet (:mod:`recipes.text.parquet_corpus`): ``path`` may be a ``.parquet`` file, a list or
    a glob of them (``train-*.parquet``), or a Hugging Face ``datasets.Dataset``; rows are read a
    row group at a time, the same rules apply per row, and ``line_numbers[i]`` is the row of
    sample ``i`` counted from 0 across the files. A missing column lists the file's columns.

    Pre-tokenised Parquet (ids made by ``datasets.map``, Ray Data or Spark): :meth:`from_ids`.

    Args:
        path: the data file, a local path or an fsspec URL (``s3://``, ``https://``...); its
            suffix picks the format. For Parquet also a list, a glob or a ``datasets.Dataset``.
        tokenizer: a ``tokenizers.Tokenizer`` or the path of a ``tokenizer.json``.
        text_field: the text's JSON field or CSV / Parquet column (unused for .txt).
        label_field: the label's field or column; None for no labels.
        max_length: keep at most this many ids per sample, special tokens included (None: all).
        cache_dir: store the ids here as ``.npy``, keyed by the file's bytes, the tokenizer and
            these options, and memory-map them on the next run. Never pickled. Each open checks
            the files' sizes, dtypes and shapes against the entry's record; a damaged entry is
            rebuilt with one ``DamagedCacheWarning`` naming the file.
        pad_id: the padding id; None reads the tokenizer's padding config or its pad token.
        on_error: ``"raise"`` or ``"skip"`` (see above).
        storage_options: passed to fsspec for a URL (endpoint, credentials); never shown.
        read_options: a :class:`recipes.core.ReadOptions`; this reads its
            ``truncation``, ``max_line_chars``, ``max_row_group_bytes`` and ``verify_cache`` (with
            ``cache_dir``, every cached file's CRC-32 is checked at open).
        extra_fields: numeric JSON fields or CSV / Parquet columns carried into each item under
            their own names, as a 0-d tensor (int64 where every value is an integer or a boolean,
            else float32), which the collates batch to ``[B]``: ``extra_fields=("weight",)``. A
            missing, null or non-numeric value is a DataError naming the line and the field.
    """

    def _init_ids(
        self,
        path: Any,
        tokenizer: Tokenizer | str | os.PathLike | None = None,
        *,
        ids_field: str = "input_ids",
        label_field: str | None = None,
        max_length: int | None = None,
        pad_id: int | None = None,
        on_error: str = "raise",
        storage_options: dict[str, Any] | None = None,
        read_options: ReadOptions | None = None,
        extra_fields: Sequence[str] = (),
    ) -> None:
        """:meth:`from_ids`'s reading, on the instance it makes."""
        options = checks.read_options_or_default(read_options, "TokenizedTextDataset.from_ids", IDS_READ_OPTIONS)
        extra_fields = check_extra_fields(extra_fields)
        table, _, self.path, self._name = _open_source(path, storage_options, ids_field=ids_field)
        self._line_name, self._no_tokenizer = "row", tokenizer is None  # what line_numbers count, for messages
        source = token_source(tokenizer, max_length=max_length, truncation=options.truncation, pad_id=pad_id,
                              ids_field=ids_field, vocab_size=options.vocab_size, label_field=label_field,
                              on_error=on_error, extra_fields=extra_fields)
        self._pad_id, self._cache = source.pad_id, None  # None: text_collate asks for one, pack_collate needs none
        reading = {"storage_options": table.storage_options, "max_row_group_bytes": options.max_row_group_bytes}
        corpus = read_id_corpus(table.entries, source.ids, **reading)
        self._set(corpus.tokens, corpus.labels, corpus.rows, corpus.label_names, corpus.extras)

    def __init__(
        self,
        path: str | os.PathLike | list[str | os.PathLike] | Any,
        tokenizer: Tokenizer | str | os.PathLike | None = None,
        *,
        text_field: str = "text",
        label_field: str | None = None,
        max_length: int | None = None,
        cache_dir: str | os.PathLike | None = None,
        pad_id: int | None = None,
        on_error: str = "raise",
        storage_options: dict[str, Any] | None = None,
        read_options: ReadOptions | None = None,
        extra_fields: Sequence[str] = (),
    ) -> None:
        options = checks.read_options_or_default(read_options, "TokenizedTextDataset", TEXT_READ_OPTIONS)
        extra_fields = check_extra_fields(extra_fields)
        table, suffix, self.path, self._name = _open_source(path, storage_options)
        self._line_name = "line" if table is None else "row"  # what line_numbers count, for messages
        self._no_tokenizer = False  # from_ids sets it when it has no tokenizer, for the pad_id message
        if tokenizer is None:
            raise ValueError(
                f"TokenizedTextDataset({self._name}) needs a tokenizer to tokenise {text_field!r}; pass one, or use "
                "TokenizedTextDataset.from_ids(...) to read a Parquet column of token ids"
            )
        source = token_source(tokenizer, max_length=max_length, truncation=options.truncation, pad_id=pad_id)
        tokenizer, encoder, self._pad_id = source.tokenizer, source.encoder, source.pad_id
        check_on_error(on_error)
        fields = {"text_field": text_field, "label_field": label_field, "on_error": on_error, "extra_fields": extra_fields}
        if table is not None:  # its content digest reads every byte: only for a cache key
            key_path, data = table.key_path, table.fingerprint() if cache_dir is not None else b""
        else:
            key_path, data = self.path, storage.read_bytes(self.path, storage_options)
        max_chars = options.max_line_chars if max_length is None else None  # with max_length a line is read in part
        key_options = [suffix, text_field, label_field, max_length, on_error, options.truncation, max_chars, *extra_fields]
        self._cache = None if cache_dir is None else cache_prefix(cache_dir, key_path, data, tokenizer, key_options)
        extra_columns = [f"extra{k}" for k in range(len(extra_fields))]  # cache columns are plain words
        needed = ("lines", *extra_columns) if label_field is None else ("lines", "labels", *extra_columns)
        self._vocab_size = tokenizer.get_vocab_size(with_added_tokens=True)  # cached ids are served below it
        cached = None if self._cache is None else reuse_cache(
            self._cache, verify=options.verify_cache, require_columns=needed, require_meta=("label_names",),
            vocab_size=self._vocab_size,
        )
        if cached is not None:
            self._set(*_cached_columns(*cached))
            return
        with SkippedRows(self._name) as skipped:
            if table is not None:
                read = {"max_chars": max_chars, "max_row_group_bytes": options.max_row_group_bytes}
                corpus = table.read(encoder, **read, **fields)
                tokens, labels, names, lines = corpus.tokens, corpus.labels, corpus.label_names, corpus.rows
                extras = corpus.extras
            else:
                rows = read_rows(self.path, data=data, max_chars=max_chars, **fields)
                tokens = tokenizing.encode_texts(encoder, rows.texts,
                                                 description=f"tokenizing {storage.basename(self.path)}")
                labels, names = label_ids(rows.labels) if rows.labels is not None else (None, None)
                lines, extras = np.asarray(rows.lines, dtype=np.int64), extra_arrays(rows.extras)
            skipped.check(len(lines))
        if self._cache is not None:
            columns = {"lines": lines, "labels": labels} | dict(zip(extra_columns, extras.values()))
            save_cache(self._cache, tokens, columns, label_names=names, extra_fields=list(extra_fields))
        self._set(tokens, labels, lines, names, extras)

    @classmethod
    def from_ids(
        cls,
        path: str | os.PathLike | list[str | os.PathLike] | Any,
        tokenizer: Tokenizer | str | os.PathLike | None = None,
        *,
        ids_field: str = "input_ids",
        label_field: str | None = None,
        max_length: int | None = None,
        pad_id: int | None = None,
        on_error: str = "raise",
        storage_options: dict[str, Any] | None = None,
        read_options: ReadOptions | None = None,
        extra_fields: Sequence[str] = (),
    ) -> TokenizedTextDataset:
        """Samples of a Parquet column of token-id lists, read as stored: nothing is tokenised.

        ``datasets.map``, Ray Data and Spark write such columns (:mod:`recipes.text.parquet_ids`).
        Items, labels, padding and packing are those of the text path. A tokenizer, when given,
        bounds the ids by its vocabulary and sets ``pad_id`` when it is not passed, and ``max_length``
        cuts the stored ids as the text path cuts (its special tokens kept; a cut row that does not
        end in them is a DataError); without one ``max_length`` slices, ``ids[:max_length]``, and
        ``pad_id`` is None unless passed (``text_collate`` then asks for one, ``pack_collate`` needs
        none). A bad id or row is a DataError naming the file, row and row group.

        Args:
            path: a ``.parquet`` file or URL, a list or a glob of them, or a ``datasets.Dataset``.
            tokenizer: None, or the tokenizer that made the ids.
            ids_field: the column of token-id lists.
            label_field, max_length, pad_id, on_error, storage_options, extra_fields: as the constructor's.
            read_options: a :class:`recipes.core.ReadOptions`; this reads its
                ``truncation``, ``max_row_group_bytes`` and ``vocab_size`` (ids must be below it;
                default: the tokenizer's ``get_vocab_size()``, without one only uint32's bound).
        """
        return from_ids_instance(cls, cls._init_ids, path, tokenizer, ids_field=ids_field, label_field=label_field,
                                 max_length=max_length, pad_id=pad_id, on_error=on_error,
                                 storage_options=storage_options, read_options=read_options,
                                 extra_fields=extra_fields)

    def _set(self, tokens: arrays.TokenArray, labels: np.ndarray | None, lines: np.ndarray, names: list[str] | None,
             extras: dict[str, np.ndarray] | None = None) -> None:
        self.tokens, self.labels, self.line_numbers, self.label_names = tokens, labels, lines, names
        self.extras = extras or {}  # extra_fields: name -> int64 or float32 [N]
        self.extra_fields = tuple(self.extras)
        self.lengths = tokens.lengths  # int64 [N], what the length-grouping sampler sorts by

    @property
    def pad_id(self) -> int:
        """The id ``text_collate`` pads with; a ValueError says what to do if there is none."""
        owner = f"TokenizedTextDataset({self._name}{', no tokenizer' if self._no_tokenizer else ''})"
        return tokenizing.require_pad_id(self._pad_id, owner)

    def __len__(self) -> int:
        return len(self.tokens)

    def __getitem__(self, index: int) -> dict[str, Any]:
        index = sample_index(index, len(self), self._name)
        item: dict[str, Any] = {"input_ids": self.tokens.tensor(index), "index": index}
        if self.labels is not None:
            item["label"] = int(self.labels[index])
        if self.extras:
            item.update((name, torch.tensor(values[index])) for name, values in self.extras.items())
        return item

    def state_source(self) -> str:
        """What a loader state names as this data: the file's name, the sample count and a digest
        of the token lengths (which the length plans batch by)."""
        return f"{storage.basename(self._name)}: {len(self)} samples, lengths {checks.sampled_digest(self.lengths)}"

    def describe(self, index: int) -> str:
        """Where sample ``index`` comes from, for messages: ``"labeled.jsonl line 18"`` (Parquet: row)."""
        return f"{self._name} {self._line_name} {self.line_numbers[index]}"

    def batch_contract(self) -> dict[str, Any]:
        """What a mixed dataset must share with this one (recipes.core.loading.mixing)."""
        return {"collate": "text_collate", "pad_id": self._pad_id, "label_names": self.label_names,
                "extra_fields": self.extra_fields, "per_sample": ("lengths",)}

    def __getstate__(self) -> dict[str, Any]:
        # A cached dataset travels to spawned workers as its cache path and is memory-mapped
        # again there, instead of pickling the whole token array into every worker.
        state = dict(self.__dict__)
        if self._cache is not None:
            for name in ("tokens", "labels", "line_numbers", "label_names", "lengths", "extras"):
                state.pop(name)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if "tokens" not in state:
            self._set(*_cached_columns(*load_cache(self._cache, vocab_size=self._vocab_size)))


def _open_source(path: Any, storage_options: dict[str, Any] | None, *,
                 ids_field: str | None = None) -> tuple[Any, str, Any, str]:
    """``(the Parquet source or None, the format's suffix, the path, its name for messages)``."""
    # a .parquet file, a list or glob of them, or a Hugging Face Dataset: resolved once
    table = parquet_source(path, storage_options) if parquet.is_parquet(path) else None
    if table is not None:
        return table, parquet.PARQUET_SUFFIX, table.path, table.name
    local = path if storage.is_url(path) else Path(path)
    suffix = check_format(local, TEXT_FORMATS)  # the message lists .parquet too
    if ids_field is not None:
        raise ValueError(
            f"{storage.shown(path)}: ids_field reads a Parquet column of token-id lists, and a {suffix} file has no "
            "such column; write the ids to Parquet (datasets.Dataset.to_parquet, pyarrow.parquet.write_table) "
            "or pass a tokenizer to tokenise the text"
        )
    if not storage.is_url(path) and not local.is_file():
        raise FileNotFoundError(f"text file {local} does not exist")
    return None, suffix, local, storage.shown(path)


def _cached_columns(tokens: arrays.TokenArray, columns: dict[str, np.ndarray], meta: dict[str, Any]) -> tuple[Any, ...]:
    """A cache entry's ``(tokens, labels, line numbers, label names, extras)``, as the dataset keeps them."""
    extras = {name: columns[f"extra{k}"] for k, name in enumerate(meta.get("extra_fields", []))}
    return tokens, columns.get("labels"), columns["lines"], meta["label_names"], extras


def text_loader(
    dataset: TokenizedTextDataset | InstructionDataset,
    batch_size: int | None = None,
    *,
    max_tokens: int | None = None,
    train: bool = True,
    device: str | torch.device | None = None,
    seed: int | None = None,
    stateful: bool = False,
    collate_fn: Any = None,
    **overrides: Any,
) -> DataLoader:
    """A DataLoader preset for :class:`TokenizedTextDataset`.

    Training batches hold samples of similar length: every epoch the samples are sorted by
    length with a little fresh jitter (:class:`recipes.core.ByLength`) and cut into
    batches, whose order is then shuffled; samples of similar length change batchmates every
    epoch, and padding stays close to sorting everything (figures: benchmarks/README.md).
    Evaluation keeps the dataset order. Each rank of a process group gets the same number of
    batches. Another plan (``ByLength(lengths, noise=0)``: sorted exactly) is one line to change
    in a copy of this function.

    Args:
        dataset: the dataset (any map-style dataset with ``.lengths`` and ``.pad_id`` works, or a ``Subset`` of one).
        batch_size: samples per batch; with ``max_tokens`` an upper bound, or None.
        max_tokens: cut batches by a token budget, ``len(batch) * longest <= max_tokens`` (a
            single longer sample forms its own batch).
        train: shuffled, length-grouped, drop the last partial batch; else in order, keep all.
        device, seed, stateful: see :func:`recipes.core.build_loader`.
        collate_fn: used as given; ``pack_collate`` packs without padding. Default: the collate the
            dataset asks for (its ``batch_contract()``'s ``"collate"``, :func:`recipes.core.hooks.collate_of`:
            :class:`recipes.text.InstructionDataset` and mixtures of them, ``instruction_collate``),
            else :class:`TextCollate` with the dataset's pad id (:class:`recipes.core.hooks.PadsIds`).
        overrides: DataLoader keyword arguments (``num_workers=0``, ``pin_memory=False``, ...;
            :func:`recipes.core.preset_kwargs`).
    """
    collate = hooks.UsualCollate(text_collate_for) if collate_fn is None else collate_fn
    plan = ByLength(dataset.lengths) if max_tokens is None else TokenBudget(dataset.lengths, max_tokens)
    return build_loader(dataset, collate, batch_size=batch_size, plan=plan, train=train, device=device, seed=seed,
                        stateful=stateful, **overrides)

