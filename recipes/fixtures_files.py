"""How the fixture writers write a file, so that the same inputs give the same bytes, and the
pictures several domains' fixtures hold.

    write(root / "corpus.txt", "one line\n")             # UTF-8 with "\n" line ends on every OS
    write_json(root / "instances.json", coco)            # sorted keys, one space indent
    write(root / "tokenizer.json", tokenizer_json(tok))  # readable by tokenizers 0.19 and later
    save(picture(np.random.default_rng(0), 96, 64), root / "cat/rgb.jpg")   # fixed encoder settings

Every picture is a smooth gradient with a few filled shapes and a little noise, drawn from a seeded
RNG. Part of the fixture generator (:mod:`recipes.fixtures`, whose cache key hashes this file too),
the one module of the package root each domain's fixture writer imports.
"""

import json
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

FIXTURES_VERSION = "1"  # in VERSION, in the COCO files' info and in the cache's name
JPEG_KW = {"quality": 90, "subsampling": 2, "optimize": False, "progressive": False}
PNG_KW = {"compress_level": 9, "optimize": False}


def write(path: Path, data: str | bytes) -> None:
    """``data`` into ``path`` (its folders made): bytes as they are, text as UTF-8 with ``\n`` line ends."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data, encoding="utf-8", newline="\n")


def write_json(path: Path, obj: object) -> None:
    """``obj`` as JSON: sorted keys, one space indent, non-ASCII as it is, a final newline."""
    write(path, json.dumps(obj, indent=1, sort_keys=True, ensure_ascii=False) + "\n")


def write_jsonl(path: Path, rows: list[dict]) -> None:
    """``rows`` as JSON Lines, each row's keys sorted."""
    write(path, "".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in rows))


def tokenizer_json(tokenizer: "tokenizers.Tokenizer") -> str:  # noqa: F821
    """``tokenizer`` as a ``tokenizer.json`` that every tokenizers the pyproject allows reads.

    tokenizers 0.20 and later write a BPE's merges as pairs (``["a", "b"]``), which 0.19 refuses
    ("data did not match any variant of untagged enum ModelWrapper"); each merge is written as the
    ``"a b"`` string that every release reads, as 0.19 wrote it itself.
    """
    content = json.loads(tokenizer.to_str())
    model = content["model"]
    if model["type"] == "BPE" and model["merges"] and not isinstance(model["merges"][0], str):
        if any(" " in part for merge in model["merges"] for part in merge):
            raise ValueError("a BPE merge holds a space, which the \"a b\" form of a merge cannot write")
        model["merges"] = [" ".join(merge) for merge in model["merges"]]
    return json.dumps(content, indent=2, ensure_ascii=False) + "\n"


def save(img: Image.Image, path: Path, **kw: object) -> None:
    """``img`` as JPEG (a ``.jpg`` path) or PNG with the fixed settings ``JPEG_KW`` / ``PNG_KW``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fmt = "JPEG" if path.suffix.lower() == ".jpg" else "PNG"
    img.save(path, fmt, **(JPEG_KW if fmt == "JPEG" else PNG_KW), **kw)


def background(rng: np.random.Generator, w: int, h: int, tint: tuple = (0, 0, 0)) -> Image.Image:
    """Smooth three-colour gradient plus a few filled ellipses and rectangles."""
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    xx, yy = xx / max(w - 1, 1), yy / max(h - 1, 1)
    c0, c1, c2 = (rng.uniform(30, 225, 3) for _ in range(3))
    arr = c0 + (c1 - c0) * xx[..., None] + (c2 - c0) * yy[..., None] + np.array(tint)
    img = Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8), "RGB")
    draw = ImageDraw.Draw(img)
    for _ in range(int(rng.integers(2, 5))):
        x0, x1 = sorted(rng.integers(0, w, 2).tolist())
        y0, y1 = sorted(rng.integers(0, h, 2).tolist())
        fill = tuple(rng.integers(0, 256, 3).tolist())
        shape = draw.ellipse if rng.random() < 0.5 else draw.rectangle
        shape((x0, y0, x1 + 2, y1 + 2), fill=fill)
    return img


def noisy(rng: np.random.Generator, img: Image.Image, sigma: float = 6.0) -> Image.Image:
    """``img`` with Gaussian noise of ``sigma`` added to each channel, rounded and clipped to uint8."""
    arr = np.asarray(img, dtype=np.float64) + rng.normal(0.0, sigma, (img.height, img.width, 3))
    return Image.fromarray(np.clip(np.rint(arr), 0, 255).astype(np.uint8), "RGB")


def picture(rng: np.random.Generator, w: int, h: int, tint: tuple = (0, 0, 0)) -> Image.Image:
    """A ``w`` x ``h`` RGB picture: a tinted :func:`background` under :func:`noisy`'s noise."""
    return noisy(rng, background(rng, w, h, tint))
