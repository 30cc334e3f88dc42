"""Sound classification from a folder per class (SpeechCommands, ESC-50), padding collate, loader preset.

    dataset = AudioFolderDataset("esc50/train", sample_rate=16000, clip_seconds=5.0)
    loader = audio_loader(dataset, batch_size=64, device="cuda", seed=0, stateful=True)
    for batch in DevicePrefetcher(loader, "cuda"):  # {"audio" float32 [B,T], "audio_lengths", "attention_mask", ...}
        features = LogMel(16000, 400, 160, 80).to("cuda")(batch["audio"])

``root/<class>/**/<file>`` gives the classes, their order and the samples' order of
``torchvision.datasets.ImageFolder`` (same walk, case-insensitive extensions, nested folders),
with audio extensions. Each file's header is read once at construction (:func:`probe`, no
decode) for :attr:`durations`, which the loader batches by; items are decoded by
:func:`recipes.audio.decoding.decode`. :func:`audio_loader`'s workers read 16-bit PCM at the target
rate as its int16 samples (:func:`fixed_point_view`), half float32's bytes to hand over.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset

from recipes.audio.decoding import audio_options, crop, decode, probe
from recipes.core import (
    ByLength,
    ClassFolderDataset,
    DataError,
    FixedPoint,
    MixedDataset,
    SkippedRows,
    TokenBudget,
    arrays,
    build_loader,
    check_on_error,
    checks,
    drop_skipped,
    fixed_to_float,
    hooks,
    skip_or_raise,
    tokenizing,
)

AUDIO_EXTENSIONS = (".wav", ".flac", ".mp3", ".ogg", ".opus", ".oga", ".m4a", ".aac", ".webm")
MILLISECONDS = 1000  # durations are batched as integer milliseconds (recipes.core.sampling.plans sort ints)


class AudioFolderDataset(ClassFolderDataset):
    """``root/<class>/**/<audio file>`` -> ``(audio float32 [C, N], label int)``.

    Args:
        root: the folder holding one sub-folder per class (``~`` is expanded).
        sample_rate: every clip is resampled to this rate.
        clip_seconds: cut longer clips to this length (shorter ones stay whole: the collate pads
            them and reports their lengths); None keeps every clip whole.
        on_error: ``"raise"`` (a :class:`DataError` naming the file) or ``"skip"`` (warn, drop).
            A file whose header cannot be read is handled at construction: raised, or left out
            of the index with a warning.
        num_channels: 1 mixes to mono (the mean of the channels), None keeps each file's.
        random_crop: with ``clip_seconds``, take a random window (training; seeded per sample by
            the preset loader) or, False, the centre one (evaluation).
        max_seconds: the per-sample limit that bounds memory (default :data:`MAX_SECONDS`,
            10 minutes); a longer file is a DataError at construction (``"skip"``: left out).
        extensions: file endings to include, case-insensitive (default :data:`AUDIO_EXTENSIONS`).
        allow_empty: accept class folders without any audio file.

    The index is :class:`recipes.core.ClassFolderDataset`'s (``classes``, ``samples``, ``targets``,
    :meth:`find_samples`) with the durations: numpy arrays, which forked workers share instead of
    copying. :attr:`durations` holds each item's seconds from the file headers, capped at
    ``clip_seconds``.
    """

    kind, example = "audio", "dog/001.wav"  # for the messages of an empty or missing folder
    fixed_point = False  # True: 16-bit PCM at the target rate as its int16 samples (fixed_point_view)

    def __init__(
        self,
        root: str | os.PathLike,
        *,
        sample_rate: int = 16000,
        clip_seconds: float | None = None,
        on_error: str = "raise",
        num_channels: int | None = 1,
        random_crop: bool = True,
        max_seconds: float | None = None,
        extensions: str | Sequence[str] | None = None,
        allow_empty: bool = False,
    ) -> None:
        self.sample_rate, self.num_channels, self.max_seconds = audio_options(
            "AudioFolderDataset", sample_rate=sample_rate, num_channels=num_channels, max_seconds=max_seconds)
        self.on_error = check_on_error(on_error)
        self.clip_seconds = checks.check_positive("clip_seconds", clip_seconds, owner="AudioFolderDataset")
        self.random_crop = random_crop
        super().__init__(root, AUDIO_EXTENSIONS if extensions is None else extensions, allow_empty=allow_empty)
        with SkippedRows(self.root, "clip") as skipped:
            kept, seconds = self._index()
            skipped.check(len(kept))
        self.paths = arrays.StringArray([self.paths[k] for k in kept])
        self.labels = self.labels[kept]
        self.header_durations = np.asarray(seconds, dtype=np.float64)
        cap = np.inf if clip_seconds is None else clip_seconds
        self.durations = np.minimum(self.header_durations, cap)

    def _index(self) -> tuple[list[int], list[float]]:
        """Read each file's header; a bad one is raised or, under ``"skip"``, left out."""
        kept, seconds = [], []
        for k in range(len(self.paths)):
            path = self.path(k)
            try:
                info = probe(path, path)
                if info.duration > self.max_seconds:
                    raise DataError(f"{path}: {info.duration:.2f} s is over max_seconds={self.max_seconds:g}; "
                                    "raise max_seconds")
            except DataError as error:
                skip_or_raise(error, self.on_error)
                continue
            kept.append(k)
            seconds.append(info.duration)
        return kept, seconds

    def state_source(self) -> str:
        """What a loader state names as this data: counts and digests of the class and file names
        and of the header durations (which the duration plans batch by), not the root itself."""
        names = checks.sampled_digest(self.classes) + checks.sampled_digest(self.paths)
        seconds = checks.sampled_digest(self.durations)
        return f"{len(self)} clips in {len(self.classes)} classes, names {names}, durations {seconds}"

    def batch_contract(self) -> dict[str, Any]:
        """What a mixed dataset must share with this one (recipes.core.loading.mixing)."""
        return {"collate": "audio_collate", "classes": self.classes, "sample_rate": self.sample_rate,
                "num_channels": self.num_channels, "per_sample": ("durations",)}

    def read_audio(self, index: int) -> torch.Tensor:
        """Sample ``index``'s whole clip, float32 ``[C, N]`` (int16 ``FixedPoint`` where :attr:`fixed_point`
        keeps 16-bit PCM); override to read from elsewhere."""
        path = self.path(index)
        return decode(path, path, sample_rate=self.sample_rate, num_channels=self.num_channels,
                      max_seconds=self.max_seconds, expected=float(self.header_durations[index]),
                      fixed_point=self.fixed_point)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int] | None:
        try:
            audio = self.read_audio(index)
        except DataError as error:
            return skip_or_raise(error, self.on_error)
        if self.clip_seconds is not None:
            audio = crop(audio, round(self.clip_seconds * self.sample_rate), random=self.random_crop)
        return audio, int(self.labels[index])

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.root!r}, {len(self)} clips, {len(self.classes)} classes, "
                f"sample_rate={self.sample_rate}, clip_seconds={self.clip_seconds})")


