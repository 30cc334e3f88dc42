"""Image shards: recipes' ImageShards against webdataset, litdata and its own image folder; S3; CocoShards.

    python benchmarks/shards.py            # 320 photos in 4 shards, 2 workers, 5 rounds (~3 min)
    python benchmarks/shards.py --quick    # a smoke run: 64 photos, 2 rounds
    python benchmarks/shards.py --photos 1280   # longer passes: less of each is the pipeline filling

The photos are benchmarks/vision.py's (~500 px photo-like JPEGs, q90, 30% portrait), written once
as an image folder, once by ``recipes.vision.write_shards`` as WebDataset shards (``key.jpg`` +
``key.cls``) and once by ``litdata.optimize`` as its chunks of ``{"jpg": bytes, "cls": int}``. Every
contender runs RandomResizedCrop(224) + flip, batches of 32, 2 workers, uint8 batches (what a GPU
run asks of the CPU), nothing shuffled:

- recipes: ``vision_loader(ImageShards(shards, transform=train_transform(224)), 32, num_workers=2)``;
- webdataset as its README writes it: ``WebDataset(urls).decode("pil").to_tuple("jpg", "cls")
  .map_tuple(v2.Compose([RandomResizedCrop(224), RandomHorizontalFlip(), PILToTensor()]), int)``
  in a ``DataLoader(batch_size=32, num_workers=2)``;
- webdataset at its fastest: raw bytes, ``torchvision.io.decode_image`` to uint8, then the same
  ``train_transform(224)`` on uint8 tensors as recipes';
- litdata: ``StreamingDataset(dir, transform=...)`` decoding the same fast way, in its ``StreamingDataLoader``;
- recipes' ``ImageFolderDataset`` on the same photos as files, through the same preset;
- ``ImageShards`` from a local S3 server (moto's, in a child process so that its threads take no
  turns on the loader's interpreter lock), with a ``cache_dir`` warmed by the warm-up pass.

Each pass builds its loader anew: "first batch" runs from building the dataset (its index read
included) to the first batch; samples/s counts what arrives after it; worker USS is the largest
unique memory of a worker (psutil) at the pass's middle batch. One warm-up pass each, then the
contenders alternate pass by pass, the order reversed every other round; medians, ratios per round.
Last, ``CocoShards`` per item against ``CocoDataset`` on the same photos (a COCO file of 7 random
boxes a photo, written as shards by ``recipes.detection.write_shards``), in this process, alternating.
A peer that is not installed (the ``bench`` extra) is skipped with a line saying so.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import multiprocessing
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import torch
from torch.utils.data import DataLoader
from torchvision.io import ImageReadMode, decode_image
from torchvision.transforms import v2

if __package__ in (None, ""):  # run as a script from a checkout: make the repo's recipes importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from vision import cpu_seconds, make_photos  # noqa: E402  (benchmarks/vision.py: the same photos)

import recipes.detection as detection  # noqa: E402
from recipes.core import StreamOrder  # noqa: E402
from recipes.vision import ImageFolderDataset, ImageShards, train_transform, vision_loader, write_shards  # noqa: E402

# torchvision 0.29 deprecates its decoders for TorchCodec and warns on every call: it is the peers'
# decoder here, so that warning is silenced, and so is torch's on a tensor over read-only bytes.
warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"torchvision\.io")
warnings.filterwarnings("ignore", message="The given buffer is not writable")

BATCH, WORKERS, SIZE = 32, 2, 224
BUCKET = "bench"


# ---------------------------------------------------------------- the peers' pipelines


def fast_decode(data: bytes | memoryview) -> torch.Tensor:
    """uint8 [3,H,W] by ``torchvision.io.decode_image``, the fastest public decode a peer has."""
    return decode_image(torch.frombuffer(data, dtype=torch.uint8), mode=ImageReadMode.RGB)


class FastSample:
    """Encoded bytes -> ``train_transform(224)`` of their uint8 decode (the same transform as recipes')."""

    def __init__(self) -> None:
        self.transform = train_transform(SIZE)

    def __call__(self, data: bytes | memoryview) -> torch.Tensor:
        return self.transform(fast_decode(data))


class LitdataSample(FastSample):
    def __call__(self, sample: dict[str, Any]) -> tuple[torch.Tensor, int]:  # type: ignore[override]
        return super().__call__(sample["jpg"]), int(sample["cls"])


def readme_transform() -> v2.Compose:
    """webdataset's README: PIL images through v2, to a uint8 tensor."""
    return v2.Compose([v2.RandomResizedCrop(SIZE, antialias=True), v2.RandomHorizontalFlip(), v2.PILToTensor()])


def webdataset_loader(urls: list[str], *, fastest: bool) -> DataLoader:
    import webdataset as wds

    dataset = wds.WebDataset(urls, shardshuffle=False, empty_check=False)
    if fastest:
        dataset = dataset.to_tuple("jpg", "cls").map_tuple(FastSample(), int)
    else:
        dataset = dataset.decode("pil").to_tuple("jpg", "cls").map_tuple(readme_transform(), int)
    return DataLoader(dataset, batch_size=BATCH, num_workers=WORKERS)


def litdata_item(path: str) -> dict[str, Any]:
    return {"jpg": Path(path).read_bytes(), "cls": int(Path(path).parent.name.split("_")[1])}


def write_litdata(paths: list[Path], out: Path) -> None:
    import litdata

    # optimize() sets the process-wide start method to "spawn" (force=True): every DataLoader after it
    # would start its workers by re-importing this script. Put it back.
    method = multiprocessing.get_start_method(allow_none=True)
    try:
        litdata.optimize(fn=litdata_item, inputs=[str(path) for path in paths], output_dir=str(out),
                         chunk_bytes="64MB", num_workers=WORKERS, verbose=False)
    finally:
        multiprocessing.set_start_method(method, force=True)


def litdata_loader(folder: Path) -> Any:
    import litdata

    return litdata.StreamingDataLoader(litdata.StreamingDataset(str(folder), transform=LitdataSample()),
                                       batch_size=BATCH, num_workers=WORKERS)


# ---------------------------------------------------------------- S3: moto's server in a child process


class S3Server:
    """moto's S3 server on a free local port, in a child process, with the shards uploaded."""

    def __init__(self, shards: list[Path]) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        self.endpoint = f"http://127.0.0.1:{port}"
        self.process = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.options = {"key": "testing", "secret": "testing", "endpoint_url": self.endpoint,
                        "client_kwargs": {"region_name": "us-east-1"}}
        import boto3

        client = boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id="testing",
                              aws_secret_access_key="testing", region_name="us-east-1")
        for _ in range(100):
            try:
                client.create_bucket(Bucket=BUCKET)
                break
            except Exception:  # not listening yet
                time.sleep(0.1)
        for shard in shards:
            client.put_object(Bucket=BUCKET, Key=shard.name, Body=shard.read_bytes())
        self.urls = [f"s3://{BUCKET}/{shard.name}" for shard in shards]

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(10)


