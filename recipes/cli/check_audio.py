"""``recipes check audio PATH``: every clip of an audio folder, a speech manifest or tar shards decoded once.

    report = check_audio(Path("speech_commands/train"), workers=2)
    report = check_audio(Path("train_manifest.jsonl"), max_seconds=30)
    report = check_audio(Path("shards/"))   # its *.tar, as AudioShards reads them

The dataset is built as the loaders build it, with ``on_error="skip"``: what its index refuses (a
missing file, a header out of range or over the per-sample limit, a transcript that does not
decode) becomes a problem named by file and line. Each clip it keeps is then decoded whole at its
own sample rate, through the same :func:`recipes.audio.decoding.decode` the loaders use, and its
decoded length compared with its header's duration (within the decoder's tolerance): a file that
passes here loads in training. The summary gives clip count, hours, durations, sample rates,
channel counts and codecs, and which library decodes which files
(:func:`recipes.audio.decoding.decoders`); ``--json`` lists each clip's header and decoded seconds.
Shards (a ``.tar`` file, or a folder of them and nothing else) are read one at a time as
:class:`recipes.audio.AudioShards` reads them: bad members, samples without a clip and
transcripts that do not decode are problems named by shard and key.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from recipes.audio import AUDIO_EXTENSIONS, AudioFolderDataset, SpeechDataset
from recipes.audio.decoding import MAX_SECONDS, decode, decoders, probe
from recipes.audio.shards import AUDIO_MEMBERS, MAX_MEMBER_BYTES, sample_transcript
from recipes.cli.check_files import check_manifest
from recipes.cli.report import Problem, Report, counts
from recipes.cli.worker_pool import map_in_workers
from recipes.core.contracts.errors import DataError, SkippedSampleWarning
from recipes.core.contracts.read_options import ReadOptions
from recipes.core.sources.storage import shown
from recipes.core.sources.tar_samples import expand_shards, is_shards, read_samples

INLINE_BELOW = 32  # fewer clips than this are decoded in this process: a pool costs more to start


class ClipInfo(NamedTuple):
    """One clip: what its header says, how long it decodes to, or the error."""

    name: str
    header_seconds: float = 0.0
    decoded_seconds: float = 0.0
    sample_rate: int = 0
    channels: int = 0
    codec: str = ""
    error: str | None = None


def inspect_clip(item: tuple[str | bytes, str, float]) -> ClipInfo:
    """Header and whole decode of one clip; ``item`` is ``(path or bytes, name, max_seconds)``."""
    source, name, max_seconds = item
    try:
        info = probe(source, name)
        audio = decode(source, name, sample_rate=info.sample_rate, num_channels=None, max_seconds=max_seconds,
                       expected=info.duration)
    except DataError as error:
        return ClipInfo(name, error=str(error))
    return ClipInfo(name, info.duration, audio.shape[-1] / info.sample_rate, info.sample_rate, info.num_channels,
                    info.codec)


def inspect_clips(items: Sequence[tuple[Any, str, float]], *, workers: int | None = None,
                  progress: bool = True) -> list[ClipInfo]:
    """:func:`inspect_clip` over ``items`` in ``workers`` processes (default: the usable CPUs), in order."""
    return map_in_workers(inspect_clip, items, workers=workers, progress=progress, desc="decoding clips", unit="clip",
                          inline_below=INLINE_BELOW, max_chunksize=256)


def check_audio(path: Path, *, text_field: str = "text", max_seconds: float | None = None,
                workers: int | None = None, progress: bool = True) -> Report:
    """An audio folder (``PATH/<class>/**/<clip>``), a speech manifest (.jsonl / .csv / .parquet) or
    tar shards: the index as the loaders build it, then every clip it keeps decoded; ``max_seconds``
    is each clip's limit (default :data:`MAX_SECONDS`); see the module docstring."""
    max_seconds = MAX_SECONDS if max_seconds is None else max_seconds
    if is_shards(path):
        return check_shards(path, max_seconds=max_seconds, workers=workers, progress=progress)
    report = Report("audio", str(path))
    report.summary["decoders"] = decoders()
    try:
        with _skipped_as_problems(report):
            if path.is_dir():
                dataset: Any = AudioFolderDataset(path, on_error="skip", num_channels=None, max_seconds=max_seconds)
            else:
                dataset = SpeechDataset(path, text_field=text_field, on_error="skip", max_seconds=max_seconds,
                                        read_options=ReadOptions(num_channels=None))
    except (DataError, ValueError, FileNotFoundError) as error:  # nothing to index: one problem says why
        report.problems.append(_problem(str(error)))
        if not path.is_dir():
            return report
        # a folder without class folders: its clips are checked as they are
        sources = sorted(str(file) for file in path.rglob("*") if file.is_file() and file.suffix.lower() in AUDIO_EXTENSIONS)
        summarize_clips(report, inspect_clips([(source, source, max_seconds) for source in sources],
                                              workers=workers, progress=progress))
        return report
    if path.is_dir():
        sources = [dataset.path(index) for index in range(len(dataset))]
        report.summary["classes"] = counts(dataset.classes[label] for label in dataset.labels.tolist())
    else:
        sources = [dataset.source(index) for index in range(len(dataset))]
        report.summary["transcripts"] = f"{len(dataset)}, {sum(len(text.split()) for text in dataset.texts):,} words"
    names = [dataset.describe(index) for index in range(len(dataset))]
    infos = inspect_clips([(source, name, max_seconds) for source, name in zip(sources, names)],
                          workers=workers, progress=progress)
    summarize_clips(report, infos)
    return report


