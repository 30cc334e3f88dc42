"""Per-item overhead of every domain against its peer: ``dataset[i]`` and a collate, on tiny inputs.

    python benchmarks/overhead.py            # 7 alternating rounds
    python benchmarks/overhead.py --quick    # 2 rounds on fewer items: a smoke run

Inputs are tiny on purpose (64x48 images, half-second clips, one-line texts), so that what is
timed is the library's own work around the decoder: indexing, checks, building the item and the
batch. The bigger benchmarks of each domain time whole loaders on realistic inputs; this one
watches the fixed cost from commit to commit, which they hide. No transform, one thread, no
DataLoader. Each domain's two sides run in alternating rounds (the order flips each round), and
each figure is the median of its rounds, in microseconds:

- vision: ``ImageFolderDataset`` vs torchvision's ``ImageFolder(transform=v2.PILToTensor())``;
  ``image_collate`` vs ``default_collate``. 64x48 JPEGs, 4 classes.
- detection: ``CocoDataset`` vs ``wrap_dataset_for_transforms_v2(CocoDetection(...))`` with the
  same target keys; ``detection_collate`` vs the torchvision references' ``tuple(zip(*batch))``.
  64x48 JPEGs, about 7.5 boxes each (``benchmarks/detection.py``'s instances file).
- text: ``TokenizedTextDataset`` vs a Hugging Face ``datasets.Dataset`` of the same token ids;
  ``text_collate`` vs transformers' ``DataCollatorWithPadding``. The fixture corpus.
- multimodal: ``ImageTextDataset`` vs open_clip's ``CsvDataset`` (PIL, the caption tokenised in
  ``__getitem__``, ``benchmarks/multimodal.py``); ``multimodal_collate`` vs ``default_collate``.
- audio: ``AudioFolderDataset`` vs a TorchCodec ``AudioDecoder`` per item; ``audio_collate`` vs
  ``pad_sequence`` with lengths. 0.25-1 s 16 kHz mono WAVs.
- video: ``VideoFolderDataset(frames_per_clip=8)`` vs a TorchCodec ``VideoDecoder`` opened per
  item, 8 frames from a random start; ``video_collate`` vs ``default_collate``. 2 s 64x48 H.264.

Ratios above 1 mean recipes is faster. The script imports the ``recipes`` of the checkout it sits
in, so a copy in an older checkout (``git worktree add``) measures that commit.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import statistics
import subprocess
import sys
import tempfile
import time
import wave
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image
from torch.utils.data import Dataset, default_collate

# Run from a checkout without `pip install -e .`: make the repository's recipes importable.
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(1, str(ROOT))
sys.path.insert(2, str(ROOT / "benchmarks"))

WIDTH, HEIGHT, BATCH = 64, 48, 8
TOKENIZER = ROOT / "fixtures" / "text" / "tokenizer.json"


@dataclass
class Case:
    """One domain: each side's dataset and collate."""

    domain: str
    peer: str
    ours: Dataset
    theirs: Dataset
    our_collate: Callable[[list[Any]], Any]
    their_collate: Callable[[list[Any]], Any]


def _jpeg(rng: np.random.Generator, width: int, height: int) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8)).save(buffer, "JPEG", quality=90)
    return buffer.getvalue()


def vision(folder: Path, count: int) -> Case:
    from torchvision.datasets import ImageFolder
    from torchvision.transforms import v2

    from recipes.vision import ImageFolderDataset, image_collate

    rng = np.random.default_rng(0)
    for number in range(count):
        path = folder / f"class{number % 4}" / f"{number:05d}.jpg"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(_jpeg(rng, WIDTH, HEIGHT))
    return Case("vision", "torchvision ImageFolder", ImageFolderDataset(folder),
                ImageFolder(str(folder), transform=v2.PILToTensor()), image_collate, default_collate)


def zipped(batch: list[Any]) -> tuple:
    """torchvision's detection references' ``utils.collate_fn``."""
    return tuple(zip(*batch))


def detection(folder: Path, count: int) -> Case:
    import detection as coco_bench  # benchmarks/detection.py

    from recipes.detection import detection_collate

    coco_bench.SIZES = {"landscape": (WIDTH, HEIGHT), "portrait": (HEIGHT, WIDTH)}
    root, ann_file = coco_bench.make_coco(folder, count)
    return Case("detection", "CocoDetection + v2 wrapper", coco_bench.ours(root, ann_file),
                coco_bench.theirs(root, ann_file), detection_collate, zipped)


