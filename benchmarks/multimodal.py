"""Image-caption loading: recipes.multimodal vs an open_clip-style CsvDataset pipeline.

    python benchmarks/multimodal.py            # 300 photo-like ~500px JPEGs, batch 32, 2 workers, 5 rounds
    python benchmarks/multimodal.py --quick    # a smoke run
    python benchmarks/multimodal.py --shards   # also: tar reading, stdlib tarfile vs the webdataset package
    python benchmarks/multimodal.py --device cuda   # batches copied to the GPU, ours normalised there

Both pipelines read the same generated JPEGs and captions, crop to 224x224, tokenise with the
same tokenizer and deliver what a CLIP step needs: float32 pixels normalised with CLIP's
mean/std [B,3,224,224] plus token ids. The peer is open_clip's ``CsvDataset``: PIL open in
``__getitem__``, torchvision v2 float transforms (Resize, CenterCrop, ToDtype + Normalize),
the caption tokenised in ``__getitem__`` and padded to the 77-token context, default collate.
Ours: ImageTextDataset (captions tokenised once at construction, libjpeg-turbo decode into
uint8, uint8 resize/crop in channels-last memory, uint8 collate) and multimodal_loader, then
DevicePrefetcher: on a GPU it copies and normalises there; on the CPU it normalises in the main
process, and a second row shows the uint8 batches alone (what a GPU step waits for, since
normalising there is nearly free). Both loaders keep their workers between epochs and run a
warm-up epoch; then the contenders alternate, one timed epoch each per round, so a busy
neighbour slows all alike. Data is generated into a temporary folder and deleted afterwards.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from tokenizers import Tokenizer
from torch.utils.data import DataLoader, Dataset
from torchvision.transforms import v2

if __package__ in (None, ""):  # run as a script from a checkout: make the repo's recipes importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from recipes.core.loading.device import DevicePrefetcher
from recipes.fixtures import fixtures_dir
from recipes.text.fixtures import WORDS
from recipes.multimodal import CLIP_MEAN, CLIP_STD, ImageTextDataset, ImageTextShards, multimodal_loader, write_shards
from recipes.multimodal.tar_shards import read_samples

CONTEXT = 77
SIZE = 224


def make_photos(root: Path, count: int, seed: int = 0) -> Path:
    """``count`` photo-like JPEGs (smooth colour fields, edges, sensor noise), ~500px, and a CSV."""
    rng = np.random.default_rng(seed)
    (root / "images").mkdir(parents=True)
    rows = []
    for i in range(count):
        width, height = [(500, 375), (375, 500), (500, 333), (480, 480), (512, 384)][i % 5]
        coarse = rng.uniform(0, 255, size=(6, 8, 3)).astype(np.uint8)
        field = np.asarray(Image.fromarray(coarse).resize((width, height), Image.BICUBIC), dtype=np.float32)
        for _ in range(4):  # a few hard-edged objects over the smooth background
            x, y = rng.integers(0, width - 40), rng.integers(0, height - 40)
            field[y : y + rng.integers(20, 160), x : x + rng.integers(20, 160)] = rng.uniform(0, 255, 3)
        field += rng.normal(0, 6, size=field.shape)
        name = f"images/{i:05d}.jpg"
        Image.fromarray(field.clip(0, 255).astype(np.uint8)).save(root / name, quality=90)
        caption = " ".join(rng.choice(WORDS, size=int(rng.integers(5, 25)))).capitalize() + "."
        rows.append({"image": name, "caption": caption})
    with open(root / "train.csv", "w", newline="", encoding="utf-8") as file:
        writer = csv.DictWriter(file, ["image", "caption"])
        writer.writeheader()
        writer.writerows(rows)
    return root / "train.csv"


class CsvDataset(Dataset):
    """open_clip's ``training/data.py`` CsvDataset, with a tokenizers.Tokenizer padded to the context."""

    def __init__(self, input_filename: Path, transforms, tokenizer: Tokenizer) -> None:
        with open(input_filename, newline="", encoding="utf-8") as file:
            rows = list(csv.DictReader(file))
        root = input_filename.parent
        self.images = [str(root / row["image"]) for row in rows]
        self.captions = [row["caption"] for row in rows]
        self.transforms = transforms
        self.tokenizer = tokenizer

    def __len__(self) -> int:
        return len(self.captions)

    def __getitem__(self, idx: int):
        images = self.transforms(Image.open(str(self.images[idx])).convert("RGB"))
        ids = self.tokenizer.encode(str(self.captions[idx])).ids[:CONTEXT]
        texts = torch.zeros(CONTEXT, dtype=torch.int64)  # open_clip.tokenize pads with 0 to 77
        texts[: len(ids)] = torch.tensor(ids)
        return images, texts


def peer_loader(manifest: Path, tokenizer: Tokenizer, batch_size: int, workers: int, pin: bool) -> DataLoader:
    transforms = v2.Compose([
        v2.Resize(SIZE), v2.CenterCrop(SIZE), v2.ToImage(),
        v2.ToDtype(torch.float32, scale=True), v2.Normalize(CLIP_MEAN, CLIP_STD),
    ])
    return DataLoader(
        CsvDataset(manifest, transforms, tokenizer), batch_size=batch_size, shuffle=True, num_workers=workers,
        persistent_workers=workers > 0, drop_last=False, pin_memory=pin,
    )


