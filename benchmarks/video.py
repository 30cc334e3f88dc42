"""recipes.video vs torchvision's VideoClips, a plain TorchCodec Dataset (with v2 or the decoder's resize) and decord.

    python benchmarks/video.py                    # 300 videos of 2-10 s, 3 rounds
    python benchmarks/video.py --quick            # a smoke run: 40 videos, 1 round
    python benchmarks/video.py --corpus DIR       # keep the generated videos in DIR and reuse them

Data: 320x240 H.264 MP4s at 30 fps, 2 to 10 s (uniform), a keyframe every 2 s, in 5 class folders:
a smooth random texture panned by a few pixels a frame (what a camera moving over a scene gives
the encoder), written by TorchCodec's ``VideoEncoder`` (x264 ``veryfast``, CRF 23: ~200 kb/s).
Each loader gives one random 16-frame clip per video, resized to 112x112, batch 8, through a
DataLoader with 2 persistent workers, on the CPU; the loaders run in alternating rounds and each
figure is the median of its rounds. Figures:

1. Training throughput: clips/s of an epoch after a warm-up epoch; time to first batch (a fresh
   loader: workers started, first batch out). Ours with its default decoder bounds (512 MiB of
   decoders a worker) and with room for every video's decoder (``decoder_memory=2 GiB``): a video
   lands on a random worker each epoch, so the second keeps more of the videos a worker meets again.
2. Index build: seconds to learn every video's frame count and rate, ours (header and packets, no
   decode) without and with its cache (``VideoOptions(index_dir=...)``) against VideoClips' scan.
3. Evaluation: clips/s of a pass over 5 evenly spaced clips per video, ours (decoders kept open
   per worker) against the plain Dataset opening the video for each clip.
The floor: one process opening a video and decoding a random clip, clips/s, times 2 workers.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset
from torchcodec.decoders import VideoDecoder
from torchcodec.encoders import VideoEncoder
from torchcodec.transforms import Resize as DecoderResize
from torchvision.transforms import v2

# Run from a checkout without `pip install -e .`: make the repository's recipes importable.
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from recipes.video import VideoFolderDataset, VideoOptions, video_loader

FPS, HEIGHT, WIDTH, FRAMES, SIZE, BATCH, WORKERS = 30, 240, 320, 16, 112, 8, 2
CLASSES = 5


def write_corpus(root: Path, videos: int) -> list[Path]:
    """``videos`` MP4s under ``root/<class>/`` (kept when already there)."""
    rng = np.random.default_rng(0)
    paths = []
    for number in range(videos):
        seconds = float(rng.uniform(2.0, 10.0))
        path = root / f"c{number % CLASSES}" / f"v{number:04d}.mp4"
        paths.append(path)
        if path.is_file():
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        VideoEncoder(panned(seconds, number), frame_rate=FPS).to_file(
            path, codec="libx264", preset="veryfast", crf=23, extra_options={"g": 2 * FPS})
    return paths


def panned(seconds: float, seed: int) -> torch.Tensor:
    """uint8 [T, 3, 240, 320]: a window panning over a smooth random texture three times the frame's size."""
    generator = torch.Generator().manual_seed(seed)
    coarse = F.interpolate(torch.rand(1, 3, 120, 160, generator=generator), size=(720, 960), mode="bicubic")
    fine = F.interpolate(torch.rand(1, 3, 240, 320, generator=generator), size=(720, 960), mode="bilinear")
    texture = (0.7 * coarse + 0.3 * fine)[0].clamp(0, 1).mul(255).to(torch.uint8)
    dx, dy = int(torch.randint(1, 4, (), generator=generator)), int(torch.randint(-2, 3, (), generator=generator))
    count = round(seconds * FPS)
    frames = torch.empty(count, 3, HEIGHT, WIDTH, dtype=torch.uint8)
    for t in range(count):
        top, left = (200 + t * dy) % (720 - HEIGHT), (100 + t * dx) % (960 - WIDTH)
        frames[t] = texture[:, top : top + HEIGHT, left : left + WIDTH]
    return frames


