"""Stream tokenised lines from .txt / .jsonl files too large to tokenise up front.

    stream = StreamingTextDataset(["shard-0.jsonl", "shard-1.jsonl"], "tokenizer.json", max_length=1024,
                                  order=StreamOrder(shuffle_buffer=10_000, seed=0))
    loader = streaming_loader(stream, batch_size=32, device="cuda", seed=0)
    for epoch in range(3):
        stream.set_epoch(epoch)          # optional: epochs also advance by themselves
        for batch in loader:
            ...                          # input_ids, attention_mask, lengths, index [, labels]

Every DataLoader worker of every rank holds a copy of an IterableDataset; unless each copy reads
its own part, every line is seen ``workers x ranks`` times. Here the lines are cut into ``world_size
x num_workers`` shares equal by count, each a byte range (:mod:`recipes.text.line_index`: one read of
the files, on rank 0, at construction), and each (rank, worker) reads its own, nothing loaded whole. A training ``streaming_loader`` on several ranks stops them at one step
(:class:`recipes.core.sampling.distributed.EqualSteps`), leaving out fewer than ``world_size x num_workers x
batch_size`` lines an epoch, which the next reads (it starts each share in its middle). Build it
after ``init_process_group``, on every rank.

Lines follow :mod:`recipes.text.corpus_files`: blank lines are passed over, a bad line is a
DataError naming the file and byte offset (skipped with a warning under ``on_error="skip"``).
CSV is not supported: a quoted field may hold a line break, so a slice cannot find where a record
starts. ``index`` is the line's byte offset in the concatenated files (``f.seek(offset)`` finds
it). Parquet (a list, a glob, a ``datasets.Dataset``) is cut into equal slices of rows, read a row
group at a time; there ``index`` is the row, counted from 0 across the files.
"""

from __future__ import annotations

import functools
import itertools
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer
from torch.utils.data import DataLoader, get_worker_info

from recipes.core import (
    ReadOptions,
    ResumableStream,
    StreamOrder,
    build_loader,
    check_on_error,
    checks,
    hooks,
    parquet,
    ranks,
    storage,
    streams,
    tokenizing,
)
from recipes.text.collates import StreamCollate, stream_collate, stream_collate_for  # noqa: F401  (named here too)
from recipes.text.corpus_files import check_format
from recipes.text.line_index import LineIndex
from recipes.text.stream_rows import encoded_items, id_rows, line_samples
from recipes.text.token_source import (
    IDS_READ_OPTIONS,
    from_ids_instance,
    token_source,
)

STREAM_FORMATS = (".txt", ".jsonl")
CHUNK_LINES = 1024  # lines per encode_batch call: amortises the call, keeps memory flat
TEXT_READ_OPTIONS = ("truncation", "max_line_chars", "max_row_group_bytes", "index_dir")


