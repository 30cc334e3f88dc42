"""``recipes prepare video``: what a copy with a keyframe every clip span, at the size training decodes, buys.

    python benchmarks/prepare_video.py                 # 100 videos of 2-10 s, 3 rounds (~4 min)
    python benchmarks/prepare_video.py --quick         # a smoke run: 20 videos, 1 round
    python benchmarks/prepare_video.py --corpus DIR    # keep the generated videos in DIR and reuse them

The corpus is benchmarks/video.py's: 320x240 H.264 MP4s at 30 fps, 2-10 s, a keyframe every 2 s, in
5 class folders. ``prepare(corpus, dest, short_side=128, frames_per_clip=16, workers=2)`` re-encodes
them (171x128, a keyframe every 16 frames, x264 ``medium`` ``fastdecode`` CRF 23, one thread a video). Each loader
then gives one random 16-frame clip a video resized to 112x112, batch 8, 2 persistent workers, on the
CPU, the loaders alternating round by round after a warm-up epoch each (medians). Side by side:

- the plain TorchCodec Dataset (a ``VideoDecoder`` opened per item, v2 ``Resize``) on the originals:
  the baseline of issue 55's first video goal (ours on the copy >= 2.5x);
- recipes' ``video_loader`` on the originals and on the copy;
- the plain TorchCodec Dataset on the copy: the baseline of the second goal (ours >= 1.1x there);
- the time ``prepare`` takes, and the epochs after which it has paid for itself.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from torchvision.transforms import v2

sys.path.insert(1, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from video import BATCH, FRAMES, SIZE, WORKERS, PlainClips, epoch_rate, plain_loader, write_corpus  # noqa: E402

from recipes.video import VideoFolderDataset, prepare, video_loader  # noqa: E402

SHORT_SIDE = 128


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--videos", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--corpus", type=Path, help="a folder to keep the videos in (default: a temporary one)")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.videos, args.rounds = 20, 1
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        root = args.corpus or Path(tmp) / "corpus"
        paths = write_corpus(root, args.videos)
        print(f"{len(paths)} videos in {root}, torch {torch.__version__}, {os.cpu_count()} CPUs, {WORKERS} workers, "
              f"batch {BATCH}")
        writes = []
        for number in range(args.rounds):
            begin = time.perf_counter()
            summary = prepare(root, Path(tmp) / f"prepared{number}", short_side=SHORT_SIDE, frames_per_clip=FRAMES,
                              workers=WORKERS, progress=False)
            writes.append(time.perf_counter() - begin)
        print(summary)
        copy = Path(tmp) / "prepared0" / "videos"
        copies = sorted(copy.rglob("*.mp4"))
        resize = v2.Resize((SIZE, SIZE), antialias=True)
        makers = {
            "TorchCodec Dataset + v2 Resize, originals": lambda: plain_loader(PlainClips(paths)),
            "recipes video_loader, originals": lambda: video_loader(
                VideoFolderDataset(root, frames_per_clip=FRAMES, transform=resize), BATCH, device="cpu", seed=0,
                num_workers=WORKERS),
            "recipes video_loader, prepared copy": lambda: video_loader(
                VideoFolderDataset(copy, frames_per_clip=FRAMES, transform=resize), BATCH, device="cpu", seed=0,
                num_workers=WORKERS),
            "TorchCodec Dataset + v2 Resize, prepared copy": lambda: plain_loader(PlainClips(copies)),
        }
        loaders = {name: make() for name, make in makers.items()}
        for loader in loaders.values():
            epoch_rate(loader)  # a warm-up epoch: workers started, files in the page cache
        rates: dict[str, list[float]] = {name: [] for name in loaders}
        for _ in range(args.rounds):
            for name, loader in loaders.items():
                rates[name].append(epoch_rate(loader))
        del loaders
    rate = {name: statistics.median(values) for name, values in rates.items()}
    plain = rate["TorchCodec Dataset + v2 Resize, originals"]
    plain_copy = rate["TorchCodec Dataset + v2 Resize, prepared copy"]
    print(f"\n| loader (one random {FRAMES}-frame clip a video, {SIZE}x{SIZE}) | clips/s | vs plain, originals "
          "| vs plain, copy |\n|---|---|---|---|")
    for name, value in rate.items():
        print(f"| {name} | {value:.0f} | {value / plain:.2f}x | {value / plain_copy:.2f}x |")
    write = statistics.median(writes)
    epoch, epoch_copy = len(paths) / rate["recipes video_loader, originals"], len(paths) / rate[
        "recipes video_loader, prepared copy"]
    paid = f"paid for after {write / (epoch - epoch_copy):.1f} epochs" if epoch > epoch_copy else "never paid for"
    print(f"\nprepare (short side {SHORT_SIDE}, a keyframe every {FRAMES} frames, {WORKERS} workers): {write:.1f} s "
          f"(rounds: {', '.join(f'{value:.1f}' for value in writes)}); an epoch {epoch:.2f} s on the originals, "
          f"{epoch_copy:.2f} s on the copy: {paid}")

if __name__ == "__main__":
    main()
