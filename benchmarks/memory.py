"""Worker memory: CocoDataset + detection_loader vs torchvision's CocoDetection in a plain DataLoader.

    python benchmarks/memory.py            # 10k images, ~75k polygon annotations, 3 rounds
    python benchmarks/memory.py --quick    # 1k images, 1 round: a smoke run

Each measurement runs in a fresh process (so the parent's heap is a training script's, not
this script's): build the dataset, fork 2 persistent workers, make one full pass in order,
and read each worker's USS (memory private to it, ``psutil.memory_full_info().uss``) right
after the fork and after the pass. The mean of the two workers is reported, median over
rounds; the two sides alternate round by round.

- ours: ``CocoDataset`` (a few flat numpy arrays) and ``detection_loader`` (workers freeze the
  objects they inherit from the garbage collector).
- peer: ``wrap_dataset_for_transforms_v2(CocoDetection(root, ann, transform=v2.ToImage()))``
  (pycocotools' ``COCO`` object: a dict per annotation) in ``DataLoader(num_workers=2,
  persistent_workers=True)`` with the list collate of torchvision's detection reference.

Two regimes: a plain pass (it may not run a single full collection in a worker), and a long
run, simulated by a full ``gc.collect()`` every 100 items in each worker (the same wrapper on
both sides): hours of training run many, and each one writes to (so copies) every object it
visits, the inherited ones included unless they were frozen.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Run from a checkout without `pip install -e .`: make the repository's recipes (and the
# detection benchmark's data generator) importable.
HERE = Path(__file__).resolve().parent
sys.path.insert(1, str(HERE.parent))
sys.path.insert(1, str(HERE))

SIDES = ("ours", "torchvision")
REGIMES = {"plain pass": 0, "long run": 100}
BATCH_SIZE = 16


class CollectEvery:
    """``dataset[i]``, with a full garbage collection every ``every`` items (0: never)."""

    def __init__(self, dataset, every: int) -> None:
        self.dataset, self.every, self.count = dataset, every, 0

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int):
        self.count += 1
        if self.every and self.count % self.every == 0:
            import gc

            gc.collect()
        return self.dataset[index]


def list_collate(batch):
    """torchvision's detection reference collate: ``tuple(zip(*batch))``."""
    return tuple(zip(*batch))


def child(side: str, folder: Path, every: int) -> None:
    """One measurement (runs in a fresh process); prints JSON with start/end USS per worker."""
    import psutil
    from torch.utils.data import DataLoader

    root, ann_file = folder / "images", folder / "instances.json"
    if side == "ours":
        from recipes.detection import CocoDataset, detection_loader

        dataset = CollectEvery(CocoDataset(root, ann_file), every)
        loader = detection_loader(dataset, BATCH_SIZE, train=False, device="cpu", num_workers=2,
                                  multiprocessing_context="fork")
    else:
        from detection import theirs  # benchmarks/detection.py: the same wrapped CocoDetection

        dataset = CollectEvery(theirs(root, ann_file), every)
        loader = DataLoader(dataset, BATCH_SIZE, num_workers=2, persistent_workers=True, collate_fn=list_collate,
                            multiprocessing_context="fork")
    iterator = iter(loader)
    workers = [psutil.Process(worker.pid) for worker in iterator._workers]
    start = [worker.memory_full_info().uss for worker in workers]
    began = time.perf_counter()
    batches = sum(1 for _ in iterator)
    end = [worker.memory_full_info().uss for worker in workers]
    print(json.dumps({"start": start, "end": end, "batches": batches, "seconds": time.perf_counter() - began}))


def measure(side: str, folder: Path, every: int) -> dict:
    command = [sys.executable, __file__, "--child", side, str(folder), str(every)]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1k images, 1 round")
    parser.add_argument("--child", nargs=3, metavar=("SIDE", "FOLDER", "EVERY"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        side, folder, every = args.child
        child(side, Path(folder), int(every))
        return
    from detection import make_coco  # benchmarks/detection.py

    images, rounds = (1_000, 1) if args.quick else (10_000, 3)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        make_coco(folder, images)
        count = len(json.loads((folder / "instances.json").read_bytes())["annotations"])
        print(f"synthetic COCO: {images} images, {count} polygon annotations; 2 forked persistent workers, "
              f"batch {BATCH_SIZE}, one pass in order; mean worker USS, median of {rounds} round(s)")
        for regime, every in REGIMES.items():
            runs: dict[str, list[dict]] = {side: [] for side in SIDES}
            for round_number in range(rounds):
                for side in SIDES if round_number % 2 == 0 else reversed(SIDES):
                    runs[side].append(measure(side, folder, every))
            after = {s: statistics.median(statistics.mean(r["end"]) / 2**20 for r in runs[s]) for s in SIDES}
            growth = {
                s: statistics.median(statistics.mean(e - b for b, e in zip(r["start"], r["end"])) / 2**20 for r in runs[s])
                for s in SIDES
            }
            print(
                f"{regime:<11} after the pass: ours {after['ours']:7.1f} MB   torchvision {after['torchvision']:7.1f} MB"
                f"   -> {after['ours'] / after['torchvision']:5.2f} of the peer's   "
                f"(growth during the pass: {growth['ours']:.1f} vs {growth['torchvision']:.1f} MB)"
            )


if __name__ == "__main__":
    main()