def our_loader(manifest: Path, tokenizer: Tokenizer, batch_size: int, workers: int, device: str) -> DataLoader:
    dataset = ImageTextDataset(manifest, tokenizer, transform=v2.Compose([v2.Resize(SIZE), v2.CenterCrop(SIZE)]))
    return multimodal_loader(dataset, batch_size, device=device, seed=0, num_workers=workers, drop_last=False)


def peer_epoch(loader: DataLoader, device: str) -> int:
    images = 0
    for pixels, ids in loader:
        pixels, ids = pixels.to(device, non_blocking=True), ids.to(device, non_blocking=True)
        assert pixels.dtype == torch.float32 and ids.shape[1] == CONTEXT
        images += len(pixels)
    if device == "cuda":
        torch.cuda.synchronize()
    return images


def our_epoch(loader: DataLoader, device: str, normalize: bool = True) -> int:
    """Batches as a training step gets them: on a GPU through DevicePrefetcher (copy and
    normalisation on the device), on the CPU normalised here or left uint8 (``normalize``)."""
    images = 0
    batches = DevicePrefetcher(loader, device, mean=CLIP_MEAN, std=CLIP_STD, normalize=normalize)
    for batch in batches:
        assert batch["pixel_values"].dtype == (torch.float32 if normalize else torch.uint8)
        images += len(batch["pixel_values"])
    if device == "cuda":
        torch.cuda.synchronize()
    return images


def alternate(runs: dict, rounds: int) -> dict[str, list[float]]:
    """Warm up each, then time one pass of each per round, alternating; returns items/s lists."""
    for run in runs.values():
        run()
    rates: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            start = time.perf_counter()
            count = run()
            rates[name].append(count / (time.perf_counter() - start))
    return rates


def report(title: str, rates: dict[str, list[float]], unit: str) -> None:
    """Median rates, and each contender's ratio to the last one (the peer)."""
    print(f"\n{title}")
    for name, values in rates.items():
        print(f"  {name:38s} {statistics.median(values):9.0f} {unit}/s (median; rounds: "
              + ", ".join(f"{v:.0f}" for v in values) + ")")
    *ours, peer = rates
    for name in ours:
        ratio = statistics.median(rates[name]) / statistics.median(rates[peer])
        print(f"  ratio {name} / {peer}: {ratio:.2f}x")


def shard_reading(manifest: Path, tokenizer: Tokenizer, out: Path, rounds: int) -> None:
    """Raw samples (key, image bytes, caption) per second: our stdlib reader vs webdataset."""
    with open(manifest, encoding="utf-8") as file:
        rows = sum(1 for _ in file) - 1  # less the header
    paths = write_shards(manifest, out, samples_per_shard=max(1, rows // 16))
    shards = ImageTextShards(paths, tokenizer)

    def stdlib() -> int:
        return sum(1 for _ in read_samples(shards.shards))

    runs = {"stdlib tarfile (ImageTextShards)": stdlib}
    try:
        import webdataset

        def package() -> int:
            dataset = webdataset.WebDataset([str(p) for p in paths], shardshuffle=False, empty_check=False)
            return sum(1 for _ in dataset)

        runs[f"webdataset {webdataset.__version__}"] = package
    except ImportError:
        print("\n(webdataset is not installed: pip install webdataset to compare the tar readers)")
    rates = alternate(runs, rounds)
    if len(rates) == 2:
        report(f"tar reading, {len(paths)} shards, raw samples (no decode)", rates, "samples")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="40 images, 2 rounds: a smoke run")
    parser.add_argument("--images", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--shards", action="store_true", help="also compare tar readers")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="cuda: pinned batches to the GPU; ours normalised there by DevicePrefetcher")
    args = parser.parse_args(argv)
    if args.quick:
        args.images, args.rounds = 40, 2
    tokenizer = Tokenizer.from_file(str(fixtures_dir() / "text" / "tokenizer.json"))
    torch.set_num_threads(1)  # the main process only normalises; leave the cores to the workers
    with tempfile.TemporaryDirectory(prefix="recipes-bench-multimodal-") as tmp:
        manifest = make_photos(Path(tmp) / "data", args.images)
        mean_kb = np.mean([p.stat().st_size for p in (Path(tmp) / "data" / "images").iterdir()]) / 1024
        print(f"{args.images} JPEGs (~500px, {mean_kb:.0f} KB average), batch {args.batch_size}, "
              f"{args.workers} workers, {args.rounds} alternating rounds, torch {torch.__version__}, "
              f"{torch.get_num_threads()} main thread(s)")
        device = args.device
        ours = our_loader(manifest, tokenizer, args.batch_size, args.workers, device)
        peer = peer_loader(manifest, tokenizer, args.batch_size, args.workers, pin=device == "cuda")
        runs = {"recipes.multimodal": lambda: our_epoch(ours, device)}
        if device == "cpu":
            # On a GPU the uint8 batch is normalised on the device for free; here the main process
            # pays for it. Both rows are shown: uint8 is what a GPU step waits for.
            uint8 = our_loader(manifest, tokenizer, args.batch_size, args.workers, device)
            runs["recipes.multimodal, uint8 (GPU-bound)"] = lambda: our_epoch(uint8, device, normalize=False)
        runs["open_clip-style CsvDataset"] = lambda: peer_epoch(peer, device)
        rates = alternate(runs, args.rounds)
        report(f"images/s to {device} as normalised float32 [B,3,224,224] + token ids", rates, "images")
        if args.shards:
            shard_reading(manifest, tokenizer, Path(tmp) / "shards", args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
