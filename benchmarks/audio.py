"""recipes.audio vs Lhotse (and Hugging Face ``datasets``): the index, the loaders, the hand-over, the decoders.

    python benchmarks/audio.py                 # 600 utterances a corpus, WAV and FLAC, 5 rounds
    python benchmarks/audio.py --quick         # a smoke run
    python benchmarks/audio.py --hf            # adds HF datasets' Audio column to the loaders

Two corpora of 16 kHz mono 16-bit clips, each written as WAV and as FLAC (the same samples):
"synthetic", speech-like clips of 1 to 15 s (voiced harmonics under a syllable envelope, the
fixtures' signal), and "espeak", real synthesized speech (espeak-ng reading the fixture corpus's
sentences at varied speeds, resampled to 16 kHz by TorchCodec), where espeak-ng is installed.
Everything runs in one process, the sides in alternating rounds; medians are printed.

1. Index: seconds to learn every clip's duration: ``SpeechDataset`` reading the headers (and with
   ``index_dir``, a second build), ``durations="manifest"``, Lhotse's ``Recording.from_file`` (its
   soundfile header read) on the same files, and our header reads forced onto threads.
2. Loaders: clips/s of an epoch's steady state (the batches after the first workers x 2) with 2
   persistent workers and batches of about ``--budget`` seconds: ours raw (int16 batches where the
   clips are 16-bit PCM), ours made float32 in the main process (``DevicePrefetcher(loader, "cpu")``),
   Lhotse's ``DynamicBucketingSampler`` + ``K2SpeechRecognitionDataset(AudioSamples())``. The
   hand-over, two ways: the CPU a clip of the epoch (main process and workers, psutil) less that of
   the same loader with ``num_workers=0``, where nothing crosses between processes; and a batch's
   pickle through shared memory and back (ForkingPickler, as a worker and the main process do it);
   the padding waste, padded samples over all samples of an epoch's batches.
3. Decoders: one clip's decode, soundfile against TorchCodec's ``AudioDecoder``.
"""

from __future__ import annotations

import argparse
import json
import pickle
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import psutil
import soundfile
import torch

# Run from a checkout without `pip install -e .`: make the repository's recipes importable.
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(1, str(REPO))

from recipes.audio import SpeechDataset, audio_loader, speech_index  # noqa: E402
from recipes.audio.fixtures import _speech  # noqa: E402
from recipes.core import DevicePrefetcher, ReadOptions  # noqa: E402
from recipes.core.loading.loader import RecipeLoader  # noqa: E402

RATE = 16000
FORMATS = ("wav", "flac")


def write_clip(path: Path, samples: np.ndarray) -> None:
    """float samples in [-1, 1] as 16-bit PCM, in the container the suffix names."""
    soundfile.write(path, np.clip(np.round(samples * 32768), -32768, 32767).astype(np.int16), RATE, subtype="PCM_16")


