"""``recipes prepare audio`` against Lhotse Shar: the same cuts written once as shards, then read back.

    python benchmarks/prepare_audio.py              # 600 utterances of 1-15 s, 5 rounds (~3 min)
    python benchmarks/prepare_audio.py --quick      # a smoke run: 60 utterances, 1 round

The corpus is benchmarks/audio.py's synthetic one: 16 kHz mono 16-bit FLAC clips of 1 to 15 s
(speech-like), a NeMo manifest. Side by side, in one run:

- writing: ``prepare(manifest, dest, sample_rate=16000, samples_per_shard=100, workers=2)`` against
  ``CutSet.to_shar(dest, fields={"recording": "flac"}, shard_size=100, num_jobs=2)`` of the cuts made
  from the same manifest (``Recording.from_file``), alternating, each into a fresh folder;
- reading (issue 55's goal: ours >= 1.3x): ``audio_loader(AudioShards(dest, sample_rate=16000))``,
  batches of 16 clips as they come (raw: int16 where the clips are 16-bit PCM), against Lhotse's
  ``CutSet.from_shar(in_dir=dest, split_for_dataloading=True)`` through ``SimpleCutSampler(max_cuts=16)``
  and ``K2SpeechRecognitionDataset(AudioSamples())`` in an ``IterableDatasetWrapper``, as Lhotse's
  Shar tutorial reads it; 2 workers each, clips/s of a whole epoch, loaders built anew each round,
  the two alternating.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch

sys.path.insert(1, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from audio import synthetic, write_corpus  # noqa: E402  (benchmarks/audio.py: the same corpus)

from recipes.audio import AudioShards, audio_loader, prepare  # noqa: E402

BATCH, WORKERS, SHARD = 16, 2, 100


def lhotse_cuts(manifest: Path):
    from lhotse import CutSet, Recording, RecordingSet, SupervisionSegment, SupervisionSet

    rows = [json.loads(line) for line in manifest.read_text(encoding="utf-8").splitlines()]
    recordings = [Recording.from_file(manifest.parent / row["audio_filepath"], recording_id=f"r{k}")
                  for k, row in enumerate(rows)]
    supervisions = [SupervisionSegment(id=f"s{k}", recording_id=f"r{k}", start=0.0, duration=recording.duration,
                                       text=row["text"]) for k, (row, recording) in enumerate(zip(rows, recordings))]
    return CutSet.from_manifests(recordings=RecordingSet.from_recordings(recordings),
                                 supervisions=SupervisionSet.from_segments(supervisions))


def lhotse_loader(shar: Path) -> torch.utils.data.DataLoader:
    from lhotse import CutSet
    from lhotse.dataset import K2SpeechRecognitionDataset, SimpleCutSampler
    from lhotse.dataset.input_strategies import AudioSamples
    from lhotse.dataset.iterable_dataset import IterableDatasetWrapper

    cuts = CutSet.from_shar(in_dir=shar, split_for_dataloading=True, shuffle_shards=True, seed=0)
    sampler = SimpleCutSampler(cuts, max_cuts=BATCH, shuffle=True)
    dataset = K2SpeechRecognitionDataset(input_strategy=AudioSamples())
    return torch.utils.data.DataLoader(IterableDatasetWrapper(dataset=dataset, sampler=sampler), batch_size=None,
                                       num_workers=WORKERS)


def ours_loader(dest: Path) -> torch.utils.data.DataLoader:
    return audio_loader(AudioShards(dest, sample_rate=16000), BATCH, device="cpu", seed=0, num_workers=WORKERS)


def clips_per_second(loader) -> tuple[float, int]:
    start, clips = time.perf_counter(), 0
    for batch in loader:
        clips += len(batch["inputs"] if "inputs" in batch else batch["audio"])
    return clips / (time.perf_counter() - start), clips


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clips", type=int, default=600)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.clips, args.rounds = 60, 1
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", category=UserWarning)  # Lhotse's notes on lazily read and dynamic cut sets
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        manifest = write_corpus(root / "corpus", synthetic(root, args.clips))["flac"]
        cuts = lhotse_cuts(manifest)
        writes: dict[str, list[float]] = {"recipes prepare": [], "Lhotse to_shar": []}
        for number in range(args.rounds):
            begin = time.perf_counter()
            summary = prepare(manifest, root / f"ours{number}", sample_rate=16000, samples_per_shard=SHARD,
                              workers=WORKERS, progress=False)
            writes["recipes prepare"].append(time.perf_counter() - begin)
            begin = time.perf_counter()
            cuts.to_shar(root / f"shar{number}", fields={"recording": "flac"}, shard_size=SHARD, num_jobs=WORKERS)
            writes["Lhotse to_shar"].append(time.perf_counter() - begin)
        print(summary)
        rates: dict[str, list[float]] = {"recipes AudioShards": [], "Lhotse Shar": []}
        counts = {}
        for _ in range(args.rounds):
            for name, make in (("recipes AudioShards", lambda: ours_loader(root / "ours0")),
                               ("Lhotse Shar", lambda: lhotse_loader(root / "shar0"))):
                rate, counts[name] = clips_per_second(make())
                rates[name].append(rate)
    print(f"\n{args.clips} clips, {WORKERS} workers, batches of {BATCH}, {args.rounds} rounds (medians)\n")
    print("| | recipes | Lhotse | ratio |\n|---|---|---|---|")
    ours, theirs = statistics.median(rates["recipes AudioShards"]), statistics.median(rates["Lhotse Shar"])
    print(f"| reading, clips/s (clips an epoch: {counts['recipes AudioShards']}, {counts['Lhotse Shar']}) | "
          f"{ours:.0f} | {theirs:.0f} | {ours / theirs:.2f}x |")
    ours, theirs = statistics.median(writes["recipes prepare"]), statistics.median(writes["Lhotse to_shar"])
    print(f"| writing, s | {ours:.2f} | {theirs:.2f} | {theirs / ours:.2f}x |")


if __name__ == "__main__":
    main()
