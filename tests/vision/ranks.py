"""One rank's view of the vision loaders, run by torchrun (tests/vision/test_ranks.py) or alone.

    python -m torch.distributed.run --standalone --nproc_per_node=3 -m tests.vision.ranks OUT CONFIG

Run alone (no process group) the same ``report`` is the single-process reference.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from recipes.vision import ImageFolderDataset, eval_transform, train_transform, vision_loader
from tests.harness import rank_main, sample_passes, train_passes


def build(fixtures: Path, folder: Path, size: int = 41) -> dict[str, Any]:
    """``size`` classes of one image each, copied round-robin from the fixture folder (every
    decoder case: JPEG, PNG, grey, 16-bit, palette, CMYK, EXIF), so a label names its sample."""
    images = sorted(p for p in (fixtures / "vision").rglob("*") if p.suffix.lower() in {".jpg", ".png"})
    for number in range(size):
        source = images[number % len(images)]
        (folder / f"c{number:03d}").mkdir()
        shutil.copy(source, folder / f"c{number:03d}" / f"image{source.suffix}")
    return {"root": str(folder)}


def report(config: dict[str, Any]) -> dict[str, Any]:
    train = ImageFolderDataset(config["root"], train_transform(24))
    evaluate = ImageFolderDataset(config["root"], eval_transform(24, resize_size=28))
    return {
        "train": train_passes(
            vision_loader(train, 3, device="cpu", seed=7, num_workers=2), lambda batch: batch[1].tolist()
        ),
        "eval": sample_passes(
            vision_loader(evaluate, 4, train=False, device="cpu", num_workers=0),
            lambda batch: [(int(label), image) for image, label in zip(*batch)],
        )[0],
        "drawn_seed": vision_loader(train, 3, device="cpu", num_workers=0).batch_sampler.seed,
    }


if __name__ == "__main__":
    rank_main(report)