# ---------------------------------------------------------------- timing


def worker_uss(exclude: int | None) -> float | None:
    """The largest unique memory (MiB) of this process's children but ``exclude`` (the S3 server):
    the loader's workers."""
    sizes = []
    for child in psutil.Process().children(recursive=True):
        if child.pid == exclude:
            continue
        try:
            sizes.append(child.memory_full_info().uss / 2**20)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return max(sizes) if sizes else None


def timed_pass(make: Callable[[], Any], exclude: int | None) -> tuple[int, float, float, float | None, float | None]:
    """``(samples, samples/s after the first batch, seconds to the first batch, CPU s, worker USS MiB)``
    of one pass through a loader built by ``make``; the loader and its workers are gone on return."""
    cpu, start = cpu_seconds(exclude), time.perf_counter()
    loader = make()
    count = batches = first_count = 0
    first = uss = None
    for images, _ in loader:
        count, batches = count + len(images), batches + 1
        if first is None:
            first, first_count = time.perf_counter(), len(images)
        if batches == 4:
            uss = worker_uss(exclude)
    end = time.perf_counter()
    del loader
    gc.collect()
    spent = cpu_seconds(exclude)
    return count, (count - first_count) / (end - first), first - start, None if cpu is None else spent - cpu, uss


def alternate(runs: dict[str, Callable[[], Any]], rounds: int, exclude: int | None, expect: int) -> dict:
    for name, make in runs.items():  # warm-up: page cache, imports, the S3 cache
        count = timed_pass(make, exclude)[0]
        if not expect - 2 * WORKERS * BATCH <= count <= expect:
            raise RuntimeError(f"{name}: {count} samples in a pass of {expect}")
    results = {name: {"rate": [], "first": [], "cpu": [], "uss": []} for name in runs}
    for round_ in range(rounds):
        for name in list(runs) if round_ % 2 == 0 else list(runs)[::-1]:
            count, rate, first, cpu, uss = timed_pass(runs[name], exclude)
            results[name]["rate"].append(rate)
            results[name]["first"].append(first)
            if cpu is not None:
                results[name]["cpu"].append(cpu / count)
            if uss is not None:
                results[name]["uss"].append(uss)
    return results


