"""Clips and transcripts streamed from WebDataset-style tar shards, split across ranks and workers.

    shards = AudioShards("s3://bucket/speech/shard-{000000..000511}.tar", "tokenizer.json",
                         sample_rate=16000, order=StreamOrder(shuffle_buffer=1000, seed=0))
    loader = audio_loader(shards, batch_size=32, device="cuda", stateful=True)

A sample is the consecutive members that share a key: ``000042.flac`` (or ``.wav``, ``.mp3``,
``.ogg``, ``.opus``) and its transcript, ``000042.txt`` or ``000042.json`` with ``"text"``.
Shards are local paths or fsspec URLs, plain or gzip/bzip2/xz compressed, grouped into samples by
:func:`recipes.core.streams.read_samples`: one sequential stream from the byte where a pass
resumes, never extracted to disk; member names that climb out are refused, links passed over,
members over :data:`MAX_MEMBER_BYTES` refused before they are read, a key with two members of
one extension or a key that comes back after other samples refused. Each epoch the samples of the
shards (in an order shuffled by ``(seed, epoch)`` with a ``shuffle_buffer``) are cut into ``world_size
x num_workers`` runs equal by count (:mod:`recipes.core.sources.shard_index`: one walk of the headers at
construction, on rank 0, or the ``manifest.json`` of a folder ``recipes prepare audio`` wrote); a
state holds each reader's shard and byte offset (:class:`recipes.core.ResumableStream`), never
data. Build it after ``init_process_group``.
"""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from recipes.audio.decoding import audio_options, decode
from recipes.core import (
    DataError,
    StreamOrder,
    check_on_error,
    ranks,
    skip_or_raise,
    storage,
    streams,
    tokenizing,
)

AUDIO_MEMBERS = ("flac", "wav", "mp3", "ogg", "opus")  # a sample's clip, in order of preference
# A member is read whole into memory, whatever its header claims: 256 MiB is 10 minutes of 48 kHz
# stereo 32-bit WAV, MAX_SECONDS of the largest uncompressed clip there is reason to ship.
MAX_MEMBER_BYTES = 256 * 2**20


