"""Feeding a ResNet-50 training step on one GPU: worker decoding against decode="device".

    python benchmarks/gpu_feed.py                         # on a CUDA machine, ~3-4 minutes
    python benchmarks/gpu_feed.py --device cpu --quick    # smoke run of (b) and (c) on CPU, tiny model

A ResNet-50 step (random init, channels_last, bf16 autocast, SGD) fed three ways from the same
generated photo-like ~500 px JPEGs, RandomResizedCrop(224) + flip:
(a) torchvision ``ImageFolder`` + v2 (PIL decode, float per image) with every usable core;
(b) ``vision_loader(decode="worker")`` with every usable core, ``DevicePrefetcher`` normalising;
(c) ``vision_loader(decode="device")`` with 2 workers: bytes and crop boxes from the workers,
    nvJPEG decode and crop/resize/flip in ``DevicePrefetcher``.
Each line: images/s, data-wait (share of the time the loop waits for its next batch) and CPU
cores busy (main process + workers, from psutil). Each JPEG is listed under several names, so
that one epoch covers the warm-up and timed steps: a loader does not prefetch across epochs,
and 2048 images are only 8 batches, fewer than the workers. A feed that fails prints why and
the others still run (exit status 1). Without CUDA (and no ``--device cpu``) it says so and
exits 0.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's recipes, not an installed one

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402
from torchvision.datasets import ImageFolder  # noqa: E402
from torchvision.transforms import v2  # noqa: E402

from benchmarks.vision import cpu_seconds, make_photos  # noqa: E402
from recipes.core.device import IMAGENET_MEAN, IMAGENET_STD, DevicePrefetcher  # noqa: E402
from recipes.core.loader import usable_cpus  # noqa: E402
from recipes.vision import ImageFolderDataset, train_transform, vision_loader  # noqa: E402


def list_again(paths: list[Path], copies: int) -> None:
    """Each file ``copies - 1`` more times under other names (hard links where the file system has them)."""
    for path in paths:
        for copy in range(1, copies):
            again = path.with_name(f"{path.stem}_{copy}{path.suffix}")
            try:
                os.link(path, again)
            except OSError:
                shutil.copyfile(path, again)


def make_model(device: torch.device, quick: bool) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    if quick:
        model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 7, stride=4), torch.nn.AdaptiveAvgPool2d(1),
                                    torch.nn.Flatten(), torch.nn.Linear(8, 10))
    else:
        from torchvision.models import resnet50

        model = resnet50(num_classes=10)
    model = model.to(device, memory_format=torch.channels_last)
    return model, torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)


def peer_batches(root: Path, batch: int, workers: int, device: torch.device):
    transform = v2.Compose([v2.RandomResizedCrop(224, antialias=True), v2.RandomHorizontalFlip(), v2.PILToTensor(),
                            v2.ToDtype(torch.float32, scale=True), v2.Normalize(IMAGENET_MEAN, IMAGENET_STD)])
    loader = DataLoader(ImageFolder(str(root), transform=transform), batch_size=batch, shuffle=True, drop_last=True,
                        num_workers=workers, persistent_workers=True, pin_memory=device.type == "cuda",
                        prefetch_factor=4)
    while True:
        for images, labels in loader:
            yield images.to(device, non_blocking=True), labels.to(device, non_blocking=True)


def recipes_batches(root: Path, batch: int, workers: int, device: torch.device, decode: str):
    dataset = ImageFolderDataset(root, train_transform(224))
    loader = vision_loader(dataset, batch, device=device, seed=0, decode=decode, num_workers=workers)
    while True:
        yield from DevicePrefetcher(loader, device)


def measure(name: str, batches, model, optimizer, device: torch.device, steps: int, warmup: int, batch: int) -> None:
    def step(images: torch.Tensor, labels: torch.Tensor) -> None:
        with torch.autocast(device.type, dtype=torch.bfloat16):
            logits = model(images.contiguous(memory_format=torch.channels_last))
            loss = torch.nn.functional.cross_entropy(logits, labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if device.type == "cuda":
            torch.cuda.synchronize()  # honest timing: the step is done when the next wait starts

    for _ in range(warmup):
        step(*next(batches))
    waited, cpu0, start = 0.0, cpu_seconds(), time.perf_counter()
    for _ in range(steps):
        before = time.perf_counter()
        images, labels = next(batches)
        waited += time.perf_counter() - before
        step(images, labels)
    elapsed = time.perf_counter() - start
    cores = (cpu_seconds() - cpu0) / elapsed if cpu0 is not None else float("nan")  # nan: no psutil
    print(f"{name:<44} {steps * batch / elapsed:8.0f} img/s   data-wait {waited / elapsed:4.0%}   cores {cores:5.1f}",
          flush=True)
    batches.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--quick", action="store_true", help="a few images and steps, a tiny model")
    parser.add_argument("--images", type=int, default=None)
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--steps", type=int, default=None)
    args = parser.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("gpu_feed: needs a CUDA GPU (none here); `--device cpu --quick` runs a CPU smoke test of (b) and (c)")
        return
    quick = args.quick
    images = args.images or (48 if quick else 2048)
    batch = args.batch_size or (8 if quick else 256)
    steps, warmup = args.steps or (4 if quick else 40), 2 if quick else 10
    cores, copies = usable_cpus(), math.ceil((warmup + steps) * batch / images)
    print(f"{device} ({torch.cuda.get_device_name(device) if device.type == 'cuda' else 'CPU'}), {cores} usable cores, "
          f"{images} JPEGs listed {copies}x, batch {batch}, {steps} timed steps, torch {torch.__version__}", flush=True)
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "photos"
        list_again(make_photos(root, images), copies)
        model, optimizer = make_model(device, quick)
        torch.manual_seed(0)
        np.random.seed(0)
        feeds = [] if device.type != "cuda" else [("(a) torchvision ImageFolder + v2, %d workers" % cores,
                                                   peer_batches(root, batch, cores, device))]
        feeds += [
            (f"(b) recipes decode='worker', {cores} workers", recipes_batches(root, batch, cores, device, "worker")),
            ("(c) recipes decode='device', 2 workers", recipes_batches(root, batch, 2, device, "device")),
        ]
        failed = False
        for name, batches in feeds:
            try:
                measure(name, batches, model, optimizer, device, steps, warmup, batch)
            except Exception:  # noqa: BLE001 - the other feeds still run: gpu_check.sh has one try
                failed = True
                print(f"{name:<44} failed:", flush=True)
                traceback.print_exc()
                batches.close()
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
