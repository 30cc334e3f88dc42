"""How the fixture generator writes a file, so that the same inputs give the same bytes.

    write(root / "text/corpus.txt", "one line\n")         # UTF-8 with "\n" line ends on every OS
    write_json(root / "detection/instances.json", coco)   # sorted keys, one space indent
    save(picture, root / "vision/cat/rgb.jpg")            # fixed JPEG / PNG encoder settings

Part of the fixture generator (:mod:`recipes.fixtures`, whose cache key hashes this file too).
"""

import json
from pathlib import Path

from PIL import Image

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


def save(img: Image.Image, path: Path, **kw: object) -> None:
    """``img`` as JPEG (a ``.jpg`` path) or PNG with the fixed settings ``JPEG_KW`` / ``PNG_KW``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fmt = "JPEG" if path.suffix.lower() == ".jpg" else "PNG"
    img.save(path, fmt, **(JPEG_KW if fmt == "JPEG" else PNG_KW), **kw)
