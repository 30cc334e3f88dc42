"""CocoDataset vs pycocotools ``COCO()`` and torchvision's ``CocoDetection`` on a COCO-scale file.

    python benchmarks/detection.py            # 10k images, ~75k polygon annotations, 3 rounds
    python benchmarks/detection.py --quick    # 1k images, 1 round: a smoke run

The data is generated into a temporary folder: an instances file shaped like COCO's (sparse
category ids, ~23-vertex polygons, the extra image fields) and tiny JPEGs, so that decoding does
not hide the per-item cost of the index and the target. Three figures, each side by side in
alternating rounds (medians reported):

1. index build: ``CocoDataset(root, ann)`` vs ``pycocotools.coco.COCO(ann)``. Goal >= 3x faster.
2. per item: ``dataset[i]`` vs ``wrap_dataset_for_transforms_v2(CocoDetection(...))[i]`` with
   the same target keys and a tv_tensors image on both sides. Goal >= 3x faster.
3. worker memory: mean USS (private memory) of 2 persistent forked workers after a full pass,
   the same loader (``detection_loader``) around each dataset, each run in a fresh process.
   Goal <= 0.3.
4. worker transfer: a pass of ``detection_loader``'s loader with 2 workers over the first 2k
   images (batches of 32), its batches packed into one shared buffer per dtype
   (``recipes.core.workers.packing``) vs the same loader sending each tensor on its own; the main
   process alone for scale. Goal: packing clearly faster, or it goes.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

# Run from a checkout without `pip install -e .`: make the repository's recipes importable.
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

SIZES = {"landscape": (40, 30), "portrait": (30, 40)}
CATEGORY_IDS = [i for i in range(1, 91) if i not in {12, 26, 29, 30, 45, 66, 68, 69, 71, 83}]  # COCO's 80


def make_coco(folder: Path, images: int, per_image: float = 7.5, seed: int = 0) -> tuple[Path, Path]:
    """Write tiny JPEGs and a COCO instances file; return ``(image_root, ann_file)``."""
    rng = np.random.default_rng(seed)
    root = folder / "images"
    root.mkdir(parents=True, exist_ok=True)
    encoded = {}
    for kind, (w, h) in SIZES.items():
        buffer = io.BytesIO()
        Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(buffer, "JPEG", quality=90)
        encoded[kind] = buffer.getvalue()
    image_rows, annotations = [], []
    for image_id in range(1, images + 1):
        kind = "portrait" if image_id % 3 == 0 else "landscape"
        w, h = SIZES[kind]
        name = f"{image_id:012d}.jpg"
        (root / name).write_bytes(encoded[kind])
        image_rows.append(
            {
                "license": 1,
                "file_name": name,
                "coco_url": f"http://example.invalid/{name}",
                "height": h,
                "width": w,
                "date_captured": "2013-11-14 17:02:52",
                "flickr_url": f"http://example.invalid/{name}",
                "id": image_id,
            }
        )
        for _ in range(rng.poisson(per_image)):
            points = int(rng.integers(6, 40))
            xs = np.round(rng.uniform(0, w - 1, points), 2)
            ys = np.round(rng.uniform(0, h - 1, points), 2)
            x, y = float(xs.min()), float(ys.min())
            box = [x, y, round(float(xs.max()) - x + 0.5, 2), round(float(ys.max()) - y + 0.5, 2)]
            annotations.append(
                {
                    "segmentation": [np.stack([xs, ys], 1).ravel().tolist()],
                    "area": round(float(rng.uniform(1, w * h / 2)), 4),
                    "iscrowd": 0,
                    "image_id": image_id,
                    "bbox": box,
                    "category_id": int(rng.choice(CATEGORY_IDS)),
                    "id": len(annotations) + 1,
                }
            )
    ann_file = folder / "instances.json"
    ann_file.write_text(
        json.dumps(
            {
                "info": {"description": "synthetic COCO-scale benchmark file"},
                "licenses": [{"id": 1, "name": "x"}],
                "images": image_rows,
                "annotations": annotations,
                "categories": [{"supercategory": "thing", "id": i, "name": f"class{i}"} for i in CATEGORY_IDS],
            }
        )
    )
    return root, ann_file


def ours(root: Path, ann_file: Path, masks: bool = False):
    from recipes.detection import CocoDataset

    return CocoDataset(root, ann_file, masks=masks)


def theirs(root: Path, ann_file: Path, masks: bool = False):
    from torchvision.datasets import CocoDetection, wrap_dataset_for_transforms_v2
    from torchvision.transforms import v2

    keys = {"image_id", "boxes", "labels", "area", "iscrowd"} | ({"masks"} if masks else set())
    with contextlib.redirect_stdout(io.StringIO()):  # COCO() prints progress
        return wrap_dataset_for_transforms_v2(CocoDetection(root, ann_file, transform=v2.ToImage()), target_keys=keys)


def _timed(function) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def _report(name: str, a: list[float], b: list[float], unit: str, scale: float, goal: str) -> None:
    ma, mb = statistics.median(a), statistics.median(b)
    print(
        f"{name:<22} CocoDataset {ma * scale:8.2f} {unit}   peer {mb * scale:8.2f} {unit}   "
        f"-> {mb / ma:5.1f}x faster  ({goal})"
    )


def bench_index(root: Path, ann_file: Path, rounds: int) -> None:
    from pycocotools.coco import COCO

    import recipes.detection  # noqa: F401  (imports are not part of the index build)

    a, b, m = [], [], []
    for _ in range(rounds):
        a.append(_timed(lambda: ours(root, ann_file)))
        with contextlib.redirect_stdout(io.StringIO()):
            b.append(_timed(lambda: COCO(str(ann_file))))
        m.append(_timed(lambda: ours(root, ann_file, masks=True)))
    _report("index build vs COCO()", a, b, "s ", 1, "goal >= 3x")
    print(f"{'':<22} (CocoDataset with masks=True keeps the raw polygons: {statistics.median(m):.2f} s)")


def bench_items(root: Path, ann_file: Path, rounds: int, count: int, masks: bool) -> None:
    mine, peer = ours(root, ann_file, masks), theirs(root, ann_file, masks)
    indices = np.random.default_rng(1).choice(len(mine), size=min(count, len(mine)), replace=False).tolist()
    a, b = [], []
    for _ in range(rounds):
        a.append(_timed(lambda: [mine[i] for i in indices]) / len(indices))
        b.append(_timed(lambda: [peer[i] for i in indices]) / len(indices))
    name = "per item, masks" if masks else "per item"
    _report(name, a, b, "us", 1e6, "goal >= 3x" if not masks else "no goal")


def memory_child(side: str, root: Path, ann_file: Path) -> None:
    """Run in a fresh process: one full pass, 2 persistent forked workers, print their USS.

    Both datasets go through the same loader (detection_loader in order, which also freezes
    the objects workers inherit: recipes.core.loading.loader.freeze_inherited_objects), so only the
    dataset differs.
    """
    import psutil

    from recipes.detection import detection_loader

    dataset = (ours if side == "ours" else theirs)(root, ann_file)
    loader = detection_loader(dataset, 32, train=False, device="cpu", num_workers=2, multiprocessing_context="fork")
    iterator = iter(loader)
    for _ in iterator:
        pass
    pids = [worker.pid for worker in iterator._workers]
    print(json.dumps([psutil.Process(pid).memory_full_info().uss for pid in pids]))


def bench_memory(root: Path, ann_file: Path, rounds: int) -> None:
    usage = {"ours": [], "torchvision": []}
    for _ in range(rounds):
        for side, values in usage.items():
            out = subprocess.run(
                [sys.executable, __file__, "--memory-child", side, str(root), str(ann_file)],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            values.append(statistics.mean(json.loads(out.strip().splitlines()[-1])))
    a, b = statistics.median(usage["ours"]), statistics.median(usage["torchvision"])
    print(
        f"{'worker USS (mean of 2)':<22} CocoDataset {a / 2**20:8.1f} MB   peer {b / 2**20:8.1f} MB   "
        f"-> {a / b:5.2f} of the peer's  (goal <= 0.3)"
    )


def bench_transfer(root: Path, ann_file: Path, rounds: int, count: int = 2_000) -> None:
    from torch.utils.data import Subset

    from recipes.core.loading.loader import RecipeLoader, build_loader, preset_kwargs
    from recipes.core.sampling.samplers import SeededBatchSampler
    from recipes.core.sampling.seeding import SeededDataset
    from recipes.detection import detection_collate

    dataset = ours(root, ann_file)
    dataset = Subset(dataset, range(min(count, len(dataset))))

    def loader(workers: int):  # the presets' composition: packed in workers
        return build_loader(dataset, detection_collate, batch_size=32, train=False, device="cpu", num_workers=workers)

    def per_tensor(workers: int):  # the same composition written out, without packing
        kwargs = preset_kwargs("cpu", train=False, num_workers=workers)
        sampler = SeededBatchSampler(len(dataset), 32, shuffle=kwargs.pop("shuffle"), drop_last=kwargs.pop("drop_last"))
        return RecipeLoader(SeededDataset(dataset), batch_sampler=sampler, collate_fn=detection_collate, **kwargs)

    loaders = {"packed": loader(2), "per tensor": per_tensor(2), "main process": loader(0)}
    for each in loaders.values():
        _timed(lambda each=each: sum(1 for _ in each))  # start the persistent workers
    times = {name: [] for name in loaders}
    for r in range(rounds):
        for name in list(loaders)[:: 1 if r % 2 == 0 else -1]:  # alternate the order
            times[name].append(_timed(lambda name=name: sum(1 for _ in loaders[name])))
    rates = {name: len(dataset) / statistics.median(values) for name, values in times.items()}
    print(
        f"{'2-worker pass':<22} packed {rates['packed']:7.0f} img/s   per tensor {rates['per tensor']:7.0f} img/s   "
        f"-> {rates['packed'] / rates['per tensor']:5.1f}x  (main process alone: {rates['main process']:.0f} img/s)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1k images, 1 round")
    parser.add_argument("--memory-child", nargs=3, metavar=("SIDE", "ROOT", "ANN"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child:
        side, root, ann_file = args.memory_child
        memory_child(side, Path(root), Path(ann_file))
        return
    images, rounds, items = (1_000, 1, 300) if args.quick else (10_000, 5, 2_000)
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        root, ann_file = make_coco(Path(tmp), images)
        count = len(json.loads(ann_file.read_bytes())["annotations"])
        print(
            f"synthetic COCO: {images} images, {count} polygon annotations, "
            f"{ann_file.stat().st_size / 1e6:.1f} MB JSON (made in {time.perf_counter() - start:.1f}s)"
        )
        bench_index(root, ann_file, rounds)
        bench_items(root, ann_file, rounds, items, masks=False)
        bench_items(root, ann_file, rounds, items // 4, masks=True)
        bench_memory(root, ann_file, min(rounds, 2))
        bench_transfer(root, ann_file, rounds)


if __name__ == "__main__":
    main()