class StreamingTextDataset(ResumableStream):
    """Tokenised lines of .txt / .jsonl files (or Parquet rows), sharded by rank x worker (see module doc).

    Items are ``{"input_ids": int64 [L], "index": byte offset}`` plus ``"label": int`` with a
    ``label_field`` (streaming cannot number string labels: they must be integers). ``state_dict()``
    holds positions (:class:`recipes.core.ResumableStream`): ``[block, offset, lines taken]``.
    Each reader reads its share from the epoch's turning point on, then from its start up to it
    (:func:`recipes.core.streams.turning_point`), so the lines one epoch drops the next one reads.

    Args:
        paths: a file, a glob (``*``, ``?``, ``[``) or a list of them, read in this order (a glob's
            files sorted by name): local paths or fsspec URLs
            (``s3://``, ``gs://``, ``https://``; see :mod:`recipes.core.sources.storage`); or Parquet
            (files, a glob, a ``datasets.Dataset``).
        tokenizer: a ``tokenizers.Tokenizer`` or the path of a ``tokenizer.json``.
        text_field, label_field: JSON fields for .jsonl files, columns for Parquet.
        max_length: keep at most this many ids per line, special tokens included, as the
            tokenizer's ``enable_truncation(max_length)`` cuts (the closing ``[SEP]``/``</s>`` stays;
            the tokenizer you pass is not changed). A long line is tokenised from a bounded prefix.
        pad_id: the padding id; None reads the tokenizer's padding config or its pad token.
        on_error: ``"raise"`` or ``"skip"``.
        storage_options: passed to fsspec for URL paths (endpoint, credentials); never shown.
        order: a :class:`recipes.core.StreamOrder`: the shuffle buffer, its seed
            (``(seed, epoch, slot)``; None draws one shared by all ranks), and a rank and world
            size to use instead of ``torch.distributed``'s.
        read_options: a :class:`recipes.core.ReadOptions`; this reads its
            ``truncation``, ``max_line_chars`` (a longer text is a DataError naming its byte
            offset), ``max_row_group_bytes`` and ``index_dir``: where the line index of .txt and
            .jsonl files is kept, so the next build of the same files reads none of them
            (:mod:`recipes.text.line_index`).

    A Parquet column of token-id lists streams without a tokenizer: :meth:`from_ids`.
    """

    turns = True  # a pass starts at its epoch's turning point (recipes.core.streams.turning_point)

    def _init_ids(
        self,
        paths: Any,
        tokenizer: Tokenizer | str | os.PathLike | None = None,
        *,
        order: StreamOrder | None = None,
        read_options: ReadOptions | None = None,
        **fields: Any,
    ) -> None:
        """:meth:`from_ids`'s setup, on the instance it makes."""
        options = checks.read_options_or_default(read_options, "StreamingTextDataset.from_ids", IDS_READ_OPTIONS)
        self._build(paths, tokenizer, order=streams.order_or_default(order, "StreamingTextDataset"), options=options,
                    **fields)

    def __init__(
        self,
        paths: str | os.PathLike | Sequence[str | os.PathLike] | Any,
        tokenizer: Tokenizer | str | os.PathLike | None = None,
        *,
        text_field: str = "text",
        label_field: str | None = None,
        max_length: int | None = None,
        pad_id: int | None = None,
        on_error: str = "raise",
        storage_options: dict[str, Any] | None = None,
        order: StreamOrder | None = None,
        read_options: ReadOptions | None = None,
    ) -> None:
        fields = {"text_field": text_field, "label_field": label_field, "storage_options": storage_options}
        self._build(paths, tokenizer, max_length=max_length, pad_id=pad_id, on_error=on_error,
                    order=streams.order_or_default(order, "StreamingTextDataset"),
                    options=checks.read_options_or_default(read_options, "StreamingTextDataset", TEXT_READ_OPTIONS),
                    **fields)

    @classmethod
    def from_ids(
        cls,
        paths: str | os.PathLike | Sequence[str | os.PathLike] | Any,
        tokenizer: Tokenizer | str | os.PathLike | None = None,
        *,
        ids_field: str = "input_ids",
        label_field: str | None = None,
        max_length: int | None = None,
        pad_id: int | None = None,
        on_error: str = "raise",
        storage_options: dict[str, Any] | None = None,
        order: StreamOrder | None = None,
        read_options: ReadOptions | None = None,
    ) -> StreamingTextDataset:
        """Stream a Parquet column of token-id lists, a row group at a time, instead of tokenising text.

        Ids, labels, ``pad_id``, ``max_length`` and the ids' bound as in
        :meth:`recipes.text.TokenizedTextDataset.from_ids` (with a tokenizer the cut keeps its
        special tokens, without one it slices); the same rows, order and state as the text column
        gives. The other keywords are the constructor's; ``read_options``: this reads its
        ``truncation``, ``max_row_group_bytes`` and ``vocab_size``.
        """
        return from_ids_instance(cls, cls._init_ids, paths, tokenizer, ids_field=ids_field, label_field=label_field,
                                 max_length=max_length, pad_id=pad_id, on_error=on_error,
                                 storage_options=storage_options, order=order, read_options=read_options)

    def _build(
        self,
        paths: Any,
        tokenizer: Tokenizer | str | os.PathLike | None,
        *,
        text_field: str = "text",
        label_field: str | None = None,
        max_length: int | None = None,
        pad_id: int | None = None,
        on_error: str = "raise",
        storage_options: dict[str, Any] | None = None,
        order: StreamOrder,
        options: ReadOptions,
        ids_field: str | None = None,
    ) -> None:
        shuffle_buffer, seed, rank, world_size = order.shuffle_buffer, order.seed, order.rank, order.world_size
        truncation, max_line_chars = options.truncation, options.max_line_chars
        self.storage_options, self.parquet = storage_options, parquet.is_parquet(paths)
        self.max_row_group_bytes = options.max_row_group_bytes
        if tokenizer is None and ids_field is None:
            raise ValueError("StreamingTextDataset needs a tokenizer to tokenise the text; pass one, or use "
                             "StreamingTextDataset.from_ids(...) to stream a Parquet column of token ids")
        if not self.parquet:
            paths = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
            self.paths = [path if storage.is_url(path) else Path(path) for path in paths]
            for path in self.paths:
                if ids_field is not None:
                    raise ValueError(
                        f"{storage.shown(path)}: ids_field streams a Parquet column of token-id lists, and a "
                        f"{storage.suffix(path)} file has no such column; write the ids to Parquet or pass a tokenizer"
                    )
                if check_format(storage.shown(path), STREAM_FORMATS) == ".txt" and label_field is not None:
                    raise ValueError(f"{storage.shown(path)}: a .txt file has no fields; label_field needs .jsonl files")
                if not storage.is_url(path) and not path.is_file() and not storage.has_glob(path):
                    raise FileNotFoundError(f"text file {path} does not exist")
        # the encoder (copies made once) cuts a text and the stored ids of ids_field alike, through a
        # batch-safe copy (recipes.core.tokenizing.batch_safe_tokenizer); the pad id is read from the
        # tokenizer as given, whose padding config that copy drops
        tokenizer = None if tokenizer is None else tokenizing.load_tokenizer(tokenizer)
        pad_id = pad_id if tokenizer is None else tokenizing.find_pad_id(tokenizer, pad_id)
        tokens = token_source(None if tokenizer is None else tokenizing.batch_safe_tokenizer(tokenizer),
                              max_length=max_length, truncation=truncation, pad_id=pad_id, ids_field=ids_field,
                              vocab_size=options.vocab_size, label_field=label_field, on_error=on_error)
        self.tokenizer, self.encoder, self.ids = tokens.tokenizer, tokens.encoder, tokens.ids
        self._pad_id = tokens.pad_id  # only padding needs it (pack_collate does not)
        # Files are listed and sized once per job, by rank 0, which sends the lists to the other
        # ranks (workers get them with the dataset): no listing or size request per rank or epoch.
        if self.parquet:  # .parquet files, a glob of them or a datasets.Dataset: sliced by rows

            def footers() -> tuple[list[Any], list[int], list[int | None]]:
                entries, listed = parquet.parquet_listing(paths, storage_options)  # sizes an object store lists
                # with ids_field, the ids' column type is checked from the same footer read
                wanted = {"text_field": text_field} if self.ids is None else {"ids_field": ids_field}
                check = None if self.ids is None else self.ids.check_footer
                return entries, *parquet.read_footers(entries, wanted | {"label_field": label_field}, storage_options,
                                              check=check, sizes=listed)

            # a datasets.Dataset is in each rank's memory already: nothing to list, nothing to send
            listed = not any(map(parquet.is_arrow_dataset, paths if isinstance(paths, (list, tuple)) else [paths]))
            found = ranks.shared_result(footers, rank, world_size) if listed else footers()
            self.paths, self.sizes, self.file_bytes = found
        else:  # equal shares by line count (recipes.text.line_index): one read of the files, on rank 0, or none
            indexed = functools.partial(LineIndex.of_files, self.paths, storage_options, options.index_dir)
            self.paths, self.sizes, self.lines = ranks.shared_result(indexed, rank, world_size)
        self.text_field, self.label_field, self.max_length = text_field, label_field, max_length
        self.max_chars = max_line_chars if max_length is None else None  # with max_length a line is read in part
        self.shuffle_buffer, self.on_error = shuffle_buffer, check_on_error(on_error)
        # what a state names as its data: offsets into these many files of this size
        source = f"{len(self.paths)} files, {sum(self.sizes)} {'rows' if self.parquet else 'bytes'}"
        super().__init__(seed, rank, world_size, source=source)

    def read_paths(self) -> list[Any]:
        """The files or URLs a pass reads (for :meth:`retries_made`)."""
        return list(self.paths)

    def batch_contract(self) -> dict[str, Any]:
        """What a mixed stream must share with this one (recipes.core.loading.mixing)."""
        return {"collate": "stream_collate", "pad_id": self._pad_id}

    @property
    def pad_id(self) -> int:
        """The id to pad with; a ValueError says what to do if the tokenizer has none."""
        return tokenizing.require_pad_id(self._pad_id, "StreamingTextDataset")

    def _max_taken(self, slots: int) -> int:
        return self.shuffle_buffer if self.shuffle_buffer > 1 else CHUNK_LINES  # lines a block holds

    def _check_position(self, position: list[Any], slots: int) -> None:
        """Refuse a resume offset (bytes, or Parquet rows) outside this rank's share of the files, and
        a block index that many blocks could not have come before (each line or row is a byte at least;
        a pass may start in the middle of a share, so it may have read the whole share before ``start``)."""
        owner, workers = type(self).__name__, slots // self.world_size
        low, high = self._share(self.rank * workers, slots)[0], self._share((self.rank + 1) * workers - 1, slots)[1]
        checks.check_int(position[1], "position[1] (offset)", owner, low, high - 1)
        checks.check_int(position[0], "position[0] (block)", owner, 0, (high - low) // self._max_taken(slots))

    def _blocks(self, slot: int, slots: int, epoch: int, resume: list[Any] | None) -> Iterator[tuple[int, int, Any]]:
        """One epoch of this slot's lines, in blocks of ``shuffle_buffer`` shuffled lines, tokenised a block at once."""
        if get_worker_info() is not None:
            # the workers are the parallelism: one Rust thread pool per worker would oversubscribe
            os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        first_block, begin, skip = resume if resume is not None else (0, None, 0)
        low, high = self._share(slot, slots)
        if begin is not None:  # the slot's own share: another reader's offset would read its lines twice
            checks.check_int(begin, f"position[1] (offset) of reader {slot}", type(self).__name__, low, high - 1)
        # from the epoch's turning point to the share's end, then from its start up to the turn
        if not self.cursor.turns:  # a run resumed from a state saved before passes turned: as it began
            turn = low
        elif self.parquet:
            turn = streams.turning_point(low, high, epoch)
        else:
            turn = self.lines.turn(slot, slots, epoch, self.paths, self.storage_options)
        first = turn if begin is None else begin
        runs = [(first, high), (low, turn)] if first >= turn else [(first, turn)]
        rng_of_block = streams.block_shuffler(self.cursor.seed, epoch, slot, slots, self.shuffle_buffer)
        rows = itertools.chain.from_iterable(self._run(a, b, resumed=a == begin) for a, b in runs if a < b)
        size = self.shuffle_buffer if self.shuffle_buffer > 1 else CHUNK_LINES
        for block, start, chunk in streams.shuffled_blocks(rows, size, rng_of_block, first_block):
            # a resumed block: its first lines were taken, and are not tokenised again
            yield block, start, encoded_items(chunk[skip if block == first_block else 0 :], self.ids, self.encoder,
                                              self.label_field)

    def _share(self, slot: int, slots: int) -> tuple[int, int]:
        """Reader ``slot``'s byte range: Parquet rows cut in equal slices; lines, an equal share by count."""
        if self.parquet:
            total = sum(self.sizes)
            return slot * total // slots, (slot + 1) * total // slots
        return self.lines.share(slot, slots, self.paths, self.storage_options)

    def _run(self, low: int, high: int, *, resumed: bool) -> Iterator[tuple[int, tuple]]:
        """``(offset, row)`` of each sample starting in ``[low, high)`` (bytes, or Parquet rows), part
        of one share; ``resumed``: ``low`` is a state's offset, where a line must start."""
        fields = {"text_field": self.text_field, "label_field": self.label_field, "max_chars": self.max_chars,
                  "on_error": self.on_error}
        if self.parquet:  # only the row groups holding rows low .. high - 1 are read
            rows = {"start": low, "stop": high, "storage_options": self.storage_options,
                    "max_row_group_bytes": self.max_row_group_bytes, "byte_sizes": self.file_bytes}
            if self.ids is not None:
                return id_rows(self.ids.chunks(self.paths, self.sizes, **rows), self.on_error)
            columns = [name for name in (self.text_field, self.label_field) if name is not None]
            records = ((row, where, None, record)
                       for row, where, record in parquet.iter_rows(self.paths, columns, self.sizes, **rows))
            return line_samples(records, **fields)
        owner = type(self).__name__  # the lines in that range (recipes.text.line_index)
        lines = self.lines.lines_in(low, high, self.paths, self.storage_options, resumed=resumed, owner=owner)
        return line_samples(lines, **fields)



def streaming_loader(
    dataset: StreamingTextDataset,
    batch_size: int,
    *,
    train: bool = True,
    device: str | torch.device | None = None,
    seed: int | None = None,
    stateful: bool = False,
    collate_fn: Any = None,
    **overrides: Any,
) -> DataLoader:
    """A DataLoader preset for :class:`StreamingTextDataset` (batches in stream order).

    Args:
        dataset: the stream; it shards itself across the workers and ranks.
        batch_size: lines per batch (a worker's last batch may be short unless ``train``).
        train: drop each worker's last partial batch.
        device, seed: see :func:`recipes.core.loader_kwargs`.
        stateful: a ``StatefulDataLoader`` whose ``state_dict()`` resumes mid-epoch exactly: the
            same batches as an uninterrupted run, with the same ranks and workers.
        collate_fn: used as given (``pack_collate`` packs). Default: the collate the stream asks for
            (its ``batch_contract()``'s ``"collate"``, :func:`recipes.core.hooks.collate_of`: a mixture's sources' one), else
            :class:`StreamCollate` with its pad id (:class:`recipes.core.hooks.PadsIds`).
        overrides: DataLoader keyword arguments (``num_workers=0``, ...).
    """
    collate = hooks.UsualCollate(stream_collate_for) if collate_fn is None else collate_fn
    return build_loader(dataset, collate, batch_size=batch_size, train=train, device=device, seed=seed,
                        stateful=stateful, **overrides)
