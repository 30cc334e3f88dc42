"""Forked workers stay small: 50k annotations, 2 persistent workers, USS measured before and after a pass."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

REPO = Path(__file__).resolve().parents[2]

# Run in a fresh process, so the parent's heap is what a training script's would be.
PROBE = r"""
import gc, json, statistics, sys
from pathlib import Path
import psutil
import recipes.core.loading.loader
from recipes.detection import CocoDataset, detection_loader

if sys.argv[2] == "unfrozen":  # the counterfactual: workers not frozen
    recipes.core.loading.loader.freeze_inherited_objects = lambda worker_id, then=None: None
# A long run holds many full collections; this brings them into a short pass (a low threshold
# alone does not: whether a full collection runs depends on the heap's history). Each full
# collection writes to every object it visits, so what it visits is copied into the worker.
class CollectSometimes:
    def __init__(self):
        self.count = 0

    def __call__(self, image, target):
        self.count += 1
        if self.count % 200 == 0:
            gc.collect()
        return image, target

folder = Path(sys.argv[1])
dataset = CocoDataset(folder / "images", folder / "instances.json", transforms=CollectSometimes())
loader = detection_loader(dataset, 16, train=False, device="cpu", num_workers=2, multiprocessing_context="fork")
iterator = iter(loader)
workers = [psutil.Process(worker.pid) for worker in iterator._workers]
start = [worker.memory_full_info().uss for worker in workers]
batches = sum(1 for _ in iterator)
end = [worker.memory_full_info().uss for worker in workers]
print(json.dumps({"annotations": len(dataset.index.ann_ids), "batches": batches, "start": start, "end": end}))
"""


def write_coco(folder: Path, images: int, per_image: int) -> None:
    """``images`` entries over three tiny files, ``per_image`` boxes (and a polygon) each."""
    root = folder / "images"
    root.mkdir()
    rng = np.random.default_rng(0)
    sizes = [(40, 30), (30, 40), (32, 32)]
    for k, (w, h) in enumerate(sizes):
        Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(root / f"{k}.jpg", quality=90)
    rows, annotations = [], []
    for image_id in range(1, images + 1):
        w, h = sizes[image_id % 3]
        rows.append({"id": image_id, "file_name": f"{image_id % 3}.jpg", "width": w, "height": h})
        for j in range(per_image):
            annotations.append({
                "id": len(annotations) + 1, "image_id": image_id, "category_id": 1 + j % 5,
                "bbox": [1.0 + j, 2.0, 10.5, 8.25], "area": 86.6, "iscrowd": 0,
                "segmentation": [[1, 2, 11, 2, 11, 10, 1, 10]],
            })
    categories = [{"id": c, "name": f"class{c}"} for c in range(1, 6)]
    doc = {"images": rows, "annotations": annotations, "categories": categories}
    (folder / "instances.json").write_text(json.dumps(doc), encoding="utf-8")


def worker_growth_mb(folder: Path, mode: str) -> tuple[float, dict]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run(
        [sys.executable, "-c", PROBE, str(folder), mode], capture_output=True, text=True, env=env, timeout=600, check=False
    )
    assert result.returncode == 0, result.stderr
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    growth = np.mean(np.subtract(figures["end"], figures["start"])) / 2**20
    return float(growth), figures


@pytest.mark.slow
def test_worker_memory_stays_flat_over_a_pass_of_50k_annotations(tmp_path):
    write_coco(tmp_path, images=5_000, per_image=10)
    frozen, figures = worker_growth_mb(tmp_path, "frozen")
    assert figures["annotations"] == 50_000 and figures["batches"] == 313
    print(f"mean worker USS growth over a pass of {figures['annotations']} annotations: {frozen:.1f} MB "
          f"(end: {[round(v / 2**20, 1) for v in figures['end']]} MB)")
    assert frozen < 50
    # The counterfactual shows the test can fail: the same pass without the freeze copies the
    # inherited interpreter heap (~80 MB here) into each worker.
    unfrozen, _ = worker_growth_mb(tmp_path, "unfrozen")
    print(f"the same without gc.freeze in the workers: {unfrozen:.1f} MB")
    assert unfrozen > frozen + 30