def report(results: dict, ratios: list[tuple[str, str, float]]) -> None:
    print(f"  {'':44s} {'samples/s':>9s} {'CPU us/sample':>13s} {'first batch':>11s} {'worker USS':>10s}  rounds")
    for name, result in results.items():
        cpu = f"{statistics.median(result['cpu']) * 1e6:13.0f}" if result["cpu"] else f"{'':13s}"
        uss = f"{statistics.median(result['uss']):6.0f} MiB" if result["uss"] else f"{'':10s}"
        print(f"  {name:44s} {statistics.median(result['rate']):9.0f} {cpu} "
              f"{statistics.median(result['first']) * 1e3:8.0f} ms {uss}  "
              + ", ".join(f"{v:.0f}" for v in result["rate"]))
    for peer, what, goal in ratios:
        if peer not in results:
            continue
        per_round = [a / b for a, b in zip(results["recipes ImageShards"]["rate"], results[peer]["rate"])]
        ratio = statistics.median(per_round)
        verdict = f"goal >= {goal:.2f}x: {'met' if ratio >= goal else 'NOT met'}"
        print(f"  {what}: {ratio:.2f}x median ({verdict}; per round: {', '.join(f'{r:.2f}' for r in per_round)})")


def photo_coco(paths: list[Path], out: Path, per_image: int = 7, seed: int = 0) -> Path:
    """A COCO instances file over the photos (``file_name`` relative to their folder's parent):
    ``per_image`` boxes each, inside the image, of 10 categories."""
    import json

    from PIL import Image

    rng = np.random.default_rng(seed)
    images, annotations = [], []
    for image_id, path in enumerate(paths, start=1):
        width, height = Image.open(path).size
        name = f"{path.parent.name}/{path.name}"
        images.append({"id": image_id, "file_name": name, "width": width, "height": height})
        for _ in range(per_image):
            w, h = float(rng.uniform(8, width / 2)), float(rng.uniform(8, height / 2))
            x, y = float(rng.uniform(0, width - w)), float(rng.uniform(0, height - h))
            category = int(rng.integers(1, 11))
            annotations.append({"id": len(annotations) + 1, "image_id": image_id, "category_id": category,
                                "bbox": [x, y, w, h], "area": w * h, "iscrowd": 0})
    categories = [{"id": k, "name": f"class_{k}"} for k in range(1, 11)]
    out.write_text(json.dumps({"images": images, "annotations": annotations, "categories": categories}))
    return out


