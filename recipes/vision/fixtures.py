"""The vision fixtures: an image folder of three classes, in every mode and format the decoder meets.

    write_vision(Path("fixtures/vision"))      # called by recipes.fixtures.generate (recipes/domains.py names it)

Pictures are :func:`recipes.fixtures_files.picture`s tinted by class and saved with fixed encoder
settings; ``LAYOUT`` is what ``fixtures/README.md`` says of them.
"""

from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from recipes.fixtures_files import picture, save, write

LAYOUT = """\
    vision/            ImageFolder layout, classes bird, cat, dog
      bird/rgb.jpg (96x64 RGB)  rgb_portrait.png (56x88 RGB)  gray.png (L)
           gray16.png (I;16, values 0..65535)  palette.png (P with transparency index 0)
      cat/rgb.jpg (64x64)  rgba.png (RGBA)  cmyk.jpg (CMYK JPEG)  gray.jpg (L)  X.JPG (uppercase
          extension)  notes.txt (not an image; ImageFolder ignores it)
      dog/rgb.jpg  rgb.png  exif_rot6.jpg (stored 96x64, EXIF orientation 6 -> upright 64x96 with
          a red block top-left and blue block bottom-right)  puppies/p0.jpg (nested, included)
"""
CLASS_TINT = {"bird": (-30, -10, 40), "cat": (40, 10, -30), "dog": (-20, 35, -20)}


def write_vision(root: Path) -> str:
    """The vision fixtures under ``root``: an image folder of 3 classes; returns ``LAYOUT``."""
    rng = np.random.default_rng(1)

    def pic(cls: str, w: int, h: int) -> Image.Image:
        return picture(rng, w, h, CLASS_TINT[cls])

    save(pic("bird", 96, 64), root / "bird/rgb.jpg")
    save(pic("bird", 56, 88), root / "bird/rgb_portrait.png")
    save(pic("bird", 40, 40).convert("L"), root / "bird/gray.png")
    save(pic("bird", 72, 48).quantize(16, dither=Image.Dither.NONE), root / "bird/palette.png",
          transparency=0)
    ramp = np.linspace(0, 65535, 64 * 48).reshape(48, 64)
    ramp[1:-1, 1:-1] += rng.normal(0, 900, (46, 62))  # noisy inside; corners stay 0 and 65535
    gray16 = np.clip(np.rint(ramp), 0, 65535).astype(np.uint16)
    save(Image.fromarray(gray16), root / "bird/gray16.png")

    save(pic("cat", 64, 64), root / "cat/rgb.jpg")
    rgba = pic("cat", 80, 60)
    rgba.putalpha(Image.fromarray(np.tile(np.linspace(255, 40, 80).astype(np.uint8), (60, 1))))
    save(rgba, root / "cat/rgba.png")
    save(pic("cat", 60, 90).convert("CMYK"), root / "cat/cmyk.jpg")
    save(pic("cat", 100, 70).convert("L"), root / "cat/gray.jpg")
    save(pic("cat", 48, 72), root / "cat/X.JPG")
    write(root / "cat/notes.txt", "Not an image: ImageFolder must skip this file.\n")

    save(pic("dog", 120, 80), root / "dog/rgb.jpg")
    save(pic("dog", 32, 48), root / "dog/rgb.png")
    save(pic("dog", 64, 80), root / "dog/puppies/p0.jpg")
    upright = pic("dog", 64, 96)  # portrait as displayed; asymmetric markers reveal a missing turn
    ImageDraw.Draw(upright).rectangle((0, 0, 23, 15), fill=(255, 0, 0))
    ImageDraw.Draw(upright).rectangle((52, 88, 63, 95), fill=(0, 0, 255))
    exif = Image.Exif()
    exif[0x0112] = 6  # orientation 6: viewer rotates 90 degrees clockwise
    save(upright.transpose(Image.Transpose.ROTATE_90), root / "dog/exif_rot6.jpg",
          exif=exif.tobytes())
    return LAYOUT
