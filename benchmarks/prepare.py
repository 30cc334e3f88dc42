"""``recipes prepare vision``: what a training-ready copy buys, what it costs to write and what it loses.

    python benchmarks/prepare.py            # 320 photos, 2 workers, 5 rounds (~3 min)
    python benchmarks/prepare.py --quick    # a smoke run: 64 photos, 2 rounds

The photos are benchmarks/vision.py's (~500 px photo-like JPEGs, q90). Side by side, in one run:

- reading: ``ImageShards`` over ``prepare(photos, max_side=320)`` against torchvision's ``ImageFolder``
  + v2 on the originals (PIL decode, ``RandomResizedCrop(224)``, flip, ``PILToTensor``) and against
  recipes' own ``ImageFolderDataset`` on the originals; RandomResizedCrop(224) + flip, batch 32,
  2 workers, uint8 batches, a loader built anew each pass, the contenders alternating pass by pass
  (benchmarks/shards.py's ``alternate``);
- writing: ``prepare(..., max_side=320, workers=2)`` against ``litdata.optimize`` doing the same
  decode, resize of the longer side to 320 (antialiased) and JPEG q90 encode with 2 workers,
  alternating, each into a fresh folder;
- quality: the PSNR of a RandomResizedCrop(224) from the copy against the same box of the original
  (the box scaled to the copy), over 200 seeded boxes;
- the break-even: the epochs after which the time to write the copy is won back by faster epochs.
"""

from __future__ import annotations

import argparse
import io
import math
import multiprocessing
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch
from PIL import Image
from torch.utils.data import DataLoader
from torchvision import datasets
from torchvision.transforms import v2
from torchvision.transforms.v2 import functional as F

if __package__ in (None, ""):  # run as a script from a checkout: make the repo's recipes importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from shards import BATCH, SIZE, WORKERS, alternate  # noqa: E402  (benchmarks/shards.py)
from vision import make_photos  # noqa: E402  (benchmarks/vision.py: the same photos)

from recipes.vision import ImageFolderDataset, ImageShards, prepare, train_transform, vision_loader  # noqa: E402
from recipes.core.imaging import psnr  # noqa: E402

warnings.filterwarnings("ignore", message="The given buffer is not writable")
MAX_SIDE, QUALITY = 320, 90


def torchvision_loader(root: Path) -> DataLoader:
    transform = v2.Compose([v2.RandomResizedCrop(SIZE, antialias=True), v2.RandomHorizontalFlip(), v2.PILToTensor()])
    return DataLoader(datasets.ImageFolder(str(root), transform=transform), batch_size=BATCH, shuffle=True,
                      num_workers=WORKERS, drop_last=True)


def litdata_resized(path: str) -> dict:
    """One photo as litdata's ``optimize`` writes it here: decoded, its longer side resized to 320, JPEG q90."""
    image = F.pil_to_tensor(Image.open(path).convert("RGB"))
    height, width = image.shape[-2:]
    scale = MAX_SIDE / max(height, width)
    image = F.resize(image, [round(height * scale), round(width * scale)], antialias=True)
    buffer = io.BytesIO()
    Image.fromarray(image.permute(1, 2, 0).numpy()).save(buffer, "JPEG", quality=QUALITY)
    return {"jpg": buffer.getvalue(), "cls": int(Path(path).parent.name.split("_")[1])}


def write_litdata(paths: list[Path], out: Path) -> None:
    import litdata

    method = multiprocessing.get_start_method(allow_none=True)  # optimize() forces "spawn": put it back
    try:
        litdata.optimize(fn=litdata_resized, inputs=[str(path) for path in paths], output_dir=str(out),
                         chunk_bytes="64MB", num_workers=WORKERS, verbose=False)
    finally:
        multiprocessing.set_start_method(method, force=True)


def writing(photos: Path, paths: list[Path], scratch: Path, rounds: int) -> dict[str, list[float]]:
    """Seconds to write the copy, ours and litdata's, alternating."""
    def ours(out: Path) -> None:
        prepare(photos, out, max_side=MAX_SIDE, quality=QUALITY, samples_per_shard=len(paths) // 4, workers=WORKERS,
                progress=False)

    runs = {"recipes prepare": ours}
    try:
        import litdata  # noqa: F401
        runs["litdata.optimize"] = lambda out: write_litdata(paths, out)
    except ImportError:
        print("litdata is not installed: its writing row is skipped (pip install -e '.[bench]')")
    times: dict[str, list[float]] = {name: [] for name in runs}
    for round_ in range(rounds):
        for name in list(runs) if round_ % 2 == 0 else list(runs)[::-1]:
            out = scratch / f"write-{round_}-{name.split()[0]}"
            start = time.perf_counter()
            runs[name](out)
            times[name].append(time.perf_counter() - start)
            shutil.rmtree(out)
    return times


