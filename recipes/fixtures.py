"""Deterministic generator for the tiny datasets every recipe and test runs on.

    from recipes.fixtures import fixtures_dir
    root = fixtures_dir()                      # repo fixtures/ or a cached generated copy
    python fixtures/generate.py                # regenerate the committed fixtures/
    python -m recipes.fixtures OUT_DIR         # generate anywhere

Only stdlib, numpy, Pillow and tokenizers are imported, so this works from a wheel install.
Same library versions -> byte-identical output (seeded numpy RNGs, fixed encoder settings,
sorted JSON, single-threaded tokenizer training). The layout it writes is in ``README``
(fixtures/README.md); the hostile set, each file broken one way, in :mod:`recipes.fixtures_hostile`;
the COCO masks and polygons in :mod:`recipes.fixtures_coco`; the instruction data in
:mod:`recipes.fixtures_chat`.
"""

import csv
import hashlib
import io
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from recipes.domains import REGISTRY
from recipes.fixtures_chat import chat_files
from recipes.fixtures_audio import write_audio  # noqa: F401  (the audio entry names it here, beside the others)
from recipes.fixtures_coco import blob_mask, mask_box, polygon, polygon_area, rle_counts, rle_string
from recipes.fixtures_hostile import (  # noqa: F401  (HOSTILE_README: re-exported, importable from here too)
    COCO_CASES,
    HOSTILE_README,
    MISSING_FIELD_ROWS,
    hostile_coco,
    hostile_files,
)

FIXTURES_VERSION = "1"
UNAVAILABLE = "UNAVAILABLE"  # in a domain's folder: why its fixtures could not be written here
# the cache key hashes them all: the writers, and the registry that says which run
GENERATOR_FILES = tuple(Path(__file__).with_name(name) for name in (
    "fixtures.py", "fixtures_coco.py", "fixtures_hostile.py", "fixtures_chat.py", "fixtures_audio.py", "domains.py"))
JPEG_KW = {"quality": 90, "subsampling": 2, "optimize": False, "progressive": False}
PNG_KW = {"compress_level": 9, "optimize": False}

# ~300 common words, most frequent first; accented words sit mid-list so they do occur.
WORDS = """the of and to a in is it you that he was for on are with as his they be at one have
this from or had by hot word but what some we can out other were all there when up use your how
said an each she which do their time if will way about many then them write would like so these
her long make thing see him two has look more day could go come did number sound no most people
my over know water than call first who may down side been now find any new work part take get
place made live where after back little only round man year came show every good me give our
under name very through just form sentence great think café say help low line differ turn cause
much mean before move right boy old too same tell does set three want air well also play small
end put home read hand port large spell add even land here must big high such follow act why ask
naïve men change went light kind off need house picture try us again animal point mother world
near build self earth father head stand own page should country found answer school grow study
still learn plant cover food sun four between state keep eye never last let thought city tree
cross farm hard start might story saw far sea draw left late run don't while press close night
real life few north open seem together next white children begin got walk example ease paper
group always music those both mark often letter until mile river car feet care second book carry
took science eat room friend began idea fish mountain stop once base hear horse cut sure watch
colour face wood main enough plain girl usual young ready above ever red list though feel talk
bird soon body dog family direct pose leave song measure door product black short numeral class
wind question happen complete ship area half rock order fire south problem piece told knew pass
since top whole king space heard best hour better true during hundred five remember step early
hold west ground interest reach fast verb sing listen six table travel less morning résumé
façade jalapeño""".split()
EMOJI_LINE = "The cat 🐱 sat by the window in the sun 🌞 and the dog said nothing 🐶."


