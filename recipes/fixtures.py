"""Deterministic generator for the tiny datasets every recipe and test runs on.

    from recipes.fixtures import fixtures_dir
    root = fixtures_dir()                      # repo fixtures/ or a cached generated copy
    python fixtures/generate.py                # regenerate the committed fixtures/
    python -m recipes.fixtures OUT_DIR         # generate anywhere

Same library versions -> byte-identical output (seeded numpy RNGs, fixed encoder settings,
sorted JSON, single-threaded tokenizer training). Each domain writes its own fixtures, with the
writer its entry in :mod:`recipes.domains` names (``recipes/<domain>/fixtures.py``), which returns
what ``fixtures/README.md`` says of them; how a file is written and the pictures several domains
draw are :mod:`recipes.fixtures_files`; the hostile set, each file broken one way,
:mod:`recipes.fixtures_hostile`. Only the generation imports the domains; :func:`fixtures_dir`
reads the files alone.
"""

import argparse
import hashlib
import io
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from recipes.domains import DOMAINS, REGISTRY
from recipes.fixtures_files import FIXTURES_VERSION, JPEG_KW, picture, save, write, write_json, write_jsonl
from recipes.fixtures_hostile import COCO_CASES, MISSING_FIELD_ROWS, hostile_coco, hostile_files

UNAVAILABLE = "UNAVAILABLE"  # in a domain's folder: why its fixtures could not be written here
PACKAGE = Path(__file__).resolve().parent


def generator_files() -> tuple[Path, ...]:
    """What the cache key hashes: the root's generator modules, the registry, and each domain's
    fixture writer with the ``fixtures*.py`` modules of its folder (a writer may keep its data in one)."""
    root = [PACKAGE / name for name in ("fixtures.py", "fixtures_files.py", "fixtures_hostile.py", "domains.py")]
    writers = [PACKAGE.joinpath(*entry.fixtures.partition(":")[0].split(".")[1:]).with_suffix(".py")
               for entry in REGISTRY]
    return (*root, *sorted({sibling for writer in writers for sibling in writer.parent.rglob("fixtures*.py")}))


GENERATOR_FILES = generator_files()


def generate(out_dir: str | Path) -> Path:
    """Write every fixture into out_dir (created if missing) and return it."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    layouts = []
    for entry in REGISTRY:  # each domain's writer, named by its entry in recipes/domains.py
        try:
            layouts.append(entry.load("fixtures")(out / entry.name))
        except ImportError as error:  # a library it needs at run time is missing (audio: FFmpeg's)
            write(out / entry.name / UNAVAILABLE, f"{error}\n")
            layouts.append(f"    {entry.name}/ not written here: see {entry.name}/{UNAVAILABLE}\n")
    _write_hostile(out / "hostile")
    write(out / "README.md", README_TOP + "".join(layouts) + README_END)
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


README_TOP = f"""# Fixtures

Tiny deterministic datasets for every recipe ({', '.join(DOMAINS)}) plus
`hostile/` bad input, generated by `recipes/fixtures.py`:

    VERSION, README.md
"""
README_END = """    hostile/           bad input a loader must refuse or skip; see hostile/README.md

Regenerate after changing the generator (and commit the result):

    python fixtures/generate.py

`tests/core/test_fixtures.py` checks that this folder equals a fresh generation.
"""


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m recipes.fixtures", description="Write every recipe's fixtures "
                                     "into OUT_DIR (created if missing) and print it.")
    parser.add_argument("out_dir", metavar="OUT_DIR")
    print(generate(parser.parse_args().out_dir))
