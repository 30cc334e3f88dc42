"""recipes.audio vs Hugging Face ``datasets`` (``Audio``, TorchCodec decode) and Lhotse, side by side.

    python benchmarks/audio.py             # 2000 clips of 1-20 s, 3 rounds
    python benchmarks/audio.py --quick     # a smoke run
    python benchmarks/audio.py --mask-cost # adds ours without the attention_mask (what the mask costs)

Data: speech-like clips (voiced harmonics under a syllable envelope, the fixtures' signal) of
1 to 20 s, uniform, 16 kHz mono FLAC, written with TorchCodec's ``AudioEncoder`` into a temporary
folder with a NeMo manifest. Three figures; the loaders run in alternating rounds (medians):

1. Throughput: clips/s of one training epoch through a DataLoader with 2 persistent workers to
   padded float32 batches. recipes: ``SpeechDataset`` + ``audio_loader(max_seconds=B)`` (batches
   whose padded seconds stay under B); HF: ``Dataset.cast_column("audio", Audio(16000))``, shuffled
   batches of the mean clip count of ours, padded by a collator of ``pad_sequence``; Lhotse:
   ``DynamicBucketingSampler(max_duration=B)`` (B bounds the batch's real seconds) and
   ``K2SpeechRecognitionDataset(AudioSamples())``, which decodes with soundfile.
2. Padding waste: padded samples / all samples of an epoch's batches, for each of them.
3. Index: seconds to learn every clip's duration: ``SpeechDataset`` (headers through
   ``AudioDecoder.metadata``) vs decoding every clip (what a manifest without durations costs
   otherwise) vs Lhotse's ``Recording.from_file`` (soundfile's header read).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

# Run from a checkout without `pip install -e .`: make the repository's recipes importable.
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from recipes.audio import SpeechDataset, audio_collate, audio_loader
from recipes.audio.fixtures import _speech, encode

RATE = 16000


def write_corpus(folder: Path, clips: int) -> Path:
    rng = np.random.default_rng(0)
    rows = []
    for k in range(clips):
        seconds = float(rng.uniform(1.0, 20.0))
        name = f"clips/{k:05d}.flac"
        (folder / "clips").mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(encode(_speech(RATE, seconds, seed=k), RATE, name))
        rows.append({"audio": name, "text": f"clip {k}"})
    manifest = folder / "manifest.jsonl"
    manifest.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return manifest


def pad_collate(batch: list[dict]) -> dict[str, torch.Tensor]:
    """The usual audio collator: decode what ``datasets`` hands over, pad, keep the lengths."""
    clips = [item["audio"].get_all_samples().data.mean(0) for item in batch]
    lengths = torch.tensor([len(clip) for clip in clips])
    audio = torch.nn.utils.rnn.pad_sequence(clips, batch_first=True)
    return {"audio": audio, "audio_lengths": lengths}


def recipes_loader(dataset: SpeechDataset, budget: float, collate_fn=None):
    overrides = {} if collate_fn is None else {"collate_fn": collate_fn}
    return audio_loader(dataset, max_seconds=budget, device="cpu", seed=0, num_workers=2, **overrides)


def without_mask(batch: list) -> dict:
    """``audio_collate`` less its ``attention_mask`` (HF's collator and Lhotse ship none)."""
    out = audio_collate(batch)
    del out["attention_mask"]
    return out


def hf_loader(folder: Path, manifest: Path, batch_size: int):
    import datasets

    rows = [json.loads(line) for line in manifest.read_text(encoding="utf-8").splitlines()]
    columns = {"audio": [str(folder / r["audio"]) for r in rows], "text": [r["text"] for r in rows]}
    table = datasets.Dataset.from_dict(columns)
    table = table.cast_column("audio", datasets.Audio(sampling_rate=RATE))
    return torch.utils.data.DataLoader(table, batch_size=batch_size, shuffle=True, num_workers=2,
                                       collate_fn=pad_collate, persistent_workers=True, drop_last=True)


def lhotse_cuts(folder: Path, manifest: Path):
    from lhotse import CutSet, Recording, RecordingSet, SupervisionSegment, SupervisionSet

    rows = [json.loads(line) for line in manifest.read_text(encoding="utf-8").splitlines()]
    recordings = [Recording.from_file(folder / r["audio"], recording_id=f"r{k}") for k, r in enumerate(rows)]
    supervisions = [
        SupervisionSegment(id=f"s{k}", recording_id=f"r{k}", start=0.0, duration=rec.duration, text=r["text"])
        for k, (r, rec) in enumerate(zip(rows, recordings))
    ]
    return CutSet.from_manifests(recordings=RecordingSet.from_recordings(recordings),
                                 supervisions=SupervisionSet.from_segments(supervisions))


def lhotse_loader(cuts, budget: float):
    from lhotse.dataset import DynamicBucketingSampler, K2SpeechRecognitionDataset
    from lhotse.dataset.input_strategies import AudioSamples

    sampler = DynamicBucketingSampler(cuts, max_duration=budget, shuffle=True, drop_last=True, seed=0)
    dataset = K2SpeechRecognitionDataset(input_strategy=AudioSamples())
    return torch.utils.data.DataLoader(dataset, sampler=sampler, batch_size=None, num_workers=2,
                                       persistent_workers=True)


def lengths_of(batch: dict) -> tuple[int, int]:
    """(real samples, padded samples) of a batch from any of the three."""
    if "inputs" in batch:  # Lhotse: inputs [B, T], supervisions' num_samples
        audio, lengths = batch["inputs"], batch["supervisions"]["num_samples"]
    else:
        audio, lengths = batch["audio"], batch["audio_lengths"]
    return int(lengths.sum()), int(audio.shape[0] * audio.shape[-1])


def epoch(loader, epoch_number: int) -> tuple[float, int, int, int]:
    """(seconds, clips, real samples, padded samples) of one pass."""
    sampler = getattr(loader, "sampler", None)
    if hasattr(sampler, "set_epoch"):
        sampler.set_epoch(epoch_number)
    start, clips, real, padded = time.perf_counter(), 0, 0, 0
    for batch in loader:
        got, total = lengths_of(batch)
        clips += (batch["inputs"] if "inputs" in batch else batch["audio"]).shape[0]
        real, padded = real + got, padded + total
    return time.perf_counter() - start, clips, real, padded


def index_times(folder: Path, manifest: Path, rounds: int) -> dict[str, float]:
    from lhotse import Recording
    from torchcodec.decoders import AudioDecoder

    rows = [json.loads(line) for line in manifest.read_text(encoding="utf-8").splitlines()]
    paths = [str(folder / r["audio"]) for r in rows]
    times: dict[str, list[float]] = {"recipes headers": [], "decode every clip": [], "lhotse Recording.from_file": []}
    for _ in range(rounds):
        start = time.perf_counter()
        SpeechDataset(manifest)
        times["recipes headers"].append(time.perf_counter() - start)
        start = time.perf_counter()
        for path in paths:
            AudioDecoder(path).get_all_samples()
        times["decode every clip"].append(time.perf_counter() - start)
        start = time.perf_counter()
        for k, path in enumerate(paths):
            Recording.from_file(path, recording_id=str(k))
        times["lhotse Recording.from_file"].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clips", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--budget", type=float, default=120.0, help="seconds per batch")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--mask-cost", action="store_true", help="add ours without the attention_mask")
    args = parser.parse_args()
    if args.quick:
        args.clips, args.rounds = 120, 1
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        start = time.perf_counter()
        manifest = write_corpus(folder, args.clips)
        print(f"{args.clips} clips written in {time.perf_counter() - start:.1f} s")
        dataset = SpeechDataset(manifest)
        print(f"corpus: {dataset.durations.sum() / 3600:.2f} h, clips of {dataset.durations.min():.1f}-"
              f"{dataset.durations.max():.1f} s, budget {args.budget:g} s a batch")
        ours = recipes_loader(dataset, args.budget)
        batch_size = max(1, round(len(dataset) / len(ours.batch_sampler)))
        loaders = {"recipes audio_loader": ours,
                   f"HF datasets Audio, batch {batch_size}": hf_loader(folder, manifest, batch_size)}
        if args.mask_cost:
            loaders["recipes audio_loader, no attention_mask"] = recipes_loader(dataset, args.budget, without_mask)
        try:
            loaders["Lhotse DynamicBucketingSampler"] = lhotse_loader(lhotse_cuts(folder, manifest), args.budget)
        except ImportError:
            print("lhotse is not installed: its row is left out")
        results: dict[str, list[tuple[float, int, int, int]]] = {name: [] for name in loaders}
        for number in range(args.rounds):
            for name, loader in loaders.items():
                results[name].append(epoch(loader, number))
        print("\n| loader | clips/s | padding waste | clips a batch |\n|---|---|---|---|")
        base = None
        for name, runs in results.items():
            rate = statistics.median(clips / seconds for seconds, clips, _, _ in runs)
            waste = statistics.median(1 - real / padded for _, _, real, padded in runs)
            batches = len(loaders[name]) if name.startswith(("recipes", "HF")) else None  # Lhotse's has no len
            per_batch = f"{runs[0][1] / batches:.1f}" if batches else "-"
            base = rate if base is None else base
            print(f"| {name} | {rate:.0f} ({rate / base:.2f}x ours) | {waste:.1%} | {per_batch} |")
        times = index_times(folder, manifest, args.rounds)
        print("\n| index | seconds | per clip |\n|---|---|---|")
        for name, seconds in times.items():
            print(f"| {name} | {seconds:.2f} | {1000 * seconds / args.clips:.2f} ms |")
        print(f"\nheaders vs decoding: {times['decode every clip'] / times['recipes headers']:.1f}x faster")


if __name__ == "__main__":
    main()
