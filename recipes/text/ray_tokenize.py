"""Tokenise a corpus on a Ray Data cluster by this package's rules: batch in, ``input_ids`` column out.

    import ray
    from recipes.text import TokenizeBatch

    ds = ray.data.read_parquet("s3://bucket/corpus/")
    ds = ds.map_batches(TokenizeBatch("tokenizer.json", max_length=512), batch_format="pyarrow")
    ds.write_parquet("s3://bucket/tokens/")       # the text columns and a list<int32> "input_ids"

A :class:`TokenizeBatch` carries its tokenizer as JSON text, so the workers need no copy of the
file; Ray unpickles it for each task (a block of rows), which builds its encoder on its first
batch. To build it once per worker, pass the class and Ray runs actors:
``ds.map_batches(TokenizeBatch, fn_constructor_args=("tokenizer.json",), fn_constructor_kwargs=
{"max_length": 512}, compute=ray.data.ActorPoolStrategy(size=8))``; each actor reads the path.

The ids are those of :class:`recipes.text.TokenizedTextDataset` for the same text and
``max_length``: :func:`recipes.core.tokenizing.encode_texts` cuts the content and keeps the special
tokens, from a bounded prefix of a long text. A null, blank or non-string text raises the
DataError the dataset raises for it, naming the row in its batch. The module needs pyarrow
(``pip install ".[parquet]"``), not Ray: only the caller imports Ray.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from recipes.core import DataError, checks, tokenizing
from recipes.text.corpus_files import is_unicode


class TokenizeBatch:
    """A batch function for ``Dataset.map_batches``: the batch with a ``list<int32>`` ids column added.

    A ``pyarrow.Table`` batch (``batch_format="pyarrow"``) gets the column appended; a dict of
    numpy arrays (``batch_format="numpy"``, Ray's default) comes back as a ``pyarrow.Table`` of
    its columns and the ids, since Ray stores a ragged numpy column as its own tensor type, not
    as a Parquet list. Other columns are kept as they are.

    Args:
        tokenizer: a ``tokenizers.Tokenizer``, the path of a ``tokenizer.json``, or its JSON text.
            It is read here, on the caller's machine.
        max_length: keep at most this many ids per text, special tokens included (None: all).
        text_field: the column of texts.
        ids_field: the column to add; a batch that has it already is refused.
        truncation: ``"tokenizer"`` (keep the special tokens) or ``"slice"``, as
            :class:`recipes.core.tokenizing.TruncatingEncoder`.
    """

    def __init__(
        self,
        tokenizer: Tokenizer | str | os.PathLike,
        *,
        max_length: int | None = None,
        text_field: str = "text",
        ids_field: str = "input_ids",
        truncation: str = "tokenizer",
    ) -> None:
        if isinstance(tokenizer, str) and tokenizer.lstrip().startswith("{"):
            tokenizer = Tokenizer.from_str(tokenizer)
        self.tokenizer_json = tokenizing.load_tokenizer(tokenizer).to_str()
        self.max_length, self.truncation = max_length, truncation
        self.text_field, self.ids_field = text_field, ids_field
        # built here so that a bad max_length or truncation fails on the caller, not in every task
        self.encoder: tokenizing.TruncatingEncoder | None = self._encoder()

    def _encoder(self) -> tokenizing.TruncatingEncoder:
        tokenizer = Tokenizer.from_str(self.tokenizer_json)
        return tokenizing.TruncatingEncoder(tokenizer, self.max_length, truncation=self.truncation)

    def __getstate__(self) -> dict[str, Any]:
        # the JSON text travels; the copy builds its encoder (tokenizer copies) on its first batch
        return {**self.__dict__, "encoder": None}

    def __call__(self, batch: Any) -> Any:
        """``batch`` (a ``pyarrow.Table`` or a dict of columns) as a ``pyarrow.Table`` with the ids column."""
        import pyarrow as pa

        if not isinstance(batch, (pa.Table, Mapping)):
            raise TypeError(
                f"TokenizeBatch takes a pyarrow.Table or a dict of columns, got {type(batch).__name__}; "
                f"pass batch_format='pyarrow' (or 'numpy') to map_batches"
            )
        arrow = isinstance(batch, pa.Table)
        self._check_columns(list(batch.column_names if arrow else batch))
        if arrow:
            texts = batch.column(self.text_field).to_pylist()
        else:
            values = batch[self.text_field]
            texts = values.tolist() if isinstance(values, np.ndarray) else list(values)
        self._check_texts(texts, arrow=arrow)
        table = batch if arrow else pa.table({name: _arrow_column(values, name) for name, values in batch.items()})
        if self.encoder is None:
            self.encoder = self._encoder()
        tokens = tokenizing.encode_texts(self.encoder, texts, progress=False)
        if tokens.offsets[-1] > np.iinfo(np.int32).max:  # list<int32> offsets hold no more ids than that
            raise ValueError(
                f"TokenizeBatch: a batch of {len(texts)} texts gave {tokens.offsets[-1]} ids, more than a "
                f"list<int32> column holds; pass a smaller batch_size to map_batches"
            )
        ids = pa.ListArray.from_arrays(tokens.offsets.astype(np.int32), tokens.ids.astype(np.int32))
        return table.append_column(self.ids_field, ids)

    def _check_columns(self, columns: list[str]) -> None:
        if self.text_field not in columns:
            raise DataError(
                f"TokenizeBatch: the batch has no column {self.text_field!r} (text_field); it has {columns}"
            )
        if self.ids_field in columns:
            raise DataError(
                f"TokenizeBatch: the batch has a column {self.ids_field!r} already; pass ids_field= another name"
            )

    def _check_texts(self, texts: list[Any], *, arrow: bool) -> None:
        """The dataset's rules for a text: a non-empty string (and valid Unicode, which Arrow's are)."""
        for row, text in enumerate(texts):
            if isinstance(text, str) and text and not text.isspace() and (arrow or is_unicode(text)):
                continue
            where = f"TokenizeBatch: column {self.text_field!r}, row {row} of the batch"
            if text is None:
                reason = "is null"
            elif not isinstance(text, str):
                reason = f"is {type(text).__name__}, not a string"
            elif not text or text.isspace():
                reason = "is empty"
            else:
                reason = "is not valid UTF-8 / Unicode (lone surrogate)"
            raise DataError(f"{where} {reason}; drop such rows first (Dataset.filter)")


def _arrow_column(values: Any, name: str) -> Any:
    """One column of a dict batch as an Arrow array, or a TypeError naming it."""
    import pyarrow as pa

    if isinstance(values, np.ndarray) and values.ndim > 1:
        raise TypeError(
            f"TokenizeBatch: column {name!r} is a {values.ndim}-D array, which a dict batch cannot carry into "
            f"the Arrow table; pass batch_format='pyarrow' to map_batches"
        )
    return pa.array(values)


class TokenizeInstructions:
    """A batch function for ``Dataset.map_batches`` that tokenises instruction rows with their labels.

    The batch's ``messages`` or ``prompt``/``completion`` (or ``text``) columns are rendered and
    labelled as :class:`recipes.text.InstructionDataset` does; two ``list<int32>`` columns are
    added, the ids and ``labels`` (-100 where nothing is learned), which
    ``InstructionDataset.from_ids(path, tokenizer, ids_field="input_ids")`` reads back. A bad row, or one
    whose answer ``max_length`` cuts off wholly, raises the dataset's DataError, naming the row in
    its batch: filter such rows first (``Dataset.filter``).

        ds = ds.map_batches(TokenizeInstructions("tokenizer.json", template="tokenizer_config.json",
                                                 max_length=2048), batch_format="pyarrow")

    Args:
        tokenizer: a ``tokenizers.Tokenizer``, the path of a ``tokenizer.json``, or its JSON text.
        template: a model folder, its ``tokenizer_config.json`` or a ``.jinja`` path, Jinja text or a
            ``ChatTemplate`` (read here).
        completion_only: learn only the answers; False learns every token.
        max_length: keep at most this many ids a row, cut from the end (None: all).
        ids_field: the ids column to add, beside ``labels``.
    """

    def __init__(
        self,
        tokenizer: Tokenizer | str | os.PathLike,
        *,
        template: Any = None,
        completion_only: bool = True,
        max_length: int | None = None,
        ids_field: str = "input_ids",
    ) -> None:
        from recipes.text.chat.chat_template import check_special_tokens, load_template

        if isinstance(tokenizer, str) and tokenizer.lstrip().startswith("{"):
            tokenizer = Tokenizer.from_str(tokenizer)
        tokenizer = tokenizing.load_tokenizer(tokenizer)
        self.tokenizer_json = tokenizer.to_str()
        self.template, self.completion_only = load_template(template), completion_only
        check_special_tokens(self.template, tokenizer)
        self.max_length = checks.check_count("max_length", max_length, owner="TokenizeInstructions")
        self.ids_field = ids_field

    def __call__(self, batch: Any) -> Any:
        """``batch`` (a ``pyarrow.Table``) with the ids and ``labels`` columns appended."""
        import pyarrow as pa

        from recipes.text.chat.instruction_labels import LabelEncoder, cut, render_sample
        from recipes.text.chat.instruction_rows import FIELDS, check_record

        if not isinstance(batch, pa.Table):
            raise TypeError(f"TokenizeInstructions takes a pyarrow.Table, got {type(batch).__name__}; pass "
                            "batch_format='pyarrow' to map_batches")
        for name in (self.ids_field, "labels"):
            if name in batch.column_names:
                raise DataError(f"TokenizeInstructions: the batch has a column {name!r} already")
        columns = [name for name in FIELDS if name in batch.column_names]
        records = batch.select(columns).to_pylist()
        rendered = []
        for row, record in enumerate(records):
            where = f"TokenizeInstructions: row {row} of the batch"
            record = {key: value for key, value in record.items() if value is not None}
            rendered.append(render_sample(check_record(record, where), self.template, where=where,
                                          completion_only=self.completion_only))
        encoder = LabelEncoder(Tokenizer.from_str(self.tokenizer_json))
        ids, labels = [], []
        for row, encoded in enumerate(encoder(rendered)):
            row_ids, learned = encoded.ids, encoded.learned
            if self.max_length is not None and len(row_ids) > self.max_length:
                row_ids, learned = cut(encoded, self.max_length)
                if self.completion_only and not learned.any():
                    raise DataError(f"TokenizeInstructions: row {row} of the batch: the answer lies wholly past "
                                    f"max_length={self.max_length}; raise max_length or filter the row first")
            ids.append(np.asarray(row_ids, dtype=np.int32))
            labels.append(np.where(learned, ids[-1], -100).astype(np.int32))
        return batch.append_column(self.ids_field, _list_column(ids)).append_column("labels", _list_column(labels))


def _list_column(rows: list[np.ndarray]) -> Any:
    import pyarrow as pa

    offsets = np.zeros(len(rows) + 1, dtype=np.int32)
    np.cumsum([len(row) for row in rows], out=offsets[1:])
    values = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int32)
    return pa.ListArray.from_arrays(offsets, values)