def text(folder: Path, count: int) -> Case:
    import datasets
    from tokenizers import Tokenizer
    from transformers import DataCollatorWithPadding, PreTrainedTokenizerFast

    from recipes.text import TokenizedTextDataset, text_collate

    ours = TokenizedTextDataset(ROOT / "fixtures" / "text" / "corpus.txt", TOKENIZER)
    ids = [ours[i]["input_ids"].tolist() for i in range(len(ours))]
    assert ids[0] == Tokenizer.from_file(str(TOKENIZER)).encode(
        (ROOT / "fixtures" / "text" / "corpus.txt").read_text(encoding="utf-8").splitlines()[0]).ids
    datasets.disable_progress_bars()
    theirs = datasets.Dataset.from_dict({"input_ids": ids})
    tokenizer = PreTrainedTokenizerFast(tokenizer_file=str(TOKENIZER), pad_token="[PAD]")
    return Case("text", "HF datasets + DataCollatorWithPadding", ours, theirs, text_collate,
                DataCollatorWithPadding(tokenizer, return_tensors="pt"))


def multimodal(folder: Path, count: int) -> Case:
    from multimodal import CsvDataset  # benchmarks/multimodal.py
    from tokenizers import Tokenizer
    from torchvision.transforms import v2

    from recipes.multimodal import ImageTextDataset, multimodal_collate

    rng = np.random.default_rng(1)
    (folder / "images").mkdir(parents=True)
    rows = []
    for number in range(count):
        (folder / "images" / f"{number:05d}.jpg").write_bytes(_jpeg(rng, WIDTH, HEIGHT))
        rows.append({"image": f"images/{number:05d}.jpg", "caption": f"a small photo of thing number {number}"})
    with open(folder / "manifest.csv", "w", newline="", encoding="utf-8") as file:
        writer = csv.DictWriter(file, ["image", "caption"])
        writer.writeheader()
        writer.writerows(rows)
    (folder / "manifest.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    tokenizer = Tokenizer.from_file(str(TOKENIZER))
    return Case("multimodal", "open_clip CsvDataset", ImageTextDataset(folder / "manifest.jsonl", tokenizer),
                CsvDataset(folder / "manifest.csv", v2.PILToTensor(), tokenizer), multimodal_collate, default_collate)


class PlainAudio(Dataset):
    """The usual TorchCodec Dataset: a decoder per item, mono at 16 kHz."""

    def __init__(self, paths: list[Path]) -> None:
        self.paths = [str(path) for path in paths]
        self.labels = [int(path.parent.name[5:]) for path in paths]

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        from torchcodec.decoders import AudioDecoder

        samples = AudioDecoder(self.paths[index], sample_rate=16000, num_channels=1).get_all_samples()
        return samples.data, self.labels[index]


def pad_audio(batch: list[tuple[torch.Tensor, int]]) -> dict[str, torch.Tensor]:
    clips = [clip[0] for clip, _ in batch]
    return {
        "audio": torch.nn.utils.rnn.pad_sequence(clips, batch_first=True),
        "audio_lengths": torch.tensor([len(clip) for clip in clips]),
        "label": torch.tensor([label for _, label in batch]),
    }


def audio(folder: Path, count: int) -> Case:
    from recipes.audio import AudioFolderDataset, audio_collate

    rng = np.random.default_rng(2)
    paths = []
    for number in range(count):
        path = folder / f"class{number % 3}" / f"{number:05d}.wav"
        path.parent.mkdir(parents=True, exist_ok=True)
        samples = (rng.standard_normal(int(rng.uniform(0.25, 1.0) * 16000)) * 3000).astype("<i2")
        with wave.open(str(path), "wb") as file:
            file.setnchannels(1)
            file.setsampwidth(2)
            file.setframerate(16000)
            file.writeframes(samples.tobytes())
        paths.append(path)
    return Case("audio", "TorchCodec AudioDecoder", AudioFolderDataset(folder), PlainAudio(sorted(paths)),
                audio_collate, pad_audio)


class PlainClips(Dataset):
    """The usual TorchCodec Dataset: a decoder opened per item, ``frames`` frames from a random start."""

    def __init__(self, paths: list[Path], frames: int) -> None:
        self.paths, self.frames = [str(path) for path in paths], frames
        self.labels = [int(path.parent.name[5:]) for path in paths]
        self.rng = np.random.default_rng(0)

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        from torchcodec.decoders import VideoDecoder

        decoder = VideoDecoder(self.paths[index])
        start = int(self.rng.integers(0, len(decoder) - self.frames + 1))
        return decoder.get_frames_in_range(start, start + self.frames).data, self.labels[index]


def video(folder: Path, count: int) -> Case:
    from torchcodec.encoders import VideoEncoder

    from recipes.video import VideoFolderDataset, video_collate

    generator = torch.Generator().manual_seed(3)
    paths = []
    for number in range(count):
        path = folder / f"class{number % 3}" / f"{number:05d}.mp4"
        path.parent.mkdir(parents=True, exist_ok=True)
        frames = torch.randint(0, 256, (30, 3, HEIGHT, WIDTH), dtype=torch.uint8, generator=generator)
        VideoEncoder(frames, frame_rate=15).to_file(str(path), codec="libx264", preset="veryfast", crf=23)
        paths.append(path)
    return Case("video", "TorchCodec VideoDecoder", VideoFolderDataset(folder, frames_per_clip=8),
                PlainClips(sorted(paths), 8), video_collate, default_collate)


DOMAINS = {"vision": (vision, 2000), "detection": (detection, 2000), "text": (text, 0),
           "multimodal": (multimodal, 2000), "audio": (audio, 300), "video": (video, 24)}


def one_side(dataset: Dataset, collate: Callable, indices: list[int]) -> tuple[float, float]:
    """Seconds an item and a batch: ``dataset[i]`` over ``indices``, then ``collate`` over their batches."""
    start = time.perf_counter()
    items = [dataset[i] for i in indices]
    item = (time.perf_counter() - start) / len(indices)
    batches = [items[i : i + BATCH] for i in range(0, len(items) - BATCH + 1, BATCH)]
    start = time.perf_counter()
    for batch in batches:
        collate(batch)
    return item, (time.perf_counter() - start) / len(batches)


def commit() -> str:
    try:
        return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--items", type=int, default=1000, help="dataset[i] calls per side and round")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", nargs="*", choices=sorted(DOMAINS), help="some domains only")
    args = parser.parse_args()
    rounds, items = (2, 100) if args.quick else (args.rounds, args.items)
    import recipes

    print(f"recipes {recipes.__file__} at commit {commit()}, torch {torch.__version__}, "
          f"{rounds} rounds, {items} items a side and round, batches of {BATCH}")
    with tempfile.TemporaryDirectory() as tmp:
        cases = []
        for name in args.only or DOMAINS:
            make, count = DOMAINS[name]
            cases.append(make(Path(tmp) / name, count if not args.quick else min(count, 200)))
        rng = np.random.default_rng(0)
        times = {case.domain: {"ours": [], "theirs": []} for case in cases}
        for number in range(rounds + 1):  # round 0 warms the caches and the decoders up, untimed
            for case in cases:
                indices = rng.integers(0, len(case.ours), items).tolist()
                sides = [("ours", case.ours, case.our_collate), ("theirs", case.theirs, case.their_collate)]
                for side, dataset, collate in sides[:: 1 if number % 2 else -1]:
                    figures = one_side(dataset, collate, indices)
                    if number:
                        times[case.domain][side].append(figures)
    print()
    print("| domain | peer | item, recipes | item, peer | ratio | collate, recipes | collate, peer | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for case in cases:
        ours, theirs = times[case.domain]["ours"], times[case.domain]["theirs"]
        item = [statistics.median(t[0] for t in side) * 1e6 for side in (ours, theirs)]
        batch = [statistics.median(t[1] for t in side) * 1e6 for side in (ours, theirs)]
        print(f"| {case.domain} | {case.peer} | {item[0]:.0f} us | {item[1]:.0f} us | **{item[1] / item[0]:.2f}x** "
              f"| {batch[0]:.0f} us | {batch[1]:.0f} us | **{batch[1] / batch[0]:.2f}x** |")


if __name__ == "__main__":
    main()