class AudioShards(streams.ShardStream):
    """Iterate ``{"audio" float32 [C, N], "text" str, "input_ids" int64 [L] (with a tokenizer), "key" str}``.

    Args:
        urls: the shards: a list, a folder (its ``*.tar``), a ``{000..099}`` range or a glob
            (:func:`recipes.core.streams.expand_shards`).
        tokenizer: a ``tokenizers.Tokenizer`` or tokenizer.json path; None: no ``input_ids``.
        sample_rate: every clip is resampled to this rate.
        num_channels: 1 mixes to mono (the mean of the channels), None keeps each file's.
        max_seconds: the per-sample limit that bounds memory (default :data:`MAX_SECONDS`).
        max_length: keep at most this many ids per transcript, special tokens included.
        on_error: ``"raise"`` a DataError naming the shard and member, or ``"skip"`` the sample
            (a shard that cannot be read: the rest of it) with a warning.
        storage_options: passed to fsspec for URL shards; never shown.
        order: a :class:`recipes.core.StreamOrder`: ``shuffle_buffer`` samples held
            for shuffling (0: shards and samples in order), the shuffling ``seed`` shared by all
            ranks (None draws one), and a rank and world size to use instead of ``torch.distributed``'s.
    """

    fixed_point = False  # True: 16-bit PCM at the target rate as its int16 samples (audio_loader's view)

    def __init__(
        self,
        urls: str | os.PathLike | Sequence[str | os.PathLike],
        tokenizer: Any = None,
        *,
        sample_rate: int = 16000,
        num_channels: int | None = 1,
        max_seconds: float | None = None,
        max_length: int | None = None,
        on_error: str = "raise",
        storage_options: dict[str, Any] | None = None,
        order: StreamOrder | None = None,
    ) -> None:
        self.sample_rate, self.num_channels, self.max_seconds = audio_options(
            "AudioShards", sample_rate=sample_rate, num_channels=num_channels, max_seconds=max_seconds)
        order = streams.order_or_default(order, "AudioShards")
        shuffle_buffer, seed = order.shuffle_buffer, order.seed
        self.storage_options = storage_options
        # listed and indexed once per job: on rank 0, sent to the others (recipes.core.sources.shard_index)
        self.shards, self.index = ranks.shared_result(lambda: listed_and_indexed(urls, storage_options), order.rank,
                                                      order.world_size)
        self.shuffle_buffer = shuffle_buffer
        self.on_error = check_on_error(on_error)
        self.encoder, self.pad_id = None, None
        if tokenizer is not None:
            tokenizer = tokenizing.load_tokenizer(tokenizer)
            self.encoder = tokenizing.TruncatingEncoder(tokenizer, max_length)
            self.pad_id = tokenizing.find_pad_id(tokenizer)
        source = f"{len(self.shards)} shards {zlib.crc32(chr(10).join(map(storage.basename, self.shards)).encode()):08x}"
        super().__init__(seed, order.rank, order.world_size, source=source)
        self.epochs = streams.ShardEpochs(self.index, shuffle_buffer, type(self).__name__)  # how a pass reads them

    def batch_contract(self) -> dict[str, Any]:
        """What a mixed stream must share with this one (recipes.core.loading.mixing)."""
        return {"collate": "audio_collate", "sample_rate": self.sample_rate, "num_channels": self.num_channels,
                "pad_id": self.pad_id}

    def _read(self, numbers: list[int], start: Any) -> Iterator[tuple[list[int], Any]]:
        return streams.read_samples([self.shards[number] for number in numbers], start,
                                    max_member_bytes=MAX_MEMBER_BYTES, storage_options=self.storage_options,
                                    on_error=self.on_error)

    def _items(self, shard: str, key: str, files: dict[str, bytes], epoch: int) -> list[dict[str, Any]]:
        """A sample's item, none when it is skipped (:meth:`_item`)."""
        item = self._item(shard, key, files)
        return [] if item is None else [item]

    def _item(self, shard: str, key: str, files: dict[str, bytes]) -> dict[str, Any] | None:
        """A sample's item, or None when it is skipped (a warning names the shard and key)."""
        where = f"{storage.shown(shard)}:{key}"
        try:
            extension = next((e for e in AUDIO_MEMBERS if e in files), None)
            if extension is None:
                raise DataError(f"{where}: no audio member ({'/'.join(AUDIO_MEMBERS)}) among {sorted(files)}")
            text = sample_transcript(files, where)
            audio = decode(files[extension], f"{where}.{extension}", sample_rate=self.sample_rate,
                           num_channels=self.num_channels, max_seconds=self.max_seconds,
                           fixed_point=self.fixed_point)
        except DataError as error:
            return skip_or_raise(error, self.on_error)
        item: dict[str, Any] = {"audio": audio, "text": text, "key": f"{storage.basename(shard)}/{key}"}
        if self.encoder is not None:
            item["input_ids"] = torch.tensor(self.encoder([text])[0], dtype=torch.int64)
        return item


def sample_transcript(files: dict[str, bytes], where: str) -> str:
    """The transcript of one shard sample, from its ``files`` (member extension -> bytes): the
    stripped UTF-8 text of ``txt``, else the ``"text"`` of ``json``. Raises a :class:`DataError`
    that starts with ``where`` (``"shard:key"``) when there is none or it does not read;
    ``recipes check audio`` reads shards with it too."""
    try:
        if "txt" in files:
            text = files["txt"].decode("utf-8").strip()
        elif "json" in files:
            meta = json.loads(files["json"])
            text = meta.get("text") if isinstance(meta, dict) else None
        else:
            raise DataError(f"{where}: no transcript (.txt, or .json with 'text') among {sorted(files)}")
    except (ValueError, RecursionError) as error:
        raise DataError(f"{where}: unreadable transcript ({type(error).__name__}: {str(error)[:100]})") from None
    if not isinstance(text, str):
        raise DataError(f"{where}: the transcript is not a string ({str(text)[:60]!r})")
    return text


def listed_and_indexed(urls: Any, storage_options: dict[str, Any] | None) -> tuple[list[str], streams.ShardIndex]:
    """The shard list and where each shard's samples start: one walk of the headers, or the
    ``manifest.json`` of a folder ``recipes prepare audio`` wrote (no shard opened)."""
    return streams.listed_shards(urls, storage_options, max_member_bytes=MAX_MEMBER_BYTES)
