"""A training-ready copy of a speech manifest: each clip decoded once, resampled to one rate, checked
against its manifest duration and written as 16-bit FLAC (or WAV) beside its transcript, in the
shards :class:`AudioShards` reads, with a manifest.

    summary = prepare("train_manifest.jsonl", "prepared/", sample_rate=16000, workers=16)
    print(summary)                                     # written, skipped and why, bytes, PSNR, time
    shards = AudioShards("prepared/", "tokenizer.json", sample_rate=16000)

The manifest is read as :class:`SpeechDataset` reads it (JSONL, CSV or Parquet; clip paths under
``audio_root``, default its folder). A manifest that gives every row's ``duration`` is trusted for
it until the clip is decoded, where a clip that decodes to another length is refused, named; one
without durations has its clips' headers read first (``ReadOptions(durations="headers")``). Each
clip is decoded as the loaders decode it (:func:`recipes.audio.decode`: resampled to
``sample_rate``, mixed to mono with ``num_channels=1`` or kept with None) and its samples rounded to
16 bits: a 16-bit clip already at the rate and channel count keeps its samples exactly, and the
others report the PSNR of the rounding against the float decode. Every later epoch reads PCM at
the target rate, which ``soundfile`` decodes without resampling.

The shards are written as every domain's ``prepare`` writes them (:func:`recipes.core.streams.write_prepared`):
byte-identical for any ``workers``, resumed by the same call after a stop at any point, a destination
of other options refused unless ``overwrite=True``, and ``manifest.json`` with each shard's sha256.
"""

from __future__ import annotations

import io
import json
import math
import os
from typing import Any
import warnings

import torch

from recipes.audio.decoding import MAX_SECONDS, audio_options, decode
from recipes.audio.speech import SpeechDataset
from recipes.audio.speech_rows import manifest_rows, table_rows
from recipes.core import DataError, ReadOptions, streams

__all__ = ["FORMATS", "encode_clip", "prepare"]

FORMATS = {"flac": "FLAC", "wav": "WAV"}  # what prepare writes: 16-bit PCM, in libsndfile's containers


def prepare(
    source: str | os.PathLike,
    dest: str | os.PathLike,
    *,
    sample_rate: int = 16000,
    num_channels: int | None = 1,
    format: str = "flac",
    samples_per_shard: int = 1000,
    audio_root: str | os.PathLike | None = None,
    workers: int | None = None,
    on_error: str = "raise",
    overwrite: bool = False,
    progress: bool = True,
    storage_options: dict[str, Any] | None = None,
) -> streams.PrepareSummary:
    """Write the speech manifest ``source`` as shards of 16-bit clips at ``sample_rate``, each beside
    its transcript (see the module docstring).

    Args:
        source: a local ``.jsonl``, ``.csv`` or ``.parquet`` manifest, as :class:`SpeechDataset` takes it.
        dest: the folder to write (made if missing): ``shard-000000.tar``, ..., ``manifest.json``.
        sample_rate: every clip is resampled to this rate.
        num_channels: 1 mixes to mono (the mean of the channels), None keeps each file's.
        format: ``"flac"`` (lossless, about half the bytes) or ``"wav"``.
        samples_per_shard, workers, on_error, overwrite, progress, storage_options: as :func:`recipes.vision.prepare`
            takes them; a row that does not parse, a clip that does not read or that decodes to
            another length than its row says is named (``on_error="skip"``: left out and counted).
        audio_root: the folder the manifest's clip paths are relative to (default: its folder).
    """
    sample_rate, num_channels, _ = audio_options("prepare", sample_rate=sample_rate, num_channels=num_channels,
                                                 max_seconds=None)
    if format not in FORMATS:
        raise ValueError(f"format must be one of {sorted(FORMATS)}, got {format!r}")
    _soundfile()  # before any work: the writer is there
    streams.local_folder(source, "prepare")
    durations = "manifest" if _states_every_duration(source) else "headers"
    with streams.collect_skips() as dropped:  # rows that do not parse, clips that do not open: named in the summary
        dataset = SpeechDataset(source, sample_rate=sample_rate, on_error=on_error, audio_root=audio_root,
                                read_options=ReadOptions(durations=durations, num_channels=num_channels))
    told = "the manifest" if durations == "manifest" else "its header"
    rows = [(f"{row:09d}", dataset.describe(row),
             (dataset.source(row), dataset.texts[row], float(dataset.durations[row]), told))
            for row in range(len(dataset))]
    rows += [(None, None, error) for error in dropped]
    options = {"sample_rate": sample_rate, "num_channels": num_channels, "format": format}
    return streams.write_prepared(
        dest, rows, encode_clip, domain="audio", options=options, source=source,
        run=streams.PrepareRun(samples_per_shard, workers, on_error, overwrite, progress,
                               storage_options=storage_options),
    )


def encode_clip(payload: tuple[str | bytes, str, float, str], where: str, options: dict[str, object]) -> tuple[
        list[tuple[str, bytes]], float | None, int]:
    """A row's members (its clip as 16-bit ``options["format"]`` at ``options["sample_rate"]``, its
    transcript), the PSNR of the rounding to 16 bits (None where it changed no sample) and bytes read."""
    clip, text, expected, told = payload
    audio = decode(clip, where, sample_rate=options["sample_rate"], num_channels=options["num_channels"],
                   max_seconds=MAX_SECONDS, expected=expected, expected_from=told)
    samples = (audio * 32768).round_().clamp_(-32768, 32767).to(torch.int16)
    error = float((samples.double() / 32768 - audio.double()).square().mean())
    psnr = None if error == 0 else 10 * math.log10(1 / error)  # peak 1: samples in [-1, 1]
    encoded = io.BytesIO()
    _soundfile().write(encoded, samples.T.numpy(), options["sample_rate"], format=FORMATS[options["format"]],
                       subtype="PCM_16")
    transcript = ("txt", text.encode()) if text == text.strip() else ("json", json.dumps({"text": text}).encode())
    read = len(clip) if isinstance(clip, bytes) else os.path.getsize(clip)
    return [(options["format"], encoded.getvalue()), transcript], psnr, read


def _states_every_duration(source: str | os.PathLike) -> bool:
    """Whether every row of the manifest gives a duration (then its clips' headers need not be read)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a line that does not parse: SpeechDataset names it
            rows = table_rows(source, "audio", "text")[1] if os.fspath(source).endswith(".parquet") else \
                manifest_rows(source, "audio", "text", "skip")
    except DataError:
        return False  # SpeechDataset names what is wrong with it
    return len(rows.stated) > 0 and all(seconds > 0 for seconds in rows.stated)


def _soundfile():
    try:
        import soundfile  # the audio extra: libsndfile writes the 16-bit FLAC and WAV
    except (ImportError, OSError) as error:
        raise ImportError("recipes.audio.prepare writes 16-bit FLAC and WAV with soundfile (the audio extra): "
                          "pip install soundfile") from error
    return soundfile
