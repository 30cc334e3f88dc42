"""One rank's view of the image-caption loaders, run by torchrun (tests/multimodal/test_ranks.py) or alone.

    python -m torch.distributed.run --standalone --nproc_per_node=3 -m tests.multimodal.ranks OUT CONFIG

Run alone (no process group) the same ``report`` is the single-process reference.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from torchvision.transforms import v2

from recipes.multimodal import ImageTextDataset, ImageTextShards, multimodal_loader, write_shards
from recipes.core.sampling.stream_order import StreamOrder
from tests.harness import rank_main, sample_passes, train_passes

AUGMENT = v2.Compose([v2.RandomResizedCrop(16, scale=(0.3, 1.0), antialias=True), v2.RandomHorizontalFlip()])
RESIZE = v2.Compose([v2.Resize(16, antialias=True), v2.CenterCrop(16)])


def build(fixtures: Path, folder: Path, size: int = 41) -> dict[str, Any]:
    """A JSONL manifest of ``size`` rows over the 8 fixture images with their COCO captions (1 to
    5 each, so ``captions="random"`` draws), and the same rows as 11 tar shards of 4 (the last 1)."""
    coco = json.loads((fixtures / "multimodal" / "captions.json").read_text())
    captions = {image["id"]: [a["caption"] for a in coco["annotations"] if a["image_id"] == image["id"]]
                for image in coco["images"]}
    (folder / "images").mkdir()
    rows = []
    for number in range(size):
        image = coco["images"][number % len(coco["images"])]
        target = folder / image["file_name"]
        if not target.exists():
            shutil.copy(fixtures / "multimodal" / image["file_name"], target)
        rows.append(json.dumps({"image": image["file_name"], "captions": captions[image["id"]]}) + "\n")
    (folder / "pairs.jsonl").write_text("".join(rows), encoding="utf-8")
    shards = write_shards(folder / "pairs.jsonl", folder / "shards", samples_per_shard=4)
    return {
        "manifest": str(folder / "pairs.jsonl"),
        "shards": [str(path) for path in shards],
        "unequal": _unequal_shards(rows, folder),
        "tokenizer": str(fixtures / "text" / "tokenizer.json"),
    }


def _unequal_shards(rows: list[str], folder: Path, sizes: tuple[int, ...] = (17, 2, 1, 12, 9)) -> list[str]:
    """The same rows as 5 shards of unequal sizes: fewer shards than the 6 readers of 3 ranks x 2 workers."""
    paths, begin = [], 0
    for number, size in enumerate(sizes):
        manifest = folder / f"part-{number}.jsonl"
        manifest.write_text("".join(rows[begin : begin + size]), encoding="utf-8")
        (written,) = write_shards(manifest, folder / "unequal", size, image_root=folder, prefix=f"part-{number}")
        paths.append(str(written))  # keys name the shard: unique across the parts
        begin += size
    return paths


def _samples(batch: dict) -> list[tuple[Any, Any]]:
    """Each row's pixels and unpadded ids: batches cut differently still compare sample by sample."""
    names = batch["key"] if "key" in batch else batch["index"].tolist()
    rows = zip(names, batch["pixel_values"], batch["input_ids"], batch["lengths"].tolist())
    return [(name, (pixels.contiguous(), ids[:length])) for name, pixels, ids, length in rows]


def report(config: dict[str, Any]) -> dict[str, Any]:
    tokenizer = config["tokenizer"]
    train = ImageTextDataset(config["manifest"], tokenizer, transform=AUGMENT, captions="random")
    evaluate = ImageTextDataset(config["manifest"], tokenizer, transform=RESIZE, captions="first")
    shards = ImageTextShards(config["shards"], tokenizer, transform=AUGMENT,
                             order=StreamOrder(shuffle_buffer=5, seed=2))
    unequal = ImageTextShards(config["unequal"], tokenizer, transform=RESIZE,
                              order=StreamOrder(shuffle_buffer=3, seed=4))
    return {
        "train": train_passes(
            multimodal_loader(train, 3, device="cpu", seed=5, num_workers=2), lambda batch: batch["index"].tolist()
        ),
        "eval": sample_passes(multimodal_loader(evaluate, 4, train=False, device="cpu", num_workers=0), _samples)[0],
        "shards": sample_passes(multimodal_loader(shards, 4, train=False, device="cpu", num_workers=2), _samples, 2),
        "shards_train": sample_passes(multimodal_loader(shards, 4, device="cpu", num_workers=2), _samples, 2),
        "unequal": sample_passes(multimodal_loader(unequal, 2, train=False, device="cpu", num_workers=2), _samples, 2),
        "unequal_train": sample_passes(multimodal_loader(unequal, 2, device="cpu", num_workers=2), _samples, 2),
        "drawn_seed": [
            multimodal_loader(train, 3, device="cpu", num_workers=0).batch_sampler.seed,
            ImageTextShards(config["shards"], tokenizer).seed,
        ],
    }


if __name__ == "__main__":
    rank_main(report)
