"""recipes.vision.ImageShards against ImageFolderDataset on the same photos, as tar shards and as files.

    python benchmarks/image_shards.py            # 320 photos in 4 shards, 6 rounds of alternating epochs
    python benchmarks/image_shards.py --quick    # smoke run: 64 photos, 2 rounds

The photos are benchmarks/vision.py's (~500 px JPEGs, q90), written once as an image folder and
once by ``write_shards`` as shards of 80. Both loaders run ``train_transform(224)`` (RandomResizedCrop
+ flip on uint8), batch 32, 2 persistent workers, uint8 batches (what a GPU run asks of the CPU),
epoch by epoch in one process; the shards with a shuffle buffer of 64. The ratio is the median of
the per-round ratios (shards images/s over folder images/s); issue 54 asks for >= 0.95.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from vision import make_photos  # noqa: E402  (benchmarks/vision.py: the same photos)

from recipes.core import StreamOrder  # noqa: E402
from recipes.vision import ImageFolderDataset, ImageShards, train_transform, vision_loader, write_shards  # noqa: E402

BATCH, WORKERS, SIZE = 32, 2, 224


def epoch(loader) -> float:
    """Images per second over one pass."""
    start, count = time.perf_counter(), 0
    for images, _ in loader:
        count += len(images)
    return count / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="64 photos, 2 rounds")
    args = parser.parse_args()
    photos, rounds = (64, 2) if args.quick else (320, 6)
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch) / "photos"
        make_photos(root, photos)
        shards = write_shards(root, Path(scratch) / "shards", samples_per_shard=photos // 4)
        options = {"device": "cpu", "seed": 0, "num_workers": WORKERS, "persistent_workers": True}
        folder = vision_loader(ImageFolderDataset(root, train_transform(SIZE)), BATCH, **options)
        stream = ImageShards(shards, transform=train_transform(SIZE), order=StreamOrder(shuffle_buffer=64, seed=0))
        sharded = vision_loader(stream, BATCH, **options)
        epoch(folder), epoch(sharded)  # warm: workers started, page cache filled
        ratios = []
        for round_ in range(rounds):
            if round_ % 2 == 0:  # alternate which goes first
                a, b = epoch(folder), epoch(sharded)
            else:
                b, a = epoch(sharded), epoch(folder)
            ratios.append(b / a)
            print(f"round {round_}: folder {a:6.1f} img/s, shards {b:6.1f} img/s, ratio {b / a:.2f}")
        print(f"ImageShards / ImageFolderDataset: {statistics.median(ratios):.2f}x (median of {rounds} rounds; "
              f"{photos} photos, batch {BATCH}, {WORKERS} workers, RandomResizedCrop({SIZE}) + flip, uint8)")


if __name__ == "__main__":
    main()
