"""recipes.vision against torchvision's ImageFolder + v2 pipeline, and against timm's uint8 loader.

    python benchmarks/vision.py            # 300 photos, 6 rounds of alternating epochs
    python benchmarks/vision.py --quick    # smoke run: 64 photos, 2 rounds
    python benchmarks/vision.py --draft    # also: reduced-scale JPEG decoding, speed and fidelity

All loaders read the same generated ~500 px JPEGs (the ImageNet case: photo-like content, q90,
4:2:0) with RandomResizedCrop(224) + horizontal flip, batch 32 and 2 persistent workers each,
and alternate epoch by epoch in one process, so whatever else the machine does hits all alike:

- torchvision: ``ImageFolder`` (PIL decode) -> ``RandomResizedCrop(224, antialias=True)``,
  ``RandomHorizontalFlip``, ``PILToTensor``, ``ToDtype(float32, scale=True)``, ``Normalize`` per
  image in the workers -> ``default_collate`` (normalised float batch through shared memory);
- timm uint8: ``timm.data.create_loader(ImageDataset(root), (3, 224, 224), 32, is_training=True,
  use_prefetcher=True, color_jitter=0, re_prob=0, auto_augment=None, ...)``: PIL decode ->
  ``RandomResizedCropAndInterpolation(224, bilinear)``, ``RandomHorizontalFlip``,
  ``MaybePILToTensor`` -> ``fast_collate`` (uint8 batch). timm returns a ``PrefetchLoader`` that
  normalises on the GPU; with no GPU we time its inner DataLoader (``loader.loader``), which
  yields the uint8 batches: what a GPU run asks of the CPU, the peer of "recipes uint8". Built
  with ``device=torch.device("cpu")``, so ``create_loader`` needs no CUDA. Skipped if timm is
  not installed (``pip install -e .[bench]``);
- recipes: ``ImageFolderDataset`` + ``train_transform(224)`` (libjpeg-turbo decode, uint8 crop
  and flip) -> ``image_collate`` (uint8 batch) -> ``normalize_images`` on the batch in the main
  process (``DevicePrefetcher(loader, "cpu")``), the CPU stand-in for the GPU; and the same
  loader left uint8 ("recipes uint8"), which is what a GPU run asks of the CPU.

Ratios: recipes (normalised) and recipes uint8 against torchvision's float batches, and recipes
uint8 against timm uint8 (both leave normalisation to the device).

Each loader's line also gives its CPU time per image (main process and workers, from psutil):
a second view of the ratio, less swayed than images/s by how fast the machine runs that minute.

The decode ceiling is a tight single-core loop of read + decode + the same crop-resize: the most
one worker could deliver, so ``workers x ceiling`` bounds any loader on this data.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image, ImageDraw, ImageFilter
from torch.utils.data import DataLoader
from torchvision.datasets import ImageFolder
from torchvision.transforms import v2
from torchvision.transforms.v2 import functional as F

from recipes.core.loading.device import IMAGENET_MEAN, IMAGENET_STD, DevicePrefetcher
from recipes.core.pixels.images import read_image
from recipes.vision import ImageFolderDataset, RandomResizedCrop, eval_transform, train_transform, vision_loader

BATCH, WORKERS, SIZE = 32, 2, 224


def _fields(rng: np.random.Generator, count: int, height: int, width: int, alpha: float) -> np.ndarray:
    """``count`` random fields [count,H,W] with a 1/f^alpha amplitude spectrum, unit std."""
    fy = np.fft.fftfreq(height).astype(np.float32)[:, None]
    fx = np.fft.rfftfreq(width).astype(np.float32)[None, :]
    frequency = np.hypot(fx, fy)
    frequency[0, 0] = 1.0
    gain = frequency ** np.float32(-alpha)
    gain[0, 0] = 0
    noise = rng.standard_normal((2, count, *frequency.shape), dtype=np.float32)
    field = np.fft.irfft2((noise[0] + 1j * noise[1]) * gain, s=(height, width))
    return field / field.std(axis=(1, 2), keepdims=True)


def photo(rng: np.random.Generator, width: int, height: int) -> Image.Image:
    """Photo-like content: JPEG's cost depends on it, and flat colours decode 3x too fast.

    Natural images have an amplitude spectrum close to 1/f: the background is such a field in
    luminance with smoother chroma, then textured objects with hard, slightly blurred edges
    (occlusion) and a little sensor noise. ~80 KB at 500x420, q90, like ImageNet's photos.
    """
    luma = 120 + 40 * _fields(rng, 1, height, width, 1.25)[0]
    cb, cr = 14 * _fields(rng, 2, height, width, 1.8) + rng.normal(0, 12, (2, 1, 1))
    rgb = np.stack([luma + 1.402 * cr, luma - 0.344 * cb - 0.714 * cr, luma + 1.772 * cb], axis=-1)
    image = Image.fromarray(np.clip(rgb, 0, 255).astype(np.uint8))
    for _ in range(int(rng.integers(2, 6))):
        w, h = int(rng.integers(width // 8, width // 2)), int(rng.integers(height // 8, height // 2))
        x0, y0 = int(rng.integers(-w // 2, width - w // 2)), int(rng.integers(-h // 2, height - h // 2))
        mask = Image.new("L", (w, h), 0)
        if rng.random() < 0.5:
            ImageDraw.Draw(mask).ellipse([0, 0, w - 1, h - 1], fill=255)
        else:
            corners = [(int(rng.integers(0, w)), int(rng.integers(0, h))) for _ in range(5)]
            ImageDraw.Draw(mask).polygon(corners, fill=255)
        shade = rng.uniform(40, 210, 3) + 25 * _fields(rng, 1, h, w, 1.5)[0][..., None]
        texture = Image.fromarray(np.clip(shade, 0, 255).astype(np.uint8))
        image.paste(texture, (x0, y0), mask.filter(ImageFilter.GaussianBlur(1)))
    noisy = np.asarray(image, dtype=np.float32) + 2.5 * rng.standard_normal((height, width, 3), dtype=np.float32)
    return Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8))


def make_photos(root: Path, count: int, classes: int = 10, seed: int = 0) -> list[Path]:
    """``count`` JPEGs of 500 px on the long side, 333-500 on the other, 30% portrait."""
    rng = np.random.default_rng(seed)
    paths = []
    for index in range(count):
        width, height = 500, int(rng.integers(333, 501))
        if rng.random() < 0.3:
            width, height = height, width
        path = root / f"class_{index % classes:02d}" / f"{index:05d}.jpg"
        path.parent.mkdir(parents=True, exist_ok=True)
        photo(rng, width, height).save(path, "JPEG", quality=90)
        paths.append(path)
    return paths


def peer_loader(root: Path) -> DataLoader:
    transform = v2.Compose(
        [
            v2.RandomResizedCrop(SIZE, antialias=True),
            v2.RandomHorizontalFlip(),
            v2.PILToTensor(),
            v2.ToDtype(torch.float32, scale=True),
            v2.Normalize(IMAGENET_MEAN, IMAGENET_STD),
        ]
    )
    return DataLoader(
        ImageFolder(str(root), transform=transform), batch_size=BATCH, shuffle=True, drop_last=True,
        num_workers=WORKERS, persistent_workers=True, generator=torch.Generator().manual_seed(0),
    )


def timm_loader(root: Path) -> DataLoader | None:
    """timm's training loader on the same photos: the DataLoader inside its ``PrefetchLoader``.

    Default train transform with the extras off (no colour jitter, random erasing or
    auto-augment), so the work is ours: RandomResizedCrop 224 (bilinear) + flip, uint8 batches.
    """
    try:
        from timm.data import ImageDataset, create_loader
    except ImportError:  # timm comes with the bench extras
        return None
    loader = create_loader(
        ImageDataset(str(root)), input_size=(3, SIZE, SIZE), batch_size=BATCH, is_training=True,
        use_prefetcher=True, color_jitter=0, re_prob=0, auto_augment=None, interpolation="bilinear",
        num_workers=WORKERS, persistent_workers=True, use_multi_epochs_loader=False, pin_memory=False,
        device=torch.device("cpu"),
    )
    return loader.loader  # PrefetchLoader -> its DataLoader of uint8 batches (fast_collate)


def our_loader(root: Path, normalize: bool = True) -> DevicePrefetcher:
    dataset = ImageFolderDataset(root, train_transform(SIZE))
    loader = vision_loader(dataset, BATCH, device="cpu", seed=0, num_workers=WORKERS)
    return DevicePrefetcher(loader, "cpu", normalize=normalize)


def epoch(loader) -> float:
    """Images per second over one epoch."""
    start, images = time.perf_counter(), 0
    for batch, _ in loader:
        assert batch.shape[1:] == (3, SIZE, SIZE)
        images += len(batch)
    return images / (time.perf_counter() - start)


def cpu_seconds(exclude: int | None = None) -> float | None:
    """CPU time (user + system) of this process, its finished children and its live ones (the
    loader workers) but ``exclude`` (a server process); None without psutil (the bench extras)."""
    try:
        import psutil
    except ImportError:
        return None
    me = psutil.Process()
    times = me.cpu_times()
    total = times.user + times.system + times.children_user + times.children_system
    for child in me.children(recursive=True):
        if child.pid == exclude:
            continue
        try:
            child_times = child.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += child_times.user + child_times.system
    return total


def compare_loaders(root: Path, rounds: int) -> None:
    # "recipes uint8" is the same loader without the CPU normalisation: what a GPU run costs the
    # CPU, where DevicePrefetcher normalises on the device
    loaders = {"torchvision": peer_loader(root), "recipes": our_loader(root), "recipes uint8": our_loader(root, False)}
    timm = timm_loader(root)
    if timm is not None:
        loaders["timm uint8"] = timm
    else:
        print("  (timm is not installed: pip install -e .[bench] to compare with timm's uint8 loader)")
    for loader in loaders.values():
        epoch(loader)  # warm-up: start the workers, fill the page cache
    rates: dict[str, list[float]] = {name: [] for name in loaders}
    cpu_ms: dict[str, list[float]] = {name: [] for name in loaders}  # CPU ms per image, all processes
    for round_ in range(rounds):
        order = list(loaders) if round_ % 2 == 0 else list(loaders)[::-1]
        for name in order:
            cpu_before = cpu_seconds()
            rates[name].append(epoch(loaders[name]))
            if cpu_before is not None:
                images = len(loaders[name]) * BATCH
                cpu_ms[name].append((cpu_seconds() - cpu_before) / images * 1e3)
    for name, values in rates.items():
        cpu = f", {statistics.median(cpu_ms[name]):.2f} CPU ms an image" if cpu_ms[name] else ""
        print(f"  {name:13s} {statistics.median(values):7.1f} images/s{cpu}  (rounds: {', '.join(f'{v:.0f}' for v in values)})")
    # each against the peer that delivers the same thing: float batches, or uint8 left to the device
    pairs = [("recipes", "torchvision"), ("recipes uint8", "torchvision"), ("recipes uint8", "timm uint8")]
    for name, peer_name in pairs:
        if peer_name not in rates:
            continue
        ratios = [ours / peer for ours, peer in zip(rates[name], rates[peer_name])]
        print(f"  ratio {name} / {peer_name}: {statistics.median(ratios):.2f}x median "
              f"(per round: {', '.join(f'{r:.2f}' for r in ratios)})")
        if cpu_ms[name] and cpu_ms[peer_name]:
            # CPU per image moves less with the machine's speed than wall time; a second view
            cpu_ratios = [peer / ours for ours, peer in zip(cpu_ms[name], cpu_ms[peer_name])]
            print(f"    CPU time per image, {peer_name} / {name}: {statistics.median(cpu_ratios):.2f}x median")


def _ceiling(name: str, paths: list[Path], load, crop) -> float:
    torch.manual_seed(0)
    best = 0.0
    for _ in range(3):
        start = time.perf_counter()
        for path in paths:
            crop(load(path))
        best = max(best, len(paths) / (time.perf_counter() - start))
    print(f"  {name:46s} {best:7.1f} images/s per core")
    return best


def decode_ceiling(paths: list[Path]) -> float:
    """One core, no loader: read + decode (+ the crop-resize), best of 3 passes."""
    torch.set_num_threads(1)
    def decode(path):
        return read_image(path, contiguous=False)

    _ceiling("decode only (libjpeg-turbo via TorchCodec)", paths, decode, lambda image: image)
    ours = _ceiling("decode + RandomResizedCrop (ours, uint8 HWC)", paths, decode, RandomResizedCrop(SIZE, antialias=True))
    peer = v2.RandomResizedCrop(SIZE, antialias=True)
    _ceiling("decode + RandomResizedCrop (PIL, as ImageFolder)", paths, lambda p: Image.open(p).convert("RGB"), peer)
    torch.set_num_threads(os.cpu_count() or 1)
    return ours


def _jpeg(rng: np.random.Generator, width: int, height: int, quality: int) -> bytes:
    buffer = io.BytesIO()
    photo(rng, width, height).save(buffer, "JPEG", quality=quality)
    return buffer.getvalue()


def _best_ms(function, repeat: int = 5) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return best * 1e3


def _detail(image: torch.Tensor) -> float:
    """Mean absolute Laplacian of the grey image: how much fine detail survived."""
    grey = image.float().mean(0)
    laplacian = 4 * grey[1:-1, 1:-1] - grey[:-2, 1:-1] - grey[2:, 1:-1] - grey[1:-1, :-2] - grey[1:-1, 2:]
    return laplacian.abs().mean().item()


def draft_study(directory: Path) -> None:
    """When does reduced-scale JPEG decoding pay, and what does it change in the output?"""
    from recipes.core.pixels.images import decode_image

    torch.set_num_threads(1)
    rng = np.random.default_rng(1)
    preset = eval_transform(SIZE, 256)
    print(f"\n== draft for eval_transform({SIZE}, 256): decode at >= 256x256 vs full decode ==")
    for width, height, quality in [(500, 375, 90), (1024, 768, 90), (2048, 1536, 85), (4000, 3000, 75)]:
        data = _jpeg(rng, width, height, quality)
        def full(data=data):
            return preset(decode_image(data, contiguous=False))

        def draft(data=data):
            return preset(decode_image(data, draft_size=preset.draft_size, contiguous=False))

        difference = (full().int() - draft().int()).abs().float()
        decoded = tuple(decode_image(data, draft_size=preset.draft_size).shape[1:])
        print(f"  {width}x{height} q{quality} ({len(data) // 1024} KB): full {_best_ms(full):6.1f} ms, draft "
              f"{_best_ms(draft):6.1f} ms (decoded {decoded[1]}x{decoded[0]}); output mean |diff| "
              f"{difference.mean():.2f}, max {difference.max():.0f}; detail {_detail(full()):.1f} -> {_detail(draft()):.1f}")
    print(f"\n== draft under RandomResizedCrop({SIZE}): one crop box, decoded full vs at 1/2 and 1/4 ==")
    data = _jpeg(rng, 2048, 1536, 85)
    full = decode_image(data, contiguous=False)
    scaled = {s: decode_image(data, draft_size=(2048 // s, 1536 // s), contiguous=False) for s in (2, 4)}
    for side in (1200, 900, 600, 450, 300):
        box = {"top": 100, "left": 200, "height": side, "width": side}
        reference = F.resized_crop(full, **box, size=[SIZE, SIZE], antialias=True)
        row = f"  crop {side:4d} px: detail {_detail(reference):5.1f}"
        for scale, image in scaled.items():
            out = F.resized_crop(image, **{k: v // scale for k, v in box.items()}, size=[SIZE, SIZE], antialias=True)
            difference = (reference.int() - out.int()).abs().float().mean()
            row += f" | 1/{scale}: {side // scale:4d} px crop, mean |diff| {difference:5.2f}, detail {_detail(out):5.1f}"
        print(row)
    timings = ", ".join(
        f"1/{s} {_best_ms(lambda s=s: decode_image(data, draft_size=(2048 // s, 1536 // s), contiguous=False)):.1f} ms"
        for s in (2, 4)
    )
    print(f"  decode of this 2048x1536 JPEG: full {_best_ms(lambda: decode_image(data, contiguous=False)):.1f} ms, {timings}")
    print(f"  train_transform({SIZE}).draft_size = {train_transform(SIZE).draft_size}: drafts only photos "
          f"whose smallest possible crop stays >= {SIZE} px at the reduced scale")
    torch.set_num_threads(os.cpu_count() or 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="64 photos, 2 rounds: a smoke run")
    parser.add_argument("--draft", action="store_true", help="also measure reduced-scale JPEG decoding")
    parser.add_argument("--images", type=int, default=None, help="number of photos (default 300, quick 64)")
    parser.add_argument("--rounds", type=int, default=None, help="alternating rounds (default 6, quick 2)")
    args = parser.parse_args()
    count = args.images or (64 if args.quick else 300)
    rounds = args.rounds or (2 if args.quick else 6)
    with tempfile.TemporaryDirectory(prefix="bench-vision-") as tmp:
        start = time.perf_counter()
        paths = make_photos(Path(tmp), count)
        kilobytes = sum(p.stat().st_size for p in paths) / len(paths) / 1024
        print(f"{count} photo-like JPEGs, ~500 px, {kilobytes:.0f} KB average, generated in "
              f"{time.perf_counter() - start:.1f}s; batch {BATCH}, {WORKERS} workers, "
              f"{len(os.sched_getaffinity(0))} CPUs, load average {os.getloadavg()[0]:.1f}")
        print(f"\n== loaders, one epoch each in turn, {rounds} rounds ==")
        compare_loaders(Path(tmp), rounds)
        print("\n== ceiling: one core, no loader ==")
        ceiling = decode_ceiling(paths)
        print(f"  -> {WORKERS} workers could at most deliver ~{WORKERS * ceiling:.0f} images/s of ours")
        if args.draft:
            draft_study(Path(tmp))


if __name__ == "__main__":
    main()