def bench_coco(folder: Path, paths: list[Path], rounds: int) -> None:
    """CocoShards per item against CocoDataset per item, on the same photos and boxes, in this process."""
    root, ann_file = folder / "photos", photo_coco(paths, folder / "instances.json")
    shards = detection.write_shards(root, ann_file, folder / "coco-shards", samples_per_shard=len(paths) // 4)

    def dataset_pass() -> float:
        dataset, start = detection.CocoDataset(root, ann_file), time.perf_counter()
        count = sum(1 for index in range(len(dataset)) if dataset[index] is not None)
        return count / (time.perf_counter() - start)

    def shards_pass() -> float:
        stream, start = detection.CocoShards(shards, order=StreamOrder(seed=0)), time.perf_counter()
        count = sum(1 for _ in stream)
        return count / (time.perf_counter() - start)

    dataset_pass(), shards_pass()
    ratios, rates = [], {"CocoDataset": [], "CocoShards": []}
    for round_ in range(rounds):
        if round_ % 2 == 0:  # alternate which goes first
            a, b = dataset_pass(), shards_pass()
        else:
            b, a = shards_pass(), dataset_pass()
        rates["CocoDataset"].append(a)
        rates["CocoShards"].append(b)
        ratios.append(b / a)
    print(f"\nCOCO items in this process ({len(paths)} photos, 7 boxes each; building the dataset included)")
    for name, values in rates.items():
        print(f"  {name:44s} {statistics.median(values):9.0f} items/s  rounds: {', '.join(f'{v:.0f}' for v in values)}")
    ratio = statistics.median(ratios)
    print(f"  CocoShards / CocoDataset: {ratio:.2f}x median (goal >= 0.90x: {'met' if ratio >= 0.9 else 'NOT met'}; "
          f"per round: {', '.join(f'{r:.2f}' for r in ratios)})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="64 photos, 2 rounds")
    parser.add_argument("--photos", type=int, default=320, help="photos written (default 320), in 4 shards")
    args = parser.parse_args()
    photos, rounds = (64, 2) if args.quick else (args.photos, 5)
    peers = {}
    for module in ("webdataset", "litdata"):
        try:
            peers[module] = importlib.import_module(module)
        except ImportError:
            print(f"{module} is not installed: its rows are skipped (pip install -e '.[bench]')")
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        paths = make_photos(scratch / "photos", photos)
        shards = write_shards(scratch / "photos", scratch / "shards", samples_per_shard=photos // 4)
        server = S3Server(shards)
        try:
            options = {"device": "cpu", "seed": 0, "num_workers": WORKERS}
            transform, order = train_transform(SIZE), StreamOrder(shuffle_buffer=0, seed=0)
            runs = {
                "recipes ImageShards": lambda: vision_loader(ImageShards(shards, transform=transform, order=order),
                                                             BATCH, **options),
                "recipes ImageFolderDataset": lambda: vision_loader(ImageFolderDataset(scratch / "photos", transform),
                                                                    BATCH, **options),
                "recipes ImageShards, S3, warm cache_dir": lambda: vision_loader(
                    ImageShards(server.urls, transform=transform, order=order, storage_options=server.options,
                                cache_dir=scratch / "s3-cache"), BATCH, **options),
            }
            if "webdataset" in peers:
                urls = [str(shard) for shard in shards]
                runs["webdataset, README (PIL + v2)"] = lambda: webdataset_loader(urls, fastest=False)
                runs["webdataset, fastest (decode_image + v2 uint8)"] = lambda: webdataset_loader(urls, fastest=True)
            if "litdata" in peers:
                write_litdata(paths, scratch / "litdata")
                runs["litdata StreamingDataset (decode_image)"] = lambda: litdata_loader(scratch / "litdata")
            results = alternate(runs, rounds, server.process.pid, photos)
        finally:
            server.close()
        print(f"\n{photos} photos in {len(shards)} shards; RandomResizedCrop({SIZE}) + flip, batch {BATCH}, "
              f"{WORKERS} workers, uint8; {rounds} rounds")
        report(results, [
            ("webdataset, README (PIL + v2)", "ImageShards / webdataset as its README writes it", 1.5),
            ("webdataset, fastest (decode_image + v2 uint8)", "ImageShards / webdataset at its fastest", 1.2),
            ("litdata StreamingDataset (decode_image)", "ImageShards / litdata", 1.2),
            ("recipes ImageFolderDataset", "ImageShards / ImageFolderDataset on the same files", 0.95),
        ])
        s3 = [a / b for a, b in zip(results["recipes ImageShards, S3, warm cache_dir"]["rate"],
                                    results["recipes ImageShards"]["rate"])]
        print(f"  ImageShards from S3 with a warm cache_dir / local shards: {statistics.median(s3):.2f}x median "
              f"(goal >= 0.90x: {'met' if statistics.median(s3) >= 0.9 else 'NOT met'}; "
              f"per round: {', '.join(f'{r:.2f}' for r in s3)})")
        bench_coco(scratch, paths, rounds)


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
