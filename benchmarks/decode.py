"""Image decoding: recipes.core.pixels.images.decode_image (TorchCodec) vs torchvision's and PIL's decoders.

    python benchmarks/decode.py            # 60 JPEGs + 16 PNGs, 5 rounds (~10 s)
    python benchmarks/decode.py --quick    # smoke run: 20 JPEGs + 6 PNGs, 2 rounds
    python benchmarks/decode.py --strict   # decode_image with and without strict=True (~1 min)

The images are photo-like 500x375 pictures (smooth gradients plus noise, the size of an ImageNet
photo): JPEG at quality 90 (4:2:0) and PNG, generated into a temporary folder and read into
memory once, so only decoding is timed. One core (``torch.set_num_threads(1)``), one process;
the sides decode each image back to back, in an order that turns image by image, so whatever
else the machine does hits them alike. Each side turns the bytes into a ``uint8 [3,H,W]`` RGB
tensor in its decoder's own layout:

- recipes: ``decode_image(data, contiguous=False)`` (header read, bomb check, TorchCodec);
- torchvision: ``torchvision.io.decode_image(torch.frombuffer(data), mode=ImageReadMode.RGB)``;
- PIL: ``Image.open(...).convert("RGB")`` -> numpy -> ``torch.from_numpy(...).permute(2, 0, 1)``.

Before timing, every image's pixels are compared across the three: they must be identical.
Reported: microseconds per image (median over every decode) and, image by image, the ratio of
each peer's time to ours (median and quartiles): above 1 means recipes is faster.

``--strict`` times what ``strict=True`` (libjpeg's corruption warnings caught) adds instead: the
same decode with and without it, back to back in turning order, on 200 JPEGs, then on 20
1024x768 ones with ``draft_size=(256, 256)`` (PIL's reduced-scale decode, which strict checks
with one more full libjpeg decode); reported as the ratio of the total times and, image by
image, the median ratio.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torchvision.io import ImageReadMode
from torchvision.io import decode_image as torchvision_decode_image

# Run from a checkout without `pip install -e .`: make the repository's recipes importable.
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))

from recipes.core.pixels.images import decode_image

# torchvision 0.29 deprecates its decoders in favour of TorchCodec and warns on every call; it
# is the peer measured here, so its warning (and only its) is silenced.
warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"torchvision\.io")

WIDTH, HEIGHT = 500, 375


def photo(rng: np.random.Generator) -> Image.Image:
    """Smooth colour gradients in random directions, plus sensor-like noise."""
    y, x = np.mgrid[0:HEIGHT, 0:WIDTH].astype(np.float32)
    channels = []
    for _ in range(3):
        angle, phase = rng.uniform(0, 2 * np.pi, 2)
        wave = np.sin((x * np.cos(angle) + y * np.sin(angle)) / rng.uniform(60, 200) + phase)
        channels.append(128 + 90 * wave + rng.normal(0, 6, wave.shape))
    return Image.fromarray(np.clip(np.stack(channels, axis=-1), 0, 255).astype(np.uint8))


def make_files(folder: Path, jpegs: int, pngs: int) -> dict[str, list[bytearray]]:
    rng = np.random.default_rng(0)
    files: dict[str, list[bytearray]] = {"JPEG": [], "PNG": []}
    for index in range(jpegs + pngs):
        kind, suffix, options = ("JPEG", "jpg", {"quality": 90}) if index < jpegs else ("PNG", "png", {})
        path = folder / f"{index:04d}.{suffix}"
        photo(rng).save(path, kind, **options)
        files[kind].append(bytearray(path.read_bytes()))
    return files


def recipes_side(data: bytearray) -> torch.Tensor:
    return decode_image(data, contiguous=False)


def torchvision_side(data: bytearray) -> torch.Tensor:
    return torchvision_decode_image(torch.frombuffer(data, dtype=torch.uint8), mode=ImageReadMode.RGB)


def pil_side(data: bytearray) -> torch.Tensor:
    with Image.open(io.BytesIO(data)) as image:
        return torch.from_numpy(np.array(image.convert("RGB"))).permute(2, 0, 1)  # as images.py does


SIDES = {"recipes": recipes_side, "torchvision": torchvision_side, "PIL": pil_side}


def check_pixels(files: list[bytearray]) -> int:
    """How many images decode to the same pixels on every side (all of them, or it says so)."""
    same = 0
    for data in files:
        images = [side(data) for side in SIDES.values()]
        same += all(torch.equal(images[0], other) for other in images[1:])
    return same


def compare(kind: str, files: list[bytearray], rounds: int) -> None:
    same = check_pixels(files)
    print(f"\n== {len(files)} {kind}s, {sum(map(len, files)) // len(files) // 1024} KB average: "
          f"{same}/{len(files)} identical pixels on all three sides ==")
    names = list(SIDES)
    micros: dict[str, list[float]] = {name: [] for name in names}  # one entry per image decode
    for round_ in range(rounds):
        for index, data in enumerate(files):
            # the sides decode the same image back to back, in an order that turns image by image
            shift = (index + round_) % len(names)
            for name in names[shift:] + names[:shift]:
                start = time.perf_counter()
                SIDES[name](data)
                micros[name].append((time.perf_counter() - start) * 1e6)
    for name, values in micros.items():
        print(f"  {name:12s} {statistics.median(values):7.0f} us an image (median of {len(values)})")
    for peer in ("torchvision", "PIL"):
        ratios = [theirs / ours for ours, theirs in zip(micros["recipes"], micros[peer])]
        quartiles = statistics.quantiles(ratios, n=4)
        print(f"  {peer} / recipes time, same image: {statistics.median(ratios):.2f}x median "
              f"(quartiles {quartiles[0]:.2f}-{quartiles[2]:.2f})")


def compare_strict(files: list[bytearray], rounds: int, draft_size: tuple[int, int] | None = None) -> None:
    """decode_image(strict=True) against the plain decode, image by image."""
    sides = {
        "plain": lambda data: decode_image(data, contiguous=False, draft_size=draft_size),
        "strict": lambda data: decode_image(data, contiguous=False, draft_size=draft_size, strict=True),
    }
    same = sum(torch.equal(sides["plain"](data), sides["strict"](data)) for data in files)
    micros: dict[str, list[float]] = {name: [] for name in sides}
    for round_ in range(rounds):
        for index, data in enumerate(files):
            order = list(sides) if (index + round_) % 2 == 0 else list(sides)[::-1]
            for name in order:
                start = time.perf_counter()
                sides[name](data)
                micros[name].append((time.perf_counter() - start) * 1e6)
    size = "x".join(map(str, Image.open(io.BytesIO(files[0])).size))
    print(f"\n== {len(files)} {size} JPEGs, draft_size={draft_size}: "
          f"{same}/{len(files)} identical pixels with strict=True ==")
    for name, values in micros.items():
        print(f"  {name:8s} {statistics.median(values):7.0f} us an image (median of {len(values)}), "
              f"total {sum(values) / 1e6:.3f} s")
    ratios = [strict / plain for plain, strict in zip(micros["plain"], micros["strict"])]
    quartiles = statistics.quantiles(ratios, n=4)
    print(f"  strict / plain: {sum(micros['strict']) / sum(micros['plain']):.3f}x in total, "
          f"{statistics.median(ratios):.3f}x median per image (quartiles {quartiles[0]:.3f}-{quartiles[2]:.3f})")


def large_jpegs(count: int) -> list[bytearray]:
    """1024x768 photo-like JPEGs, large enough for ``eval_transform``'s draft at 256."""
    rng = np.random.default_rng(1)
    files = []
    for _ in range(count):
        small = photo(rng)
        buffer = io.BytesIO()
        small.resize((1024, 768), Image.Resampling.BICUBIC).save(buffer, "JPEG", quality=90)
        files.append(bytearray(buffer.getvalue()))
    return files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="20 JPEGs + 6 PNGs, 2 rounds: a smoke run")
    parser.add_argument("--rounds", type=int, default=None, help="passes over the images (default 5, quick 2)")
    parser.add_argument("--strict", action="store_true", help="200 JPEGs: the cost of strict=True")
    args = parser.parse_args()
    jpegs, pngs = (20, 6) if args.quick else (200, 0) if args.strict else (60, 16)
    rounds = args.rounds or (2 if args.quick else 5)
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="bench-decode-") as tmp:
        files = make_files(Path(tmp), jpegs, pngs)
    print(f"{WIDTH}x{HEIGHT} photo-like images; one core; {len(os.sched_getaffinity(0))} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}")
    if args.strict:
        compare_strict(files["JPEG"], rounds)
        compare_strict(large_jpegs(20), rounds, draft_size=(256, 256))  # PIL decodes, libjpeg checks
        return
    for kind, kind_files in files.items():
        compare(kind, kind_files, rounds)


if __name__ == "__main__":
    main()
