"""The domain as the command line runs it: ``recipes demo audio`` (the fixture clip folder through
the training preset) and the folder or manifest ``recipes bench/show audio PATH`` open.

    from recipes.audio.demo import build
    dataset, loader = build(fixtures_dir())
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch.utils.data import DataLoader, Dataset

from recipes.audio import AudioFolderDataset, SpeechDataset, audio_loader


def build(fixtures: Path) -> tuple[AudioFolderDataset, DataLoader]:
    """An AudioFolderDataset over ``audio/folder/`` (3 classes, 11 clips: WAV, float WAV, FLAC,
    MP3, Ogg Vorbis and Opus at 8 to 48 kHz, mono and stereo, a nested folder and an ignored text
    file), mono at 16 kHz, seeded random 0.5 s crops, and a seeded CPU loader of duration-grouped
    batches of 4 (training drops the last 3 clips)."""
    dataset = AudioFolderDataset(fixtures / "audio" / "folder", sample_rate=16000, clip_seconds=0.5)
    return dataset, audio_loader(dataset, 4, device="cpu", seed=0, num_workers=0)


def open_path(options: Any, *, train: bool) -> Dataset:
    """What ``options.path`` (the CLI's ``DataOptions``) holds, mono at 16 kHz: a folder of class
    folders as an AudioFolderDataset (cut to ``options.clip_seconds`` if given: a random window when
    ``train``, as the loader serves it, else the centre one), or a manifest (.jsonl / .csv / .parquet)
    as a SpeechDataset, tokenised with ``--tokenizer`` or a ``tokenizer.json`` beside it if there is
    one, else transcripts only; ``options.max_seconds`` is each clip's limit."""
    max_seconds = options.max_seconds
    if options.path.is_dir():
        return AudioFolderDataset(options.path, on_error=options.on_error, clip_seconds=options.clip_seconds,
                                  random_crop=train, max_seconds=max_seconds)
    tokenizer = options.tokenizer
    beside = options.path.parent / "tokenizer.json"
    if tokenizer is None and beside.is_file():
        tokenizer = beside
    return SpeechDataset(
        options.path, tokenizer, text_field=options.text_field, max_length=options.max_length,
        on_error=options.on_error, max_seconds=max_seconds,
    )


def prepare_path(source: Path, dest: Path, *, sample_rate: int = 16000, keep_channels: bool = False,
                 format: str = "flac", audio_root: Path | None = None, **run: Any) -> tuple[Any, str]:
    """``recipes prepare audio MANIFEST DEST``: :func:`recipes.audio.prepare`, and how to read what it wrote."""
    from recipes.audio.prepare_shards import prepare

    summary = prepare(source, dest, sample_rate=sample_rate, num_channels=None if keep_channels else 1,
                      format=format, audio_root=audio_root, **run)
    channels = ", num_channels=None" if keep_channels else ""
    return summary, f"recipes.audio.AudioShards({str(dest)!r}, tokenizer, sample_rate={sample_rate}{channels})"