def audio_collate(batch: list[Any], *, pad_to_multiple_of: int | None = None, pad_id: int = 0,
                  float_audio: bool = False) -> dict[str, Any]:
    """Pad clips (and transcripts) into one batch, with their lengths.

    Items are ``(audio, label)`` tuples (:class:`AudioFolderDataset`) or dicts with ``"audio"``
    and any of ``"input_ids"``, ``"text"``, ``"label"``, ``"index"`` (``SpeechDataset``,
    ``AudioShards``). ``None`` items (skipped) are dropped.

    Returns:
        ``audio`` ``[B, T]`` for mono clips, ``[B, C, T]`` otherwise, zero-padded on the right, T
        the longest clip rounded up to ``pad_to_multiple_of``: int16 marked
        :class:`recipes.core.FixedPoint` where every clip is (16-bit PCM at the target rate,
        decoded as stored: half float32's bytes to hand over; ``DevicePrefetcher`` or
        :func:`recipes.core.fixed_to_float` gives the float batch, exactly), float32
        otherwise or with ``float_audio=True`` (a trainer that moves batches itself); ``audio_lengths`` int64
        [B]; ``attention_mask`` bool [B, T] (True = real sample); ``labels`` int64 [B] with labels;
        ``input_ids`` int64 [B, L] padded with ``pad_id`` and ``lengths`` int64 [B] with
        transcripts (CTC and seq2seq losses take both); ``text`` list[str]; ``index`` int64 [B]
        (``key`` list[str] from a stream).

    Raises:
        ValueError: clips with different channel counts; the message says which and the fix.
    """
    items = [{"audio": item[0], "label": item[1]} if isinstance(item, tuple) else item for item in drop_skipped(batch)]
    clips = [item["audio"] for item in items]
    channels = sorted({clip.shape[0] for clip in clips})
    if len(channels) > 1:
        raise ValueError(f"audio_collate: clips with {channels} channels in one batch; pass num_channels=1 (mono) "
                         "or num_channels=2 to the dataset")
    lengths = torch.tensor([clip.shape[-1] for clip in clips], dtype=torch.int64)
    width = int(lengths.max()) if clips else 0
    if pad_to_multiple_of:
        width = -(-width // pad_to_multiple_of) * pad_to_multiple_of
    fixed = bool(clips) and not float_audio and all(_int16(clip) for clip in clips)
    clips = [clip.as_subclass(torch.Tensor) if fixed else fixed_to_float(clip) for clip in clips]
    # each byte written once: the clip, then its padding (a batch of clips is megabytes)
    dtype = torch.int16 if fixed else torch.float32
    audio = torch.empty(len(clips), channels[0] if channels else 1, width, dtype=dtype)
    # bool, a byte a sample: the mask is as long as the audio, and HF's int32 would double what
    # crosses from a worker (docs/audio.md, "Batches"); Hugging Face's audio models take either
    mask = torch.empty(len(clips), width, dtype=torch.bool)
    for row, row_mask, clip in zip(audio, mask, clips):
        length = clip.shape[-1]
        row[:, :length], row[:, length:] = clip, 0
        row_mask[:length], row_mask[length:] = True, False  # 8x quicker than comparing with an arange
    audio = audio[:, 0] if audio.shape[1] == 1 else audio
    out: dict[str, Any] = {"audio": audio.as_subclass(FixedPoint) if fixed else audio, "audio_lengths": lengths,
                           "attention_mask": mask}
    if items and "label" in items[0]:
        out["labels"] = torch.tensor([item["label"] for item in items], dtype=torch.int64)
    if items and "input_ids" in items[0]:
        out["input_ids"], _, out["lengths"] = tokenizing.pad_batch([item["input_ids"] for item in items], pad_id=pad_id)
    if items and "text" in items[0]:
        out["text"] = [item["text"] for item in items]
    if items and "index" in items[0]:
        out["index"] = torch.tensor([item["index"] for item in items], dtype=torch.int64)
    if items and "key" in items[0]:
        out["key"] = [item["key"] for item in items]
    return out


def _int16(clip: torch.Tensor) -> bool:
    return isinstance(clip, FixedPoint) and clip.dtype == torch.int16


@dataclass(frozen=True)
class AudioCollate:
    """:func:`audio_collate` with its options as fields (a ``collate_fn`` that pickles and shows them)."""

    pad_to_multiple_of: int | None = None
    pad_id: int = 0
    float_audio: bool = False

    def __call__(self, batch: list[Any]) -> dict[str, Any]:
        return audio_collate(batch, **vars(self))


def fixed_point_view(dataset: Any) -> Any:
    """What :func:`audio_loader` reads: a shallow copy of ``dataset`` (a mixture's sources each) with
    ``fixed_point = True``, so that 16-bit PCM at the target rate reaches the collate as its int16
    samples (:class:`recipes.core.FixedPoint`) and crosses from the workers at half float32's
    bytes; ``dataset[i]`` stays float32. A dataset without ``fixed_point`` is returned as it is."""
    if isinstance(dataset, MixedDataset):
        view = copy.copy(dataset)
        view.datasets = [fixed_point_view(source) for source in dataset.datasets]
        return view
    if not hasattr(type(dataset), "fixed_point"):
        return dataset
    view = copy.copy(dataset)  # shares the index arrays and a stream's cursor
    view.fixed_point = True
    return view


def audio_collate_for(dataset: Any) -> AudioCollate:
    """:class:`AudioCollate` with ``dataset``'s pad id (:func:`recipes.core.hooks.dataset_pad_id`), else 0."""
    return AudioCollate(pad_id=hooks.dataset_pad_id(dataset, 0))


def audio_loader(
    dataset: Dataset,
    batch_size: int | None = None,
    *,
    max_seconds: float | None = None,
    train: bool = True,
    device: str | torch.device | None = None,
    seed: int | None = None,
    stateful: bool = False,
    collate_fn: Callable[[list[Any]], Any] | None = None,
    **overrides: Any,
) -> DataLoader:
    """The DataLoader preset for the audio datasets (anything with ``.durations``), with :func:`audio_collate`.

    Training batches hold clips of similar duration: every epoch the clips are sorted by
    duration with a little fresh jitter (:class:`recipes.core.ByLength`), cut into
    batches, and the batches shuffled, so padding stays small and batchmates change. Evaluation
    keeps the dataset order and every clip. Batches are split across the ranks of a process group
    (equal counts when training); each sample's random crop is seeded by ``(seed, epoch, index)``.
    Where every clip of a batch is 16-bit PCM at the target rate (WAV, FLAC), its ``audio`` is their
    int16 samples, a :class:`recipes.core.FixedPoint` (:func:`fixed_point_view`): half the bytes
    from the workers, made the same float32 batch by ``DevicePrefetcher`` on the device (on the CPU,
    in the main process), by :func:`recipes.core.fixed_to_float`, or read as it is by :class:`LogMel`.

    Args:
        dataset: an audio dataset, or a ``MixedDataset`` of them; an :class:`AudioShards` stream
            is batched by ``batch_size`` as it comes (:func:`recipes.core.stream_loader`).
        batch_size: clips per batch; with ``max_seconds`` an upper bound, or None.
        max_seconds: a budget per batch, ``len(batch) * longest <= max_seconds`` (the audio
            ``max_tokens``: what the padded batch holds); a single longer clip is its own batch.
        train: shuffled, duration-grouped, drop the last partial batch; else in order, keep all.
        device, seed, stateful: see :func:`recipes.core.build_loader`; ``stateful=True``
            resumes mid-epoch with exactly the batches still to come.
        collate_fn: used as given. Default: the collate the dataset asks for
            (its ``batch_contract()``'s ``"collate"``, :func:`recipes.core.hooks.collate_of`), else :class:`AudioCollate` with its pad id
            (:class:`recipes.core.hooks.PadsIds`; 0 if none).
        overrides: DataLoader keyword arguments (``num_workers=0``, ``multiprocessing_context="spawn"``;
            :func:`recipes.core.preset_kwargs`).
    """
    collate = hooks.UsualCollate(audio_collate_for) if collate_fn is None else collate_fn
    if isinstance(dataset, IterableDataset):  # AudioShards: it orders, shuffles and shards itself
        if max_seconds is not None:
            raise ValueError("max_seconds needs the durations of a map-style dataset; a stream batches by batch_size")
        plan = None
    else:
        lengths = np.ceil(np.asarray(dataset.durations) * MILLISECONDS).astype(np.int64)
        max_seconds = checks.check_positive("max_seconds", max_seconds, owner="audio_loader")
        budget = None if max_seconds is None else max(1, round(max_seconds * MILLISECONDS))
        plan = ByLength(lengths) if budget is None else TokenBudget(lengths, budget)
    return build_loader(fixed_point_view(dataset), collate, batch_size=batch_size, plan=plan, train=train,
                        device=device, seed=seed, stateful=stateful, **overrides)