def check_shards(path: Path, *, max_seconds: float, workers: int | None = None, progress: bool = True) -> Report:
    """Every sample of the shards at ``path``, one shard in memory at a time: its clip decoded, its
    transcript read; what a reader refuses (a member too large or climbing out, a key twice) a problem."""
    report = Report("audio", str(path))
    report.summary["decoders"] = decoders()
    shards = expand_shards(str(path))
    infos, words = [], 0
    for shard in shards:
        items = []
        with _skipped_as_problems(report):
            for _, (_, key, files) in read_samples([shard], max_member_bytes=MAX_MEMBER_BYTES, on_error="skip"):
                where = f"{shown(shard)}:{key}"  # as AudioShards names a sample
                extension = next((e for e in AUDIO_MEMBERS if e in files), None)
                try:
                    words += len(sample_transcript(files, where).split())
                    if extension is None:
                        raise DataError(f"{where}: no audio member ({'/'.join(AUDIO_MEMBERS)}) among {sorted(files)}")
                except DataError as error:
                    report.problems.append(_problem(str(error)))
                if extension is not None:
                    items.append((files[extension], f"{where}.{extension}", max_seconds))
        infos += inspect_clips(items, workers=workers, progress=progress)
    report.summary["shards"] = len(shards)
    check_manifest(report, path)  # a folder recipes prepare wrote: each shard against its sha256
    report.summary["transcripts"] = f"{len(infos)} samples, {words:,} words"
    summarize_clips(report, infos)
    return report


def summarize_clips(report: Report, infos: Sequence[ClipInfo]) -> None:
    """Add counts, durations, rates, channels and codecs of the decoded clips to ``report``, and a
    problem for each clip that failed (its message names the file, and the line of a manifest)."""
    good = [info for info in infos if info.error is None]
    report.summary["decoded"] = f"{len(good)} of {len(infos)} clips"
    if good:
        seconds = np.array([info.decoded_seconds for info in good])
        report.summary["duration"] = (f"{seconds.sum() / 3600:.3f} h in all; min {seconds.min():.2f} s, "
                                      f"median {np.median(seconds):.2f} s, max {seconds.max():.2f} s")
        drift = np.abs(seconds - np.array([info.header_seconds for info in good]))
        report.summary["header vs decoded"] = f"largest difference {drift.max() * 1000:.1f} ms"
        report.summary["sample rates"] = counts(f"{info.sample_rate} Hz" for info in good)
        report.summary["channels"] = counts(info.channels for info in good)
        report.summary["codecs"] = counts(info.codec for info in good)
    for info in infos:
        report.files.append({key: value for key, value in info._asdict().items() if value not in ("", None, 0, 0.0)})
        if info.error is not None:
            report.problems.append(_problem(info.error))


def _problem(message: str) -> Problem:
    """``"<file>[ line N (clip)]: reason"`` (how the audio errors read) as a Problem of that file."""
    where, sep, reason = message.removeprefix("skipped: ").partition(": ")
    return Problem(where, reason) if sep else Problem("", message)


@contextmanager
def _skipped_as_problems(report: Report) -> Iterator[None]:
    """Each clip or row an ``on_error="skip"`` index leaves out becomes a problem of ``report``."""
    caught: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", SkippedSampleWarning)
            yield
    finally:  # also when the index raises (every row skipped): its rows are still the report's
        _report_skipped(report, caught)


def _report_skipped(report: Report, caught: list[warnings.WarningMessage]) -> None:
    for warning in caught:
        if issubclass(warning.category, SkippedSampleWarning):
            report.problems.append(_problem(str(warning.message)))
        else:
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)


def check_clips(options: Any, *, workers: int | None = None, progress: bool = True) -> Report:
    """``recipes check`` of the clips the CLI's ``options`` name (:func:`check_audio`)."""
    return check_audio(options.path, text_field=options.text_field, max_seconds=options.max_seconds,
                       workers=workers, progress=progress)