class PlainClips(Dataset):
    """The usual TorchCodec Dataset: a decoder opened per item, ``clips`` clips a video (random when
    ``clips == 1``, else evenly spaced as ``clips_at_regular_indices`` places them), v2 ``Resize``
    after the decode, or TorchCodec's ``Resize`` in the decoder with ``decoder_resize``."""

    def __init__(self, paths: list[Path], clips: int = 1, decoder_resize: bool = False) -> None:
        self.paths, self.clips, self.decoder_resize = [str(p) for p in paths], clips, decoder_resize
        self.labels = [int(p.parent.name[1:]) for p in paths]
        self.resize = v2.Resize((SIZE, SIZE), antialias=True)

    def __len__(self) -> int:
        return len(self.paths) * self.clips

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        video, clip = divmod(index, self.clips)
        transforms = [DecoderResize((SIZE, SIZE))] if self.decoder_resize else None
        decoder = VideoDecoder(self.paths[video], transforms=transforms)
        room = len(decoder) - FRAMES
        if self.clips == 1:
            start = int(torch.randint(0, room + 1, ()))
        else:
            start = int(torch.linspace(0, room, self.clips, dtype=torch.int)[clip])
        frames = decoder.get_frames_at(list(range(start, start + FRAMES))).data
        return (frames if self.decoder_resize else self.resize(frames)), self.labels[video]


class DecordClips(Dataset):
    """decord's ``VideoReader`` per item, a random clip, v2 ``Resize``."""

    def __init__(self, paths: list[Path]) -> None:
        self.paths, self.labels = [str(p) for p in paths], [int(p.parent.name[1:]) for p in paths]
        self.resize = v2.Resize((SIZE, SIZE), antialias=True)

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        import decord

        reader = decord.VideoReader(self.paths[index], ctx=decord.cpu(0), num_threads=1)
        start = int(torch.randint(0, len(reader) - FRAMES + 1, ()))
        frames = torch.from_numpy(reader.get_batch(list(range(start, start + FRAMES))).asnumpy())
        return self.resize(frames.permute(0, 3, 1, 2)), self.labels[index]


class TorchvisionClips(Dataset):
    """torchvision's ``VideoClips`` (TorchCodec underneath in 0.29): a random one of each video's 16-frame clips."""

    def __init__(self, clips: object) -> None:
        self.clips = clips
        self.starts = np.concatenate([[0], np.cumsum([len(c) for c in clips.clips])])
        self.resize = v2.Resize((SIZE, SIZE), antialias=True)

    def __len__(self) -> int:
        return len(self.starts) - 1

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        clip = int(self.starts[index]) + int(torch.randint(0, int(self.starts[index + 1] - self.starts[index]), ()))
        video, _, _, _ = self.clips.get_clip(clip)
        return self.resize(video), 0


def video_clips(paths: list[Path]) -> object:
    """torchvision's VideoClips over ``paths``, every 16-frame clip a frame apart (its scan)."""
    from torchvision.datasets.video_utils import VideoClips

    return VideoClips([str(p) for p in paths], clip_length_in_frames=FRAMES, frames_between_clips=1,
                      output_format="TCHW")


def plain_loader(dataset: Dataset, shuffle: bool = True) -> DataLoader:
    return DataLoader(dataset, batch_size=BATCH, shuffle=shuffle, num_workers=WORKERS, persistent_workers=True)


def epoch_rate(loader: DataLoader) -> float:
    """Clips/s of one pass."""
    start, clips = time.perf_counter(), 0
    for batch in loader:
        video = batch["video"] if isinstance(batch, dict) else batch[0]
        clips += len(video)
    return clips / (time.perf_counter() - start)


def first_batch(make) -> float:
    """Seconds from a fresh loader to its first batch (its workers started)."""
    start = time.perf_counter()
    loader = make()
    next(iter(loader))
    seconds = time.perf_counter() - start
    del loader
    return seconds


def floor(paths: list[Path], clips: int) -> float:
    """Clips/s of one process opening a video and decoding a random 16-frame clip, no resize."""
    rng = np.random.default_rng(1)
    start = time.perf_counter()
    for number in range(clips):
        decoder = VideoDecoder(str(paths[number % len(paths)]))
        first = int(rng.integers(0, len(decoder) - FRAMES + 1))
        decoder.get_frames_at(list(range(first, first + FRAMES)))
    return clips / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--videos", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--corpus", type=Path, help="a folder to keep the videos in (default: a temporary one)")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.videos, args.rounds = 40, 1
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        root = args.corpus or Path(tmp) / "corpus"
        start = time.perf_counter()
        paths = write_corpus(root, args.videos)
        print(f"{len(paths)} videos in {root} ({time.perf_counter() - start:.1f} s to write or find), "
              f"torch {torch.__version__}, {os.cpu_count()} CPUs, {WORKERS} workers, batch {BATCH}")
        run(root, paths, args.rounds, Path(tmp))


