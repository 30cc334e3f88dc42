"""Deterministic generator for the tiny datasets every recipe and test runs on.

    from recipes.fixtures import fixtures_dir
    root = fixtures_dir()                      # repo fixtures/ or a cached generated copy
    python fixtures/generate.py                # regenerate the committed fixtures/
    python -m recipes.fixtures OUT_DIR         # generate anywhere

Only stdlib, numpy, Pillow and tokenizers are imported, so this works from a wheel install.
Same library versions -> byte-identical output (seeded numpy RNGs, fixed encoder settings,
sorted JSON, single-threaded tokenizer training). Each domain's writer, named by its entry in
:mod:`recipes.domains`, lives in its own module and is imported here: :mod:`recipes.fixtures_images`
(vision, detection, multimodal), :mod:`recipes.fixtures_text` (with :mod:`recipes.fixtures_chat`),
:mod:`recipes.fixtures_audio`; how files are written, :mod:`recipes.fixtures_files`. The layout it
writes is in ``README`` (fixtures/README.md); the hostile set, each file broken one way, in
:mod:`recipes.fixtures_hostile`; the COCO masks and polygons in :mod:`recipes.fixtures_coco`.
"""

import hashlib
import io
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

from recipes.domains import REGISTRY
from recipes.fixtures_audio import write_audio  # noqa: F401  (the registry's entries name the writers here)
from recipes.fixtures_coco import rle_counts, rle_string  # noqa: F401  (importable from here too)
from recipes.fixtures_files import FIXTURES_VERSION, JPEG_KW, save, write, write_json, write_jsonl
from recipes.fixtures_hostile import (  # noqa: F401  (HOSTILE_README: re-exported, importable from here too)
    COCO_CASES,
    HOSTILE_README,
    MISSING_FIELD_ROWS,
    hostile_coco,
    hostile_files,
)
from recipes.fixtures_images import picture, write_detection, write_multimodal, write_vision  # noqa: F401 (as above)
from recipes.fixtures_text import WORDS, write_text  # noqa: F401  (as above)

UNAVAILABLE = "UNAVAILABLE"  # in a domain's folder: why its fixtures could not be written here
# the cache key hashes them all: the writers, and the registry that says which run
GENERATOR_FILES = tuple(Path(__file__).with_name(name) for name in (
    "fixtures.py", "fixtures_files.py", "fixtures_text.py", "fixtures_images.py", "fixtures_coco.py",
    "fixtures_hostile.py", "fixtures_chat.py", "fixtures_audio.py", "domains.py")) + tuple(
    Path(__file__).parent.joinpath(*entry.fixtures.partition(":")[0].split(".")[1:]).with_suffix(".py")
    for entry in REGISTRY if not entry.fixtures.startswith("recipes.fixtures:"))  # writers in their domain's folder


def generate(out_dir: str | Path) -> Path:
    """Write every fixture into out_dir (created if missing) and return it."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for entry in REGISTRY:  # each domain's writer, named by its entry in recipes/domains.py
        try:
            entry.load("fixtures")(out / entry.name)
        except ImportError as error:  # a library it needs at run time is missing (audio: FFmpeg's)
            write(out / entry.name / UNAVAILABLE, f"{error}\n")
    _write_hostile(out / "hostile")
    write(out / "README.md", README)
    write(out / "VERSION", FIXTURES_VERSION + "\n")  # last: its presence marks a complete tree
    return out


def fixtures_dir() -> Path:
    """Return the repo's fixtures/ folder, or a generated copy cached in the temp dir."""
    repo = Path(__file__).resolve().parent.parent / "fixtures"
    if (repo / "VERSION").is_file():
        return repo
    return _cached_fixtures(Path(tempfile.gettempdir()))


def _cached_fixtures(tmp_root: Path) -> Path:
    # Keyed by the hash of every generator file so an edited generator never reuses a stale cache.
    # Generated into a private temp dir and renamed into place: concurrent processes never see a half tree.
    key = _generator_hash()
    final = tmp_root / f"recipes-fixtures-{FIXTURES_VERSION}-{key}"
    if (final / "VERSION").is_file() and not any(final.glob(f"*/{UNAVAILABLE}")):
        return final
    staging = Path(tempfile.mkdtemp(prefix=final.name + ".tmp-", dir=tmp_root))
    generate(staging)
    os.chmod(staging, 0o755)  # mkdtemp makes it private; the cache may be shared
    if any(staging.glob(f"*/{UNAVAILABLE}")):
        return staging  # not cached: once the library is installed, the next run writes the whole tree
    try:
        os.rename(staging, final)
    except OSError:  # another process won the race; its tree is identical
        shutil.rmtree(staging, ignore_errors=True)
    return final


