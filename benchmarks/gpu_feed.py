"""decode="device" against decode="worker" on one GPU, in one run and one table: limits, loaders, feeds.

    python benchmarks/gpu_feed.py                         # on a CUDA machine, ~3 minutes
    python benchmarks/gpu_feed.py --device cpu --quick    # the smoke run the tests use: tiny, on the CPU

Every row reads the same photo-like ~500 px JPEGs, RandomResizedCrop(224) + flip, batch 256:
- ceiling: a training step (random init, channels_last, bf16 autocast, SGD) on a batch already on
  the device, for ResNet-50 and ResNet-18: what a feed is held against;
- decode limit: TorchCodec's batched decode (nvJPEG) of files in memory, alone, then with
  decode="device"'s batch crop, resize and flip (recipes.core.pixels.device_augment): no loader;
- loader only: torchvision ImageFolder + v2 and decode="worker" with every usable core,
  decode="device" with 2 and 4 workers, batches normalised on the device and nothing else;
- feeds: the loaders feeding the ResNet-50 step, and the recipes paths feeding ResNet-18; data-wait
  is the share of the time the loop waits for its next batch.
A loader is timed after a warm-up longer than its prefetch buffer (workers x prefetch_factor
batches) for a window at least as long, synchronising the device at both ends (CONVENTIONS rule
22): a shorter window measures the buffer. The photos are made by every core; each file is listed
under several names so that one epoch covers a loader's warm-up and window. The last lines give
the crossover: the cores a GPU needs for decode="worker" to feed each model. A row that fails
prints why and the others still run (exit status 1). Without CUDA (and no --device cpu) it says
so and exits 0.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's recipes, not an installed one

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402
from torchvision.datasets import ImageFolder  # noqa: E402
from torchvision.transforms import v2  # noqa: E402

from benchmarks.vision import cpu_seconds, photo  # noqa: E402
from recipes.core.loading.device import IMAGENET_MEAN, IMAGENET_STD, DevicePrefetcher  # noqa: E402
from recipes.core.pixels.device_augment import augment_images  # noqa: E402
from recipes.core.pixels.device_decode import ImagePlan  # noqa: E402
from recipes.core.pixels.images import decode_jpegs  # noqa: E402
from recipes.core.loading.loader import usable_cpus  # noqa: E402
from recipes.vision import ImageFolderDataset, train_transform, vision_loader  # noqa: E402

PREFETCH = 4  # the presets' prefetch_factor on an accelerator (recipes.core.loading.loader), and the peer's


def write_photos(root: str, indices: range) -> list[str]:
    """JPEGs ``indices`` of the set: 500 px on the long side, 333-500 on the other, 30% portrait."""
    paths = []
    for index in indices:
        rng = np.random.default_rng([0, index])
        width, height = 500, int(rng.integers(333, 501))
        if rng.random() < 0.3:
            width, height = height, width
        path = Path(root) / f"class_{index % 10:02d}" / f"{index:05d}.jpg"
        path.parent.mkdir(parents=True, exist_ok=True)
        photo(rng, width, height).save(path, "JPEG", quality=90)
        paths.append(str(path))
    return paths


def make_photos(root: Path, count: int, copies: int, cores: int) -> list[Path]:
    """``count`` photos written by ``cores`` processes, each also listed ``copies - 1`` more times (hard links)."""
    chunks = [range(start, count, cores) for start in range(cores)]
    with ProcessPoolExecutor(cores) as pool:
        paths = [Path(path) for chunk in pool.map(write_photos, [str(root)] * cores, chunks) for path in chunk]
    for path in paths:
        for copy in range(1, copies):
            os.link(path, path.with_name(f"{path.stem}_{copy}{path.suffix}"))
    return sorted(paths)


def make_model(name: str, device: torch.device, quick: bool) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    if quick:
        model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 7, stride=4), torch.nn.AdaptiveAvgPool2d(1),
                                    torch.nn.Flatten(), torch.nn.Linear(8, 10))
    else:
        from torchvision import models

        model = getattr(models, name)(num_classes=10)
    model = model.to(device, memory_format=torch.channels_last)
    return model, torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)


def training_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, device: torch.device) -> Callable:
    def step(images: torch.Tensor, labels: torch.Tensor) -> None:
        with torch.autocast(device.type, dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(images.contiguous(memory_format=torch.channels_last)), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    return step


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(batches: Iterator, step: Callable, device: torch.device, warmup: int, window: int, batch: int) -> dict:
    """Images/s, data-wait and cores busy over ``window`` steps after ``warmup``; ``step`` runs each batch."""
    for _ in range(warmup):
        step(*next(batches))
    synchronize(device)
    waited, cpu0, start = 0.0, cpu_seconds(), time.perf_counter()
    for _ in range(window):
        before = time.perf_counter()
        images, labels = next(batches)
        waited += time.perf_counter() - before
        step(images, labels)
    synchronize(device)
    elapsed = time.perf_counter() - start
    cores = (cpu_seconds() - cpu0) / elapsed if cpu0 is not None else float("nan")  # nan: no psutil
    return {"rate": window * batch / elapsed, "wait": waited / elapsed, "cores": cores}


def repeat(make: Callable[[], Iterator]) -> Iterator:
    """The batches of ``make()``'s loader, epoch after epoch."""
    while True:
        yield from make()