def crop_psnr(photos: Path, prepared: Path, boxes: int = 200, seed: int = 0) -> list[float]:
    """PSNR of RandomResizedCrop(224) boxes from the copy against the same boxes of the originals."""
    originals = ImageFolderDataset(photos)
    copies = {k: image for k, (image, _) in enumerate(ImageShards(prepared))}
    generator = torch.Generator().manual_seed(seed)
    values = []
    for draw in range(boxes):
        k = draw % len(originals)
        original, copy = originals[k][0], copies[k]
        top, left, height, width = _box(original, generator)
        scale = copy.shape[-1] / original.shape[-1]
        box = [round(top * scale), round(left * scale), max(1, round(height * scale)), max(1, round(width * scale))]
        a = F.resized_crop(original, top, left, height, width, [SIZE, SIZE], antialias=True)
        b = F.resized_crop(copy, *box, [SIZE, SIZE], antialias=True)
        values.append(psnr(a, b))
    return values


def _box(image: torch.Tensor, generator: torch.Generator) -> tuple[int, int, int, int]:
    """RandomResizedCrop's box rule (scale 0.08-1, ratio 3/4-4/3), drawn from ``generator``."""
    height, width = image.shape[-2:]
    area = height * width
    for _ in range(10):
        target = area * float(torch.empty(1).uniform_(0.08, 1.0, generator=generator))
        ratio = math.exp(float(torch.empty(1).uniform_(math.log(3 / 4), math.log(4 / 3), generator=generator)))
        w, h = round((target * ratio) ** 0.5), round((target / ratio) ** 0.5)
        if 0 < w <= width and 0 < h <= height:
            top = int(torch.randint(0, height - h + 1, (1,), generator=generator))
            left = int(torch.randint(0, width - w + 1, (1,), generator=generator))
            return top, left, h, w
    return 0, 0, height, width


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="64 photos, 2 rounds")
    args = parser.parse_args()
    count, rounds = (64, 2) if args.quick else (320, 5)
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        photos = scratch / "photos"
        paths = make_photos(photos, count)
        start = time.perf_counter()
        summary = prepare(photos, scratch / "prepared", max_side=MAX_SIDE, quality=QUALITY,
                          samples_per_shard=count // 4, workers=WORKERS, progress=False)
        print(f"prepare --max-side {MAX_SIDE} --workers {WORKERS}: {time.perf_counter() - start:.1f} s\n{summary}\n")
        options = {"device": "cpu", "seed": 0, "num_workers": WORKERS}
        transform = train_transform(SIZE)
        runs = {
            "ImageShards over the prepared copy": lambda: vision_loader(
                ImageShards(summary.shards, transform=transform), BATCH, **options),
            "torchvision ImageFolder + v2, originals": lambda: torchvision_loader(photos),
            "recipes ImageFolderDataset, originals": lambda: vision_loader(
                ImageFolderDataset(photos, transform), BATCH, **options),
        }
        results = alternate(runs, rounds, None, count)
        print(f"reading ({count} photos, RandomResizedCrop({SIZE}) + flip, batch {BATCH}, {WORKERS} workers)")
        for name, result in results.items():
            print(f"  {name:42s} {statistics.median(result['rate']):7.0f} samples/s   rounds: "
                  + ", ".join(f"{rate:.0f}" for rate in result["rate"]))
        ours = results["ImageShards over the prepared copy"]["rate"]
        goals = (("torchvision ImageFolder + v2, originals", 3.0), ("recipes ImageFolderDataset, originals", 1.6))
        for peer, goal in goals:
            ratio = statistics.median(a / b for a, b in zip(ours, results[peer]["rate"]))
            print(f"  prepared / {peer}: {ratio:.2f}x (goal >= {goal}x: {'met' if ratio >= goal else 'NOT met'})")
        quality = statistics.median(crop_psnr(photos, scratch / "prepared"))
        print(f"\nquality: RandomResizedCrop({SIZE}) from the copy vs the same box of the original, median PSNR "
              f"{quality:.1f} dB (goal >= 32: {'met' if quality >= 32 else 'NOT met'})")
        times = writing(photos, paths, scratch, rounds)
        print(f"\nwriting {count} photos at --max-side {MAX_SIDE}, {WORKERS} workers")
        for name, values in times.items():
            print(f"  {name:42s} {statistics.median(values):7.2f} s   rounds: " + ", ".join(f"{v:.2f}" for v in values))
        if "litdata.optimize" in times:
            ratio = statistics.median(b / a for a, b in zip(times["recipes prepare"], times["litdata.optimize"]))
            print(f"  litdata / recipes time: {ratio:.2f}x (goal >= 1.2x: {'met' if ratio >= 1.2 else 'NOT met'})")
        epoch_original = count / statistics.median(results["recipes ImageFolderDataset, originals"]["rate"])
        epoch_prepared = count / statistics.median(ours)
        write = statistics.median(times["recipes prepare"])
        saved = epoch_original - epoch_prepared
        print(f"\nbreak-even: writing takes {write:.2f} s, an epoch {epoch_original:.2f} s on the originals and "
              f"{epoch_prepared:.2f} s on the copy: paid for after {write / saved:.1f} epochs" if saved > 0 else
              "\nbreak-even: the copy is not faster to read")


if __name__ == "__main__":
    main()
