"""One rank's view of the detection loaders, run by torchrun (tests/detection/test_ranks.py) or alone.

    python -m torch.distributed.run --standalone --nproc_per_node=3 -m tests.detection.ranks OUT CONFIG

Run alone (no process group) the same ``report`` is the single-process reference.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from torchvision.transforms import v2

from recipes.detection import CocoDataset, detection_loader
from tests.harness import rank_main, sample_passes, train_passes


def build(fixtures: Path, folder: Path, size: int = 41) -> dict[str, Any]:
    """A COCO file of ``size`` images copied round-robin from the fixture's 10 (portrait,
    landscape, square, one without boxes), each with its annotations under new ids."""
    coco = json.loads((fixtures / "detection" / "instances.json").read_text())
    by_image = {image["id"]: [a for a in coco["annotations"] if a["image_id"] == image["id"]] for image in coco["images"]}
    (folder / "images").mkdir()
    images, annotations = [], []
    for number in range(size):
        source = coco["images"][number % len(coco["images"])]
        image = {**source, "id": number + 1, "file_name": f"{number:04d}.jpg"}
        shutil.copy(fixtures / "detection" / "images" / source["file_name"], folder / "images" / image["file_name"])
        images.append(image)
        for annotation in by_image[source["id"]]:
            annotations.append({**annotation, "id": len(annotations) + 1, "image_id": image["id"]})
    (folder / "instances.json").write_text(json.dumps({**coco, "images": images, "annotations": annotations}))
    return {"root": str(folder / "images"), "annotations": str(folder / "instances.json")}


def _samples(batch: tuple[list, list[dict]]) -> list[tuple[int, Any]]:
    return [(target["image_id"], (image, target)) for image, target in zip(*batch)]


def report(config: dict[str, Any]) -> dict[str, Any]:
    augment = v2.Compose([v2.RandomHorizontalFlip(), v2.ColorJitter(brightness=0.5, contrast=0.5)])
    train = CocoDataset(config["root"], config["annotations"], augment)
    evaluate = CocoDataset(config["root"], config["annotations"])
    return {
        "train": train_passes(
            detection_loader(train, 3, device="cpu", seed=11, num_workers=2),
            lambda batch: [target["image_id"] for target in batch[1]],
        ),
        "eval": sample_passes(detection_loader(evaluate, 4, train=False, device="cpu", num_workers=0), _samples)[0],
        "drawn_seed": detection_loader(train, 3, device="cpu", num_workers=0).batch_sampler.seed,
    }


if __name__ == "__main__":
    rank_main(report)