def generate(out_dir: str | Path) -> Path:
    """Write every fixture into out_dir (created if missing) and return it."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for entry in REGISTRY:  # each domain's writer, named by its entry in recipes/domains.py
        try:
            entry.load("fixtures")(out / entry.name)
        except ImportError as error:  # a library it needs at run time is missing (audio: FFmpeg's)
            _write(out / entry.name / UNAVAILABLE, f"{error}\n")
    _write_hostile(out / "hostile")
    _write(out / "README.md", README)
    _write(out / "VERSION", FIXTURES_VERSION + "\n")  # last: its presence marks a complete tree
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


# ---------------------------------------------------------------- shared helpers
def _write(path: Path, data: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data, encoding="utf-8", newline="\n")


def _write_json(path: Path, obj: object) -> None:
    _write(path, json.dumps(obj, indent=1, sort_keys=True, ensure_ascii=False) + "\n")


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    _write(path, "".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in rows))


def _save(img: Image.Image, path: Path, **kw: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fmt = "JPEG" if path.suffix.lower() == ".jpg" else "PNG"
    img.save(path, fmt, **(JPEG_KW if fmt == "JPEG" else PNG_KW), **kw)


def _background(rng: np.random.Generator, w: int, h: int, tint: tuple = (0, 0, 0)) -> Image.Image:
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


def _noisy(rng: np.random.Generator, img: Image.Image, sigma: float = 6.0) -> Image.Image:
    arr = np.asarray(img, dtype=np.float64) + rng.normal(0.0, sigma, (img.height, img.width, 3))
    return Image.fromarray(np.clip(np.rint(arr), 0, 255).astype(np.uint8), "RGB")


def _picture(rng: np.random.Generator, w: int, h: int, tint: tuple = (0, 0, 0)) -> Image.Image:
    return _noisy(rng, _background(rng, w, h, tint))


def _sentence(rng: np.random.Generator, n_words: int) -> str:
    weights = np.arange(1, len(WORDS) + 1) ** -0.7  # Zipf-like: frequent words first
    words = rng.choice(WORDS, size=n_words, p=weights / weights.sum()).tolist()
    for i in range(int(rng.integers(2, 6)), n_words - 1, int(rng.integers(5, 12))):
        words[i] += ","  # a comma now and then
    words[0] = words[0].capitalize()
    return " ".join(words) + str(rng.choice([".", ".", ".", "?", "!"]))


def _long_tailed_lengths(rng: np.random.Generator, n: int, n_long: int) -> list[int]:
    """Mostly 3-15 words (lognormal), plus n_long samples of 100-300 words."""
    lengths = np.clip(np.rint(rng.lognormal(2.0, 0.6, n)), 3, 60).astype(int)
    lengths[rng.choice(n, n_long, replace=False)] = rng.integers(100, 301, n_long)
    return lengths.tolist()


# ---------------------------------------------------------------- vision
CLASS_TINT = {"bird": (-30, -10, 40), "cat": (40, 10, -30), "dog": (-20, 35, -20)}


def write_vision(root: Path) -> None:
    """The vision fixtures under ``root``: an image folder of 3 classes (the layout: ``README``)."""
    rng = np.random.default_rng(1)

    def pic(cls: str, w: int, h: int) -> Image.Image:
        return _picture(rng, w, h, CLASS_TINT[cls])

    _save(pic("bird", 96, 64), root / "bird/rgb.jpg")
    _save(pic("bird", 56, 88), root / "bird/rgb_portrait.png")
    _save(pic("bird", 40, 40).convert("L"), root / "bird/gray.png")
    _save(pic("bird", 72, 48).quantize(16, dither=Image.Dither.NONE), root / "bird/palette.png",
          transparency=0)
    ramp = np.linspace(0, 65535, 64 * 48).reshape(48, 64)
    ramp[1:-1, 1:-1] += rng.normal(0, 900, (46, 62))  # noisy inside; corners stay 0 and 65535
    gray16 = np.clip(np.rint(ramp), 0, 65535).astype(np.uint16)
    _save(Image.fromarray(gray16), root / "bird/gray16.png")

    _save(pic("cat", 64, 64), root / "cat/rgb.jpg")
    rgba = pic("cat", 80, 60)
    rgba.putalpha(Image.fromarray(np.tile(np.linspace(255, 40, 80).astype(np.uint8), (60, 1))))
    _save(rgba, root / "cat/rgba.png")
    _save(pic("cat", 60, 90).convert("CMYK"), root / "cat/cmyk.jpg")
    _save(pic("cat", 100, 70).convert("L"), root / "cat/gray.jpg")
    _save(pic("cat", 48, 72), root / "cat/X.JPG")
    _write(root / "cat/notes.txt", "Not an image: ImageFolder must skip this file.\n")

    _save(pic("dog", 120, 80), root / "dog/rgb.jpg")
    _save(pic("dog", 32, 48), root / "dog/rgb.png")
    _save(pic("dog", 64, 80), root / "dog/puppies/p0.jpg")
    upright = pic("dog", 64, 96)  # portrait as displayed; asymmetric markers reveal a missing turn
    ImageDraw.Draw(upright).rectangle((0, 0, 23, 15), fill=(255, 0, 0))
    ImageDraw.Draw(upright).rectangle((52, 88, 63, 95), fill=(0, 0, 255))
    exif = Image.Exif()
    exif[0x0112] = 6  # orientation 6: viewer rotates 90 degrees clockwise
    _save(upright.transpose(Image.Transpose.ROTATE_90), root / "dog/exif_rot6.jpg",
          exif=exif.tobytes())


# ---------------------------------------------------------------- text
def write_text(root: Path) -> None:
    """The text fixtures under ``root``: text corpora and their tokenizer (the layout: ``README``)."""
    rng = np.random.default_rng(2)
    corpus = [_sentence(rng, n) for n in _long_tailed_lengths(rng, 200, n_long=5)]
    corpus[17] = EMOJI_LINE
    corpus[42] = "A naïve café owner wrote a résumé about the façade and a jalapeño."
    _write(root / "corpus.txt", "\n".join(corpus) + "\n")

    labeled = [{"text": _sentence(rng, n), "label": int(rng.integers(0, 3))}
               for n in _long_tailed_lengths(rng, 120, n_long=3)]
    _write_jsonl(root / "labeled.jsonl", labeled)

    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["text", "label"])
    for i, n in enumerate(_long_tailed_lengths(rng, 80, n_long=2)):
        text = _sentence(rng, n)
        if i % 5 == 0:  # commas and double quotes that the csv module must quote
            text = f'She said "{text[:-1]}", then "{WORDS[i]}", and left.'
        writer.writerow([text, int(rng.integers(0, 3))])
    _write(root / "labeled.csv", buf.getvalue())
    texts = corpus + [r["text"] for r in labeled] + buf.getvalue().splitlines()[1:]
    _write(root / "tokenizer.json", _train_tokenizer(texts))
    for name, data in chat_files(WORDS, _sentence).items():  # what they are: recipes/fixtures_chat.py
        _write(root / "chat" / name, data)


def _train_tokenizer(texts: list[str]) -> str:
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.normalizer = normalizers.NFKC()  # keeps accents: "café" != "cafe"
    # "▁" marks a word's first piece, so the decoder knows where the spaces were (a bare
    # Whitespace pre-tokenizer drops them: "Ready" would decode as "Re ad y"); punctuation is its own piece
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Metaspace(), pre_tokenizers.Punctuation()])
    tok.decoder = decoders.Metaspace()
    tok.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=800, min_frequency=2, special_tokens=specials, show_progress=False))
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))])
    return tok.to_str(pretty=True) + "\n"


# ---------------------------------------------------------------- detection
CATEGORIES = [(1, "person", "person", (220, 40, 40)), (3, "car", "vehicle", (40, 80, 230)),
              (7, "dog", "animal", (240, 200, 30)), (12, "cup", "kitchen", (30, 190, 80)),
              (18, "kite", "sports", (200, 50, 220))]
DET_IMAGES = [(3, 96, 64), (7, 64, 96), (8, 96, 64), (15, 80, 80), (42, 64, 96), (100, 96, 64),
              (101, 64, 96), (256, 96, 64), (999, 64, 96), (1000, 96, 64)]
EMPTY_IMAGE, CROWD_IMAGES, RLE_IMAGE = 42, (8, 256), 15


def write_detection(root: Path) -> None:
    """The detection fixtures under ``root``: a COCO instances file and its images (the layout: ``README``)."""
    rng = np.random.default_rng(3)
    images, annotations, ann_id = [], [], 1000
    for image_id, w, h in DET_IMAGES:
        img = _background(rng, w, h)
        img = Image.blend(img, Image.new("RGB", (w, h), (128, 128, 128)), 0.6)  # objects stand out
        draw = ImageDraw.Draw(img)
        kinds = [] if image_id == EMPTY_IMAGE else ["polygon"] * int(rng.integers(2, 5))
        if image_id in CROWD_IMAGES:
            kinds[-1] = "crowd"
        if image_id == RLE_IMAGE:
            kinds[-1] = "rle"
        for kind in kinds:
            cat_id, _, _, colour = CATEGORIES[int(rng.integers(len(CATEGORIES)))]
            ann_id += int(rng.integers(1, 8))  # unique, non-contiguous
            ann = {"id": ann_id, "image_id": image_id, "category_id": cat_id, "iscrowd": 0}
            if kind == "polygon":
                poly = polygon(rng, w, h)
                draw.polygon(list(zip(poly[0::2], poly[1::2])), fill=colour)
                xs, ys = poly[0::2], poly[1::2]
                box = [min(xs), min(ys), max(xs) - min(xs), max(ys) - min(ys)]
                ann.update(segmentation=[poly], area=polygon_area(poly))
            else:
                mask = blob_mask(rng, w, h, crowd=kind == "crowd")
                img.paste(colour, mask=Image.fromarray(mask * 255))
                counts = rle_counts(mask)
                seg = counts if kind == "crowd" else rle_string(counts)
                box = mask_box(mask)
                ann.update(segmentation={"counts": seg, "size": [h, w]}, area=float(mask.sum()),
                           iscrowd=int(kind == "crowd"))
            ann["bbox"] = [round(v, 2) for v in box]
            annotations.append(ann)
        name = f"{image_id:012d}.jpg"
        _save(_noisy(rng, img, sigma=4.0), root / "images" / name)
        images.append({"id": image_id, "file_name": name, "width": w, "height": h, "license": 1})
    _write_json(root / "instances.json", {
        "info": {"description": "recipes detection fixture", "version": FIXTURES_VERSION,
                 "year": 2024},
        "licenses": [{"id": 1, "name": "CC0-1.0", "url": ""}],
        "images": images, "annotations": annotations,
        "categories": [{"id": i, "name": n, "supercategory": s} for i, n, s, _ in CATEGORIES]})


# ---------------------------------------------------------------- multimodal
MM_SIZES = [(64, 48), (48, 64), (80, 80), (120, 72), (40, 100), (96, 64), (56, 56), (72, 96)]
MM_IDS = [2, 5, 11, 17, 23, 31, 47, 64]
MULTI_CAPTION_ROW = 3


def write_multimodal(root: Path) -> None:
    """The multimodal fixtures under ``root``: caption manifests over images (the layout: ``README``)."""
    rng = np.random.default_rng(4)
    names = [f"images/img_{i}.jpg" for i in range(len(MM_SIZES))]
    for name, (w, h) in zip(names, MM_SIZES):
        _save(_picture(rng, w, h), root / name)
    captions = [[_sentence(rng, int(rng.integers(3, 16))) for _ in range(rng.integers(2, 6))]
                for _ in names]
    captions[MULTI_CAPTION_ROW] = [_sentence(rng, n) for n in (4, 9, 14)]
    rows = [{"image": n, "caption": c[0]} for n, c in zip(names, captions)]
    k = MULTI_CAPTION_ROW
    rows[k] = {"image": names[k], "captions": captions[k]}
    _write_jsonl(root / "manifest.jsonl", rows)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerows([["image", "caption"]] + [[n, c[0]] for n, c in zip(names, captions)])
    _write(root / "manifest.csv", buf.getvalue())
    anns = [{"image_id": i, "caption": c} for i, caps in zip(MM_IDS, captions) for c in caps]
    for k, ann in enumerate(anns):
        ann["id"] = 500 + 3 * k
    _write_json(root / "captions.json", {
        "info": {"description": "recipes caption fixture", "version": FIXTURES_VERSION},
        "licenses": [{"id": 1, "name": "CC0-1.0", "url": ""}],
        "images": [{"id": i, "file_name": n, "width": w, "height": h, "license": 1}
                   for i, n, (w, h) in zip(MM_IDS, names, MM_SIZES)],
        "annotations": anns})


# ---------------------------------------------------------------- hostile
def _write_hostile(root: Path) -> None:
    rng = np.random.default_rng(5)
    buf = io.BytesIO()
    _picture(rng, 96, 64).save(buf, "JPEG", **JPEG_KW)
    for name, data in hostile_files(buf.getvalue()).items():  # what each is: recipes/fixtures_hostile.py
        _write(root / name, data)
    _save(_picture(rng, 64, 48), root / "coco/images/a.jpg")
    _save(_picture(rng, 48, 64), root / "coco/images/b.jpg")
    _save(_picture(rng, 48, 64), root / "coco/escape.jpg")  # exists: a loader must refuse, not load
    for case in COCO_CASES:
        _write_json(root / f"coco/{case}.json", hostile_coco(case))
    _write_jsonl(root / "text/missing_field.jsonl", MISSING_FIELD_ROWS)


README = """# Fixtures

Tiny deterministic datasets for every recipe (vision, text, detection, multimodal, audio) plus
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
    hostile/           bad input a loader must refuse or skip; see hostile/README.md

Regenerate after changing the generator (and commit the result):

    python fixtures/generate.py

`tests/core/test_fixtures.py` checks that this folder equals a fresh generation.
"""


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m recipes.fixtures OUT_DIR")
    print(generate(sys.argv[1]))