def _generator_hash() -> str:
    digest = hashlib.sha256()
    for path in GENERATOR_FILES:
        digest.update(hashlib.sha256(path.read_bytes()).digest())  # per file: no bytes move unseen between them
    return digest.hexdigest()[:12]


def _write_hostile(root: Path) -> None:
    rng = np.random.default_rng(5)
    buf = io.BytesIO()
    picture(rng, 96, 64).save(buf, "JPEG", **JPEG_KW)
    for name, data in hostile_files(buf.getvalue()).items():  # what each is: recipes/fixtures_hostile.py
        write(root / name, data)
    save(picture(rng, 64, 48), root / "coco/images/a.jpg")
    save(picture(rng, 48, 64), root / "coco/images/b.jpg")
    save(picture(rng, 48, 64), root / "coco/escape.jpg")  # exists: a loader must refuse, not load
    for case in COCO_CASES:
        write_json(root / f"coco/{case}.json", hostile_coco(case))
    write_jsonl(root / "text/missing_field.jsonl", MISSING_FIELD_ROWS)


README = """# Fixtures

Tiny deterministic datasets for every recipe (vision, text, detection, multimodal, audio, video) plus
`hostile/` bad input, generated by `recipes/fixtures.py`:

    VERSION, README.md
    vision/            ImageFolder layout, classes bird, cat, dog
      bird/rgb.jpg (96x64 RGB)  rgb_portrait.png (56x88 RGB)  gray.png (L)
           gray16.png (I;16, values 0..65535)  palette.png (P with transparency index 0)
      cat/rgb.jpg (64x64)  rgba.png (RGBA)  cmyk.jpg (CMYK JPEG)  gray.jpg (L)  X.JPG (uppercase
          extension)  notes.txt (not an image; ImageFolder ignores it)
      dog/rgb.jpg  rgb.png  exif_rot6.jpg (stored 96x64, EXIF orientation 6 -> upright 64x96 with
          a red block top-left and blue block bottom-right)  puppies/p0.jpg (nested, included)
    text/
      corpus.txt       200 lines, one sample a line, long-tailed lengths (3..~300 words), UTF-8
                       with accents and one emoji line, no empty lines
      labeled.jsonl    120 rows {"label": 0..2, "text": ...}
      labeled.csv      header text,label; 80 rows, some texts hold commas and double quotes
      tokenizer.json   BPE, NFKC, Metaspace + Punctuation pre-tokenizer with the Metaspace decoder
                       (decode gives the text back), [PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3,
                       "[CLS] $A [SEP]" template, no padding/truncation
      chat/            instruction data (recipes/fixtures_chat.py)
        chat.jsonl       36 {"messages"} conversations, 1-3 user/assistant turns, every 4th with a system turn
        pairs.jsonl      24 {"prompt", "completion"} strings; row 1 splits a word across the two
        pairs.csv        header prompt,completion; the first 12 pairs
        chat_pairs.jsonl 12 conversational pairs (a user message, an assistant message)
        tokenizer.json   BPE, Metaspace, every template's special tokens (<pad>=0), "<s> $A" template
        llama3/ chatml/ mistral/   tokenizer_config.json: the models' chat_template, bos/eos tokens
        llama3_marked/ chatml_marked/ mistral_marked/   the same with {% generation %} markers
    detection/
      instances.json   COCO instances; file_name relative to detection/images/ (image_root)
      images/*.jpg     10 images, ids 3 7 8 15 42 100 101 256 999 1000 (96x64, 64x96, 80x80);
                       image 42 has no annotations; categories 1 person, 3 car, 7 dog, 12 cup,
                       18 kite; polygons drawn in the category colour; images 8 and 256 hold a
                       crowd annotation (iscrowd 1, uncompressed RLE); image 15 holds one
                       non-crowd annotation with a compressed RLE (counts is a string)
    multimodal/        paths below are relative to multimodal/ (the default image_root)
      images/img_0.jpg .. img_7.jpg   varied sizes
      manifest.jsonl   {"image": "images/img_i.jpg", "caption": ...}; row 3 has "captions" [3]
      manifest.csv     image,caption; the same 8 images
      captions.json    COCO captions, file_name "images/img_i.jpg", ids 2 5 11 17 23 31 47 64,
                       2-5 captions per image
    audio/             clips in WAV, FLAC, MP3, Ogg; manifests, a shard, bad clips; see audio/README.md
    video/             clips in MP4, WebM, AVI; manifests, Kinetics CSV, bad files; see video/README.md
    hostile/           bad input a loader must refuse or skip; see hostile/README.md

Regenerate after changing the generator (and commit the result):

    python fixtures/generate.py

`tests/core/test_fixtures.py` checks that this folder equals a fresh generation.
"""


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m recipes.fixtures OUT_DIR")
    print(generate(sys.argv[1]))