def synthetic(folder: Path, clips: int) -> list[tuple[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    return [(f"clip {k}", _speech(RATE, float(rng.uniform(1.0, 15.0)), seed=k)[0]) for k in range(clips)]


def espeak(folder: Path, clips: int) -> list[tuple[str, np.ndarray]]:
    """Sentences of the fixture corpus read by espeak-ng at 130-200 words a minute, 16 kHz."""
    from torchcodec.decoders import AudioDecoder

    words = (REPO / "fixtures" / "text" / "corpus.txt").read_text(encoding="utf-8").split()
    rng, out, start = np.random.default_rng(1), [], 0
    for k in range(clips):
        count = int(rng.integers(3, 40))  # about 1 to 15 s at these speeds
        text = " ".join(words[(start + i) % len(words)] for i in range(count))
        start += count
        wav = folder / "espeak.wav"
        subprocess.run(["espeak-ng", "-s", str(int(rng.integers(130, 200))), "-w", str(wav), text], check=True)
        out.append((text, AudioDecoder(str(wav), sample_rate=RATE).get_all_samples().data[0].numpy()))
    return out


def write_corpus(folder: Path, utterances: list[tuple[str, np.ndarray]]) -> dict[str, Path]:
    """The utterances as ``<suffix>/<k>.<suffix>`` and a NeMo manifest per format."""
    manifests = {}
    for suffix in FORMATS:
        (folder / suffix).mkdir(parents=True, exist_ok=True)
        rows = []
        for k, (text, samples) in enumerate(utterances):
            name = f"{suffix}/{k:05d}.{suffix}"
            write_clip(folder / name, samples)
            rows.append({"audio_filepath": name, "duration": round(len(samples) / RATE, 4), "text": text})
        manifests[suffix] = folder / f"{suffix}.jsonl"
        manifests[suffix].write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return manifests


def timed(function) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def index_times(manifest: Path, rounds: int) -> dict[str, float]:
    """Median seconds of each way to learn the clips' durations."""
    from lhotse import Recording

    rows = [json.loads(line) for line in manifest.read_text(encoding="utf-8").splitlines()]
    paths = [manifest.parent / row["audio_filepath"] for row in rows]
    index_dir = Path(tempfile.mkdtemp())
    # at scale the index's fixed cost (a file to open, about 0.5 ms) fades: each clip listed ten times
    tenfold = manifest.with_name(f"tenfold-{manifest.name}")
    tenfold.write_text(manifest.read_text(encoding="utf-8") * 10, encoding="utf-8")
    for kept in (manifest, tenfold):
        SpeechDataset(kept, read_options=ReadOptions(index_dir=index_dir))  # the first build, kept
    slow = speech_index.SLOW_HEADER_S
    kept, trusted = ReadOptions(index_dir=index_dir), ReadOptions(durations="manifest")
    ways = {
        "recipes SpeechDataset (headers)": lambda: SpeechDataset(manifest),
        "recipes, second build (index_dir)": lambda: SpeechDataset(manifest, read_options=kept),
        "recipes, each clip listed 10 times: headers": lambda: SpeechDataset(tenfold),
        "recipes, each clip listed 10 times: second build": lambda: SpeechDataset(tenfold, read_options=kept),
        "recipes, durations='manifest'": lambda: SpeechDataset(manifest, read_options=trusted),
        "Lhotse Recording.from_file": lambda: [Recording.from_file(p, recording_id=str(k))
                                               for k, p in enumerate(paths)],
        "recipes, headers forced onto threads": lambda: _threads_forced(manifest),
    }
    times: dict[str, list[float]] = {name: [] for name in ways}
    try:
        for _ in range(rounds):
            for name, way in ways.items():
                times[name].append(timed(way))
    finally:
        speech_index.SLOW_HEADER_S = slow
        shutil.rmtree(index_dir)
    return {name: statistics.median(values) for name, values in times.items()}


def _threads_forced(manifest: Path) -> None:
    speech_index.SLOW_HEADER_S = 0.0  # every header counts as waiting on storage
    SpeechDataset(manifest)
    speech_index.SLOW_HEADER_S = 0.3e-3


def lhotse_loader(manifest: Path, budget: float, workers: int):
    from lhotse import CutSet, Recording, RecordingSet, SupervisionSegment, SupervisionSet
    from lhotse.dataset import DynamicBucketingSampler, K2SpeechRecognitionDataset
    from lhotse.dataset.input_strategies import AudioSamples

    rows = [json.loads(line) for line in manifest.read_text(encoding="utf-8").splitlines()]
    recordings = [Recording.from_file(manifest.parent / r["audio_filepath"], recording_id=f"r{k}")
                  for k, r in enumerate(rows)]
    supervisions = [SupervisionSegment(id=f"s{k}", recording_id=f"r{k}", start=0.0, duration=rec.duration,
                                       text=r["text"]) for k, (r, rec) in enumerate(zip(rows, recordings))]
    cuts = CutSet.from_manifests(recordings=RecordingSet.from_recordings(recordings),
                                 supervisions=SupervisionSet.from_segments(supervisions))
    with warnings.catch_warnings():  # "an eagerly read CutSet": the manifest is small enough to hold
        warnings.simplefilter("ignore", UserWarning)
        sampler = DynamicBucketingSampler(cuts, max_duration=budget, shuffle=True, drop_last=True, seed=0)
    dataset = K2SpeechRecognitionDataset(input_strategy=AudioSamples())
    return torch.utils.data.DataLoader(dataset, sampler=sampler, batch_size=None, num_workers=workers,
                                       persistent_workers=workers > 0)


def hf_loader(manifest: Path, batch_size: int, workers: int):
    import datasets

    rows = [json.loads(line) for line in manifest.read_text(encoding="utf-8").splitlines()]
    table = datasets.Dataset.from_dict({"audio": [str(manifest.parent / r["audio_filepath"]) for r in rows]})
    table = table.cast_column("audio", datasets.Audio(sampling_rate=RATE))
    return torch.utils.data.DataLoader(table, batch_size=batch_size, shuffle=True, num_workers=workers,
                                       collate_fn=hf_collate, persistent_workers=workers > 0, drop_last=True)


def hf_collate(batch: list[dict]) -> dict[str, torch.Tensor]:
    """The usual audio collator: decode what ``datasets`` hands over, pad, keep the lengths."""
    clips = [item["audio"].get_all_samples().data.mean(0) for item in batch]
    return {"audio": torch.nn.utils.rnn.pad_sequence(clips, batch_first=True),
            "audio_lengths": torch.tensor([len(clip) for clip in clips])}


def clips_of(batch: dict) -> int:
    return len(batch["inputs"] if "inputs" in batch else batch["audio"])


def cpu_seconds() -> float:
    """User + system CPU seconds of this process and its children (the loader workers) so far."""
    me = psutil.Process()
    total = sum(me.cpu_times()[:2])
    for child in me.children(recursive=True):
        try:
            total += sum(child.cpu_times()[:2])
        except psutil.NoSuchProcess:
            pass
    return total


def epoch(loader, number: int, skip: int) -> tuple[float, float, int, float]:
    """(steady clips/s after ``skip`` batches, CPU seconds of the whole epoch, clips, padding waste:
    padded samples over all samples of its batches)."""
    sampler = getattr(loader, "sampler", None)
    for owner in (sampler, getattr(loader, "batch_sampler", None), getattr(loader, "loader", None)):
        if hasattr(owner, "set_epoch"):
            owner.set_epoch(number)
    cpu, clips, steady, start, real, padded = cpu_seconds(), 0, 0, None, 0, 0
    for k, batch in enumerate(loader):
        count = clips_of(batch)
        clips += count
        audio = batch["inputs"] if "inputs" in batch else batch["audio"]
        lengths = batch["supervisions"]["num_samples"] if "inputs" in batch else batch["audio_lengths"]
        real, padded = real + int(lengths.sum()), padded + audio.shape[0] * audio.shape[-1]
        if k == skip:
            start = time.perf_counter()
        elif k > skip:
            steady += count
    seconds = time.perf_counter() - start if start is not None else float("nan")
    return steady / seconds, cpu_seconds() - cpu, clips, 1 - real / max(1, padded)


def loaders(manifest: Path, budget: float, workers: int, hf: bool) -> dict:
    dataset = SpeechDataset(manifest)
    ours = audio_loader(dataset, max_seconds=budget, device="cpu", seed=0, num_workers=workers)
    built = {"recipes audio_loader, raw": ours,
             "recipes, float32 in the main process": DevicePrefetcher(ours, "cpu"),
             "Lhotse DynamicBucketingSampler": lhotse_loader(manifest, budget, workers)}
    if hf:
        batch_size = max(1, round(len(dataset) / len(ours.batch_sampler)))
        built[f"HF datasets Audio, batch {batch_size}"] = hf_loader(manifest, batch_size, workers)
    return built


def loader_figures(manifest: Path, budget: float, rounds: int, hf: bool) -> dict[str, tuple[float, ...]]:
    """``{loader: (clips/s, hand-over CPU ms a clip, pickle ms and bytes a second of audio, padding)}``, medians of
    ``rounds`` alternating rounds (a round: each loader's epoch with 2 workers, then with none)."""
    alone, parallel = loaders(manifest, budget, 0, hf), loaders(manifest, budget, 2, hf)
    for loader in parallel.values():
        epoch(loader, 0, skip=0)  # starts the persistent workers: not counted
    runs: dict[str, list[tuple[float, ...]]] = {name: [] for name in parallel}
    for number in range(1, rounds + 1):
        for name, loader in parallel.items():
            rate, cpu, clips, waste = epoch(loader, number, skip=2 * 2)  # after workers x prefetch_factor batches
            _, cpu_alone, clips_alone, _ = epoch(alone[name], number, skip=0)
            handover = 1000 * (cpu / clips - cpu_alone / clips_alone)
            runs[name].append((rate, handover, *pickled(alone[name], number), waste))
    return {name: tuple(statistics.median(column) for column in zip(*results)) for name, results in runs.items()}


def pickled(loader, number: int, batches: int = 8) -> tuple[float, float]:
    """``(ms, bytes)`` a second of audio of a batch's trip between processes: ForkingPickler's dump
    (into shared memory), then its load, as a DataLoader worker and the main process do it; our
    batches packed as ``packed_in_workers`` packs them in a worker."""
    from multiprocessing.reduction import ForkingPickler

    from recipes.core.contracts.nested import tensors_in
    from recipes.core.workers.packing import PackedBatch

    inner = getattr(loader, "loader", loader)  # a DevicePrefetcher's loader: the batches that cross
    ours = isinstance(inner, RecipeLoader)
    if hasattr(inner.batch_sampler, "set_epoch"):
        inner.batch_sampler.set_epoch(number)
    seconds, samples, size = 0.0, 0, 0
    for k, batch in enumerate(inner):
        if k == batches:
            break
        lengths = batch["supervisions"]["num_samples"] if "inputs" in batch else batch["audio_lengths"]
        samples += int(lengths.sum())
        size += sum(tensor.nbytes for tensor in tensors_in(batch))
        start = time.perf_counter()
        pickle.loads(ForkingPickler.dumps(PackedBatch(batch) if ours else batch))
        seconds += time.perf_counter() - start
    return 1000 * seconds * RATE / samples, size * RATE / samples


def decoder_times(manifest: Path, rounds: int) -> dict[str, float]:
    """Median ms a clip of each way to decode the manifest's first 100 clips."""
    from torchcodec.decoders import AudioDecoder

    from recipes.audio.decoding import decode

    rows = [json.loads(line) for line in manifest.read_text(encoding="utf-8").splitlines()][:100]
    paths = [str(manifest.parent / row["audio_filepath"]) for row in rows]
    options = {"sample_rate": RATE, "num_channels": 1, "max_seconds": 60}
    ways = {
        "soundfile.read (float32)": lambda p: soundfile.read(p, dtype="float32"),
        "TorchCodec AudioDecoder(...).get_all_samples()": lambda p: AudioDecoder(p).get_all_samples(),
        "recipes decode (float32)": lambda p: decode(p, p, **options),
        "recipes decode (int16, fixed_point=True)": lambda p: decode(p, p, **options, fixed_point=True),
    }
    times: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(rounds):
        for name, way in ways.items():
            times[name].append(timed(lambda: [way(p) for p in paths]) / len(paths))
    return {name: 1000 * statistics.median(values) for name, values in times.items()}


def machine() -> str:
    import lhotse
    import torchcodec

    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--", "recipes"], capture_output=True,
                           text=True).stdout.strip()
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    return (f"recipes at {commit.stdout.strip()}{' (recipes/ changed)' if dirty else ''}; {psutil.cpu_count()} CPUs "
            f"({cpu}), load average {psutil.getloadavg()[0]:.1f}; torch {torch.__version__}, TorchCodec "
            f"{torchcodec.__version__}, soundfile {soundfile.__version__} (libsndfile "
            f"{soundfile.__libsndfile_version__}), lhotse {lhotse.__version__}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clips", type=int, default=600)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--budget", type=float, default=100.0, help="seconds of audio a batch")
    parser.add_argument("--corpus", choices=["synthetic", "espeak", "both"], default="both")
    parser.add_argument("--hf", action="store_true", help="add HF datasets' Audio column to the loaders")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.clips, args.rounds, args.budget = 60, 1, 20.0
    torch.set_num_threads(1)
    print(machine())
    corpora = ["synthetic", "espeak"] if args.corpus == "both" else [args.corpus]
    if "espeak" in corpora and shutil.which("espeak-ng") is None:
        print("espeak-ng is not installed (apt-get install espeak-ng): the espeak corpus is left out")
        corpora.remove("espeak")
    for corpus in corpora:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            start = time.perf_counter()
            utterances = (synthetic if corpus == "synthetic" else espeak)(folder, args.clips)
            manifests = write_corpus(folder, utterances)
            hours = sum(len(samples) for _, samples in utterances) / RATE / 3600
            written = time.perf_counter() - start
            print(f"\n## {corpus}: {args.clips} utterances, {hours:.2f} h, written in {written:.0f} s")
            for suffix, manifest in manifests.items():
                report(corpus, suffix, manifest, args)


def report(corpus: str, suffix: str, manifest: Path, args: argparse.Namespace) -> None:
    print(f"\n### {corpus}, {suffix.upper()}\n\n| index | seconds | per clip |\n|---|---|---|")
    times = index_times(manifest, args.rounds)
    for name, seconds in times.items():
        rows = args.clips * (10 if "10 times" in name else 1)
        print(f"| {name} | {seconds:.3f} | {1000 * seconds / rows:.3f} ms |")
    ours, lhotse = times["recipes SpeechDataset (headers)"], times["Lhotse Recording.from_file"]
    second = ours / times["recipes, second build (index_dir)"]
    listed = "recipes, each clip listed 10 times: "
    tenfold = times[listed + "headers"] / times[listed + "second build"]
    print(f"\nours / Lhotse: {ours / lhotse:.2f}x the time; second build {second:.1f}x faster "
          f"({tenfold:.1f}x with each clip listed 10 times)")
    print(f"\n| loader, batches of ~{args.budget:g} s | clips/s | hand-over: CPU ms a clip | pickled: ms a clip | "
          "bytes a second of audio | padding |\n|---|---|---|---|---|---|")
    figures = loader_figures(manifest, args.budget, args.rounds, args.hf)
    mean_seconds = statistics.mean(json.loads(line)["duration"] for line in manifest.read_text().splitlines())
    for name, (rate, handover, trip, size, waste) in figures.items():
        shipped = f"{trip * mean_seconds:.2f} | {size / 1000:.0f} kB"
        print(f"| {name} | {rate:.0f} | {handover:.2f} | {shipped} | {waste:.1%} |")
    ratio = figures["recipes audio_loader, raw"][0] / figures["Lhotse DynamicBucketingSampler"][0]
    print(f"\nours raw / Lhotse raw: {ratio:.2f}x")
    print("\n| decode of one clip | ms |\n|---|---|")
    for name, ms in decoder_times(manifest, args.rounds).items():
        print(f"| {name} | {ms:.3f} |")


if __name__ == "__main__":
    main()