def run(root: Path, paths: list[Path], rounds: int, tmp: Path) -> None:
    resize = v2.Resize((SIZE, SIZE), antialias=True)
    index_times: dict[str, list[float]] = {"recipes index (no cache)": [], "recipes index (from its cache)": [],
                                           "torchvision VideoClips scan": []}
    scanned = None
    for number in range(rounds):
        cache = tmp / f"index{number}"
        for name, build in (("recipes index (no cache)", lambda: VideoFolderDataset(root)),
                            ("recipes index (from its cache)", None),
                            ("torchvision VideoClips scan", lambda: video_clips(paths))):
            if build is None:  # the same build twice: the first fills the cache, the second reads it
                VideoFolderDataset(root, options=VideoOptions(index_dir=cache))
                build = lambda: VideoFolderDataset(root, options=VideoOptions(index_dir=cache))  # noqa: E731
            begin = time.perf_counter()
            built = build()
            index_times[name].append(time.perf_counter() - begin)
            scanned = built if name.startswith("torchvision") else scanned
    ours = VideoFolderDataset(root, frames_per_clip=FRAMES, transform=resize)
    kept = VideoFolderDataset(root, frames_per_clip=FRAMES, transform=resize,
                              options=VideoOptions(open_decoders=len(paths), decoder_memory=2**31))
    in_decoder = VideoFolderDataset(root, frames_per_clip=FRAMES, options=VideoOptions(decoder_size=(SIZE, SIZE)))
    makers = {
        "recipes video_loader": lambda: video_loader(ours, BATCH, device="cpu", seed=0, num_workers=WORKERS),
        "recipes, every video's decoder kept open": lambda: video_loader(kept, BATCH, device="cpu", seed=0,
                                                                           num_workers=WORKERS),
        "recipes, decoder-side resize": lambda: video_loader(in_decoder, BATCH, device="cpu", seed=0,
                                                             num_workers=WORKERS),
        "TorchCodec Dataset + v2 Resize": lambda: plain_loader(PlainClips(paths)),
        "TorchCodec Dataset, decoder Resize": lambda: plain_loader(PlainClips(paths, decoder_resize=True)),
        "torchvision VideoClips": lambda: plain_loader(TorchvisionClips(scanned)),
    }
    try:
        import decord  # noqa: F401

        makers["decord VideoReader + v2 Resize"] = lambda: plain_loader(DecordClips(paths))
    except ImportError:
        print("decord is not installed: its row is left out")
    loaders = {name: make() for name, make in makers.items()}
    for loader in loaders.values():
        epoch_rate(loader)  # a warm-up epoch: workers started, files in the page cache
    rates: dict[str, list[float]] = {name: [] for name in loaders}
    starts: dict[str, list[float]] = {name: [] for name in loaders}
    for _ in range(rounds):
        for name, loader in loaders.items():
            rates[name].append(epoch_rate(loader))
            starts[name].append(first_batch(makers[name]))
    del loaders
    alone = statistics.median(floor(paths, min(len(paths), 100)) for _ in range(rounds))
    print(f"\nfloor: one process opening and decoding a clip: {alone:.0f} clips/s; "
          f"x{WORKERS} workers: {WORKERS * alone:.0f}")
    print("\n| loader (one random 16-frame clip a video, 112x112) | clips/s | vs plain TorchCodec | first batch s |")
    print("|---|---|---|---|")
    plain = statistics.median(rates["TorchCodec Dataset + v2 Resize"])
    for name in rates:
        rate = statistics.median(rates[name])
        print(f"| {name} | {rate:.0f} | {rate / plain:.2f}x | {statistics.median(starts[name]):.2f} |")
    print(f"\n| index of {len(paths)} videos | seconds |\n|---|---|")
    for name, values in index_times.items():
        print(f"| {name} | {statistics.median(values):.3f} |")
    evaluate(root, paths, rounds)


def evaluate(root: Path, paths: list[Path], rounds: int) -> None:
    """An evaluation pass over 5 evenly spaced clips a video: decoders kept open vs one opened per clip."""
    resize = v2.Resize((SIZE, SIZE), antialias=True)
    ours = VideoFolderDataset(root, frames_per_clip=FRAMES, clips_per_video=5, transform=resize)
    loaders = {"recipes, decoders kept open": video_loader(ours, BATCH, train=False, device="cpu", num_workers=WORKERS),
               "TorchCodec Dataset, opened per clip": plain_loader(PlainClips(paths, clips=5), shuffle=False)}
    for loader in loaders.values():
        epoch_rate(loader)
    rates: dict[str, list[float]] = {name: [] for name in loaders}
    for _ in range(rounds):
        for name, loader in loaders.items():
            rates[name].append(epoch_rate(loader))
    print("\n| evaluation, 5 clips a video | clips/s |\n|---|---|")
    for name, values in rates.items():
        print(f"| {name} | {statistics.median(values):.0f} |")
    ours_rate, theirs = (statistics.median(values) for values in rates.values())
    print(f"\nkept open vs opened per clip: {ours_rate / theirs:.2f}x")


if __name__ == "__main__":
    main()