def peer_feed(root: Path, batch: int, workers: int, device: torch.device) -> Iterator:
    transform = v2.Compose([v2.RandomResizedCrop(224, antialias=True), v2.RandomHorizontalFlip(), v2.PILToTensor(),
                            v2.ToDtype(torch.float32, scale=True), v2.Normalize(IMAGENET_MEAN, IMAGENET_STD)])
    loader = DataLoader(ImageFolder(str(root), transform=transform), batch_size=batch, shuffle=True, drop_last=True,
                        num_workers=workers, persistent_workers=True, pin_memory=device.type == "cuda",
                        prefetch_factor=PREFETCH)
    return ((images.to(device, non_blocking=True), labels.to(device, non_blocking=True))
            for images, labels in repeat(lambda: iter(loader)))


def recipes_feed(root: Path, batch: int, workers: int, device: torch.device, decode: str) -> Iterator:
    dataset = ImageFolderDataset(root, train_transform(224))
    loader = vision_loader(dataset, batch, device=device, seed=0, decode=decode, num_workers=workers)
    return repeat(lambda: iter(DevicePrefetcher(loader, device)))


def decode_limit(paths: list[Path], batch: int, device: torch.device, rounds: int, augment: bool) -> dict:
    """Batched decodes of files in memory, and maybe decode="device"'s batch augment: images/s, no loader."""
    files = [torch.frombuffer(bytearray(path.read_bytes()), dtype=torch.uint8) for path in paths[:batch]]
    plan, generator = ImagePlan(train_transform(224)), torch.Generator().manual_seed(0)

    def step(_: object, __: object) -> None:
        images = decode_jpegs(files, device, ["benchmark"] * len(files))
        if augment:
            with torch.random.fork_rng():
                torch.manual_seed(int(torch.randint(1 << 30, (), generator=generator)))
                params = [plan.draw(*image.shape[-2:]) for image in images]
            augment_images(images, np.array(params))

    return timed(repeat(lambda: iter([(None, None)])), step, device, 3, rounds, len(files))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--quick", action="store_true", help="a few images and steps, a tiny model")
    args = parser.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("gpu_feed: needs a CUDA GPU (none here); `--device cpu --quick` runs a CPU smoke test of every row")
        return
    quick, cores = args.quick, usable_cpus()
    batch, photos = (8, 24) if quick else (256, 1024)
    few = [2] if quick else [2, 4]  # decode="device"'s workers
    buffer = cores * PREFETCH  # the deepest prefetch buffer here: every core a worker
    warmup = window = 2 if quick else max(buffer, 30)
    copies = math.ceil((warmup + window + 2) * batch / photos)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(f"{device} ({name}), {cores} usable cores, {photos} JPEGs listed {copies}x, batch {batch}, warm-up "
          f"{warmup} and window {window} batches, torch {torch.__version__}", flush=True)
    torch.backends.cudnn.benchmark = True
    failed = False
    rows: dict[str, dict] = {}

    def row(label: str, measure: Callable[[], dict], against: str | None = None) -> None:
        nonlocal failed
        try:
            rows[label] = result = measure()
        except Exception:  # noqa: BLE001 - the other rows still run: gpu_check.sh has one try
            failed = True
            print(f"{label:<46} failed:", flush=True)
            traceback.print_exc()
            return
        share = f"{result['rate'] / rows[against]['rate']:6.0%} of ceiling" if against in rows else ""
        wait = f"data-wait {result['wait']:4.0%}" if "wait" in result and against else ""
        print(f"{label:<46} {result['rate']:8.0f} img/s  {wait:<15} cores {result['cores']:5.1f}  {share}", flush=True)

    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "photos"
        paths = make_photos(root, photos, copies, cores)
        models = {"resnet50": make_model("resnet50", device, quick), "resnet18": make_model("resnet18", device, quick)}
        steps = {key: training_step(*value, device) for key, value in models.items()}
        for key, step in steps.items():
            synthetic = torch.randn(batch, 3, 224, 224, device=device), torch.randint(0, 10, (batch,), device=device)
            row(f"ceiling: {key} step, batch on the device",
                lambda step=step, synthetic=synthetic: timed(repeat(lambda: iter([synthetic])), step, device, 5, 20, batch))
        decoder = "nvJPEG" if device.type == "cuda" else "CPU decoder"
        row(f"decode limit: {decoder}, batched", lambda: decode_limit(paths, batch, device, 20, augment=False))
        row(f"decode limit: {decoder} + batch augment", lambda: decode_limit(paths, batch, device, 20, augment=True))
        feeds = {f"recipes decode='device', {n} workers": (lambda n=n: recipes_feed(root, batch, n, device, "device"))
                 for n in few}
        feeds[f"recipes decode='worker', {cores} workers"] = lambda: recipes_feed(root, batch, cores, device, "worker")
        if device.type == "cuda":
            feeds[f"torchvision ImageFolder + v2, {cores} workers"] = lambda: peer_feed(root, batch, cores, device)
        for label, make in feeds.items():
            row(f"loader only: {label}", lambda make=make: timed(make(), lambda *_: None, device, warmup, window, batch))
        fed = {"resnet50": list(feeds), "resnet18": [f"recipes decode='device', {few[0]} workers",
                                                     f"recipes decode='worker', {cores} workers"]}
        for key, labels in fed.items():
            for label in labels:
                row(f"feed {key}: {label}", lambda make=feeds[label], step=steps[key]: timed(
                    make(), step, device, warmup, window, batch), against=f"ceiling: {key} step, batch on the device")
    worker = rows.get(f"loader only: recipes decode='worker', {cores} workers")
    for key in steps:
        ceiling = rows.get(f"ceiling: {key} step, batch on the device")
        if worker and ceiling:  # the worker path scales linearly with its workers (2 to 12, measured on an H200)
            print(f"crossover: decode='worker' feeds {key} with {ceiling['rate'] / (worker['rate'] / cores):.1f} "
                  f"cores ({worker['rate'] / cores:.0f} img/s a worker, {ceiling['rate']:.0f} img/s a step)", flush=True)
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
