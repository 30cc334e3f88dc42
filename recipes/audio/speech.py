"""Speech recognition data: clips with transcripts from a manifest, tokenised by the text rules.

    dataset = SpeechDataset("train_manifest.jsonl", "tokenizer.json", sample_rate=16000, max_seconds=30)
    loader = audio_loader(dataset, max_seconds=320, device="cuda", seed=0)   # a seconds budget per batch
    for batch in DevicePrefetcher(loader, "cuda"):   # audio [B,T], audio_lengths, input_ids [B,L], lengths, ...
        loss = ctc_loss(model(batch["audio"]), batch["input_ids"], out_lengths, batch["lengths"])

Sources: a JSONL manifest (NeMo's ``{"audio_filepath", "duration", "text"}`` or ``{"audio",
"text"}``), a CSV with a header, Parquet or a Hugging Face ``datasets.Dataset`` whose audio column
holds ``Audio`` structs ``{"bytes", "path"}`` (or paths). Paths are relative to ``audio_root``
(default: the manifest's folder); one that leaves it is refused. Durations
(``read_options=ReadOptions(durations=...)``): ``"headers"``, the default, reads each clip's header
once, at build (:mod:`recipes.audio.speech_index`: threads, and ``index_dir`` keeps them for the next
build), and a manifest ``duration`` that disagrees with it is a :class:`ManifestDurationWarning`
naming the row (strict: ``warnings.simplefilter("error", ManifestDurationWarning)``);
``"manifest"`` takes the manifest's durations and opens no clip until it is decoded, where a clip
that decodes to another length is a DataError naming row and clip (``on_error="skip"``: skipped with
a warning). Transcripts are tokenised once, at construction, with the tokenizer's truncation
(special tokens kept), as ``TokenizedTextDataset`` does. How the rows are resolved, read and checked
at construction: :mod:`recipes.audio.speech_build`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import Dataset

from recipes.audio.decoding import audio_options, decode
from recipes.audio.speech_build import ClipPaths, build_index, kept_columns, kept_rows, refresh_index
from recipes.audio.speech_index import HeaderIndex
from recipes.audio.speech_rows import manifest_rows, table_rows
from recipes.core import (
    DataError,
    ReadOptions,
    SkippedRows,
    caches,
    check_on_error,
    checks,
    skip_or_raise,
    storage,
    tokenizing,
)

SPEECH_READ_OPTIONS = ("durations", "index_dir", "num_channels")  # what SpeechDataset reads of its ReadOptions
INDEX_VERSION = 1  # part of an index's key: bump when what it keeps changes


class SpeechDataset(Dataset):
    """Clips and transcripts -> ``{"audio" float32 [C, N], "input_ids" int64 [L], "text" str, "index" int}``.

    Args:
        source: a ``.jsonl`` or ``.csv`` manifest, a ``.parquet`` file, or a ``datasets.Dataset``.
        tokenizer: a ``tokenizers.Tokenizer`` or a tokenizer.json path; None: no ``input_ids``.
        sample_rate: every clip is resampled to this rate.
        text_field: the transcript's field or column.
        audio_field: the clip's field or column (a path, or an ``Audio`` struct in Parquet); a
            JSONL row without it may use NeMo's ``audio_filepath``.
        max_seconds: the per-sample limit that bounds memory (default :data:`MAX_SECONDS`); a
            longer clip is a DataError at construction (``on_error="skip"``: left out).
        max_length: keep at most this many ids per transcript, special tokens included.
        on_error: ``"raise"`` or ``"skip"``: a row that does not parse, a transcript that is not
            UTF-8 or not a string, a clip that cannot be read or that decodes to another length
            than its row says; named by file and line (or row).
        audio_root: the folder paths are relative to (default: the manifest's folder).
        read_options: a :class:`recipes.core.ReadOptions`; this reads its ``durations``
            (``"headers"`` or ``"manifest"``: see the module docstring; docs/audio.md says when each
            fits), ``index_dir`` (each clip's header kept for the next build of the same manifest,
            read again for a clip whose size or modification time changed) and ``num_channels``
            (1, the default, mixes to mono, the mean of the channels; None keeps each file's).
    """

    fixed_point = False  # True: 16-bit PCM at the target rate as its int16 samples (audio_loader's view)

    def __init__(
        self,
        source: str | os.PathLike | Any,
        tokenizer: Any = None,
        *,
        sample_rate: int = 16000,
        text_field: str = "text",
        audio_field: str = "audio",
        max_seconds: float | None = None,
        max_length: int | None = None,
        on_error: str = "raise",
        audio_root: str | os.PathLike | None = None,
        read_options: ReadOptions | None = None,
    ) -> None:
        options = checks.read_options_or_default(read_options, "SpeechDataset", SPEECH_READ_OPTIONS)
        self.sample_rate, self.num_channels, self.max_seconds = audio_options(
            "SpeechDataset", sample_rate=sample_rate, num_channels=options.num_channels, max_seconds=max_seconds)
        self.on_error = check_on_error(on_error)
        self.durations_from = options.durations
        checks.check_count("max_length", max_length, owner="SpeechDataset")
        table = _is_table(source)
        self._under: storage.UnderRoot | None = None  # the folders source() has resolved
        with SkippedRows("") as skipped:
            if table:
                self.name, rows = table_rows(source, audio_field, text_field)
                root = audio_root
            else:
                self.name = storage.shown(source)
                root = Path(source).parent if audio_root is None else audio_root
            self.audio_root = None if root is None else os.fspath(root)
            self.clips = ClipPaths(self.name, "row" if table else "line", self.audio_root)
            skipped.name = self.name
            key = None
            if not table and options.index_dir is not None and self.durations_from == "headers":
                key = [INDEX_VERSION, caches.file_identities([source]), os.path.abspath(self.audio_root), audio_field,
                       text_field]
            index = None if key is None else HeaderIndex.load(options.index_dir, key)
            if index is not None:
                errors = refresh_index(index, self.clips, options.index_dir, key)
                raw: dict[int, Any] = {}
            else:
                rows = rows if table else manifest_rows(source, audio_field, text_field, on_error)
                index, errors = build_index(rows, self.clips, headers=self.durations_from == "headers",
                                            identify=key is not None)
                raw = rows.raw
                if key is not None and rows.clean:
                    index.save(options.index_dir, key)
            kept = kept_rows(index, errors, raw, self.clips, max_seconds=self.max_seconds,
                             headers=self.durations_from == "headers", on_error=self.on_error)
            skipped.check(int(kept.sum()))
        self._refs, self.texts, self.places, self.durations = kept_columns(index, kept)
        self.tokens, self._pad_id = None, None
        if tokenizer is not None:
            tokenizer = tokenizing.load_tokenizer(tokenizer)
            encoder = tokenizing.TruncatingEncoder(tokenizer, max_length)
            self.tokens = tokenizing.encode_texts(encoder, list(self.texts))  # read once
            self._pad_id = tokenizing.find_pad_id(tokenizer)

    @property
    def pad_id(self) -> int | None:
        """The id ``audio_collate`` pads transcripts with (the tokenizer's; None without one)."""
        return self._pad_id if self._pad_id is not None or self.tokens is None else 0

    def source(self, index: int) -> str | bytes:
        """Sample ``index``'s clip as the decoder takes it: its path (under ``audio_root``, checked again
        as it is opened: the folders once a process, the file itself each time) or its bytes."""
        if self._under is None and self.audio_root is not None:
            self._under = storage.UnderRoot(self.audio_root)  # built where it is used: each worker resolves its own
        return self.clips.resolve(self._refs[index], int(self.places[index]), self._under)

    def describe(self, index: int) -> str:
        """Where sample ``index`` comes from, for messages: manifest line (or row) and clip."""
        return self.clips.describe(int(self.places[index]), self._refs[index])

    def state_source(self) -> str:
        """What a loader state names as this data: the manifest's file name, the clip count and a
        digest of the durations (which the duration plans batch by)."""
        return f"{storage.basename(self.name)}: {len(self)} clips, durations {checks.sampled_digest(self.durations)}"

    def batch_contract(self) -> dict[str, Any]:
        """What a mixed dataset must share with this one (recipes.core.loading.mixing)."""
        return {"collate": "audio_collate", "sample_rate": self.sample_rate, "num_channels": self.num_channels,
                "pad_id": self._pad_id, "per_sample": ("durations",)}

    def __len__(self) -> int:
        return len(self.durations)

    def read_audio(self, index: int) -> torch.Tensor:
        """Sample ``index``'s clip, float32 ``[C, N]`` (int16 ``FixedPoint`` where :attr:`fixed_point` keeps
        16-bit PCM: :func:`recipes.audio.folder.fixed_point_view`), its length checked against
        :attr:`durations`; override to read from elsewhere."""
        told = "the manifest" if self.durations_from == "manifest" else "its header"
        return decode(self.source(index), self.describe(index), sample_rate=self.sample_rate,
                      num_channels=self.num_channels, max_seconds=self.max_seconds,
                      expected=float(self.durations[index]), expected_from=told, fixed_point=self.fixed_point)

    def __getitem__(self, index: int) -> dict[str, Any] | None:
        try:
            audio = self.read_audio(index)
        except DataError as error:
            return skip_or_raise(error, self.on_error)
        item: dict[str, Any] = {"audio": audio, "text": self.texts[index], "index": int(index)}
        if self.tokens is not None:
            item["input_ids"] = self.tokens.tensor(index)
        return item

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, {len(self)} clips, {self.durations.sum():.1f} s)"


def _is_table(source: Any) -> bool:
    return not isinstance(source, (str, os.PathLike)) or os.fspath(source).endswith(".parquet")
