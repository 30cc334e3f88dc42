"""Tests for recipes/fixtures.py: determinism, the committed copy, the cache, the hostile set.

What each domain's fixtures hold is tested in its own folder (tests/<domain>/test_fixtures.py),
as its writer lives in its own (recipes/<domain>/fixtures.py); the folders here come from the
registry, never from a list of their names.
"""

import json
import shutil
import struct
import sys
from pathlib import Path

import pytest
from PIL import Image

from recipes import fixtures
from recipes.domains import DOMAINS, REGISTRY

ROOT = Path(__file__).resolve().parents[2] / "fixtures"
HOSTILE = ROOT / "hostile"
NOT_GENERATED = {"generate.py"}  # the script lives next to its output


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file() and "__pycache__" not in p.parts
            and p.relative_to(root).as_posix() not in NOT_GENERATED}


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    return _tree(fixtures.generate(tmp_path_factory.mktemp("fresh")))


def test_generator_is_deterministic(fresh: dict[str, bytes], tmp_path: Path) -> None:
    again = _tree(fixtures.generate(tmp_path / "again"))
    assert sorted(again) == sorted(fresh)
    assert [k for k in fresh if fresh[k] != again[k]] == []


def test_committed_fixtures_match_generator(fresh: dict[str, bytes]) -> None:
    # Byte for byte, tokenizer.json included (BPE training was checked stable across thread
    # counts). Image bytes depend on the Pillow build (libjpeg-turbo, zlib); on a failure after
    # a Pillow upgrade, regenerate with `python fixtures/generate.py` and commit.
    committed = _tree(ROOT)
    assert sorted(committed) == sorted(fresh), "run python fixtures/generate.py"
    stale = [k for k in fresh if fresh[k] != committed[k]]
    assert stale == [], f"stale fixtures {stale}: run python fixtures/generate.py"


def test_fixtures_stay_small() -> None:
    assert sum(len(b) for b in _tree(ROOT).values()) < 1_500_000


def test_bomb_header_claims_huge_image_in_tiny_file() -> None:
    data = (HOSTILE / "images/bomb.png").read_bytes()
    assert len(data) < 1024 and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert width * height > 200_000_000
    with pytest.raises(Image.DecompressionBombError):
        Image.open(HOSTILE / "images/bomb.png")


def test_hostile_cases_are_each_broken_one_way() -> None:
    def load(name: str) -> dict:
        return json.loads((HOSTILE / "coco" / name).read_text(encoding="utf-8"))

    assert "../escape.jpg" in [i["file_name"] for i in load("escape.json")["images"]]
    unknown = load("unknown_category.json")
    known = {c["id"] for c in unknown["categories"]}
    assert [a["id"] for a in unknown["annotations"] if a["category_id"] not in known] == [2]
    assert [a["id"] for a in load("negative_box.json")["annotations"] if a["bbox"][2] < 0] == [3]
    lines = (HOSTILE / "text/bad_utf8.txt").read_bytes().split(b"\n")
    assert b"\xff\xfe" in lines[2]
    lines[2].decode("latin-1")
    with pytest.raises(UnicodeDecodeError):
        lines[2].decode("utf-8")
    rows = [json.loads(line) for line in (HOSTILE / "text/missing_field.jsonl").read_text(encoding="utf-8").splitlines()]
    assert ["text" in r for r in rows] == [True, False, True]
    assert (HOSTILE / "images/empty.jpg").stat().st_size == 0
    with pytest.raises(OSError), Image.open(HOSTILE / "images/truncated.jpg") as img:
        img.load()
    with pytest.raises(Image.UnidentifiedImageError):
        Image.open(HOSTILE / "images/not_an_image.jpg")


def test_fixtures_dir_is_usable() -> None:
    root = fixtures.fixtures_dir()
    assert (root / "VERSION").read_text().strip() == fixtures.FIXTURES_VERSION
    assert all((root / d).is_dir() for d in DOMAINS)


def test_cached_copy_is_generated_once_and_atomically(tmp_path: Path) -> None:
    first = fixtures._cached_fixtures(tmp_path)
    stamp = (first / "VERSION").stat().st_mtime_ns
    assert fixtures._cached_fixtures(tmp_path) == first
    assert (first / "VERSION").stat().st_mtime_ns == stamp
    assert [p.name for p in tmp_path.iterdir()] == [first.name]  # no staging dir left behind
    assert _tree(first) == _tree(ROOT)


def test_every_domain_writes_its_folder_and_the_readme_follows_the_registry(fresh: dict[str, bytes]) -> None:
    assert {name.split("/")[0] for name in fresh} == {*DOMAINS, "hostile", "README.md", "VERSION"}
    readme = fresh["README.md"].decode()
    assert f"every recipe ({', '.join(DOMAINS)})" in readme
    sections = [readme.index(f"\n    {name}/") for name in (*DOMAINS, "hostile")]
    assert sections == sorted(sections)  # each domain's layout, in the registry's order
    assert all(entry.fixtures.startswith(f"recipes.{entry.name}.fixtures:") for entry in REGISTRY)


def test_cache_key_hashes_every_module_of_the_generator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fixtures.generate(tmp_path / "tree")  # every writer imported
    loaded = {Path(module.__file__).resolve() for name, module in sys.modules.items()
              if name in ("recipes.fixtures", "recipes.domains")
              or name.rpartition(".")[2].startswith("fixtures") and name.startswith("recipes.")}
    assert loaded == {path.resolve() for path in fixtures.GENERATOR_FILES}
    copies = [Path(shutil.copy(path, tmp_path / f"{k}-{path.name}")) for k, path in enumerate(fixtures.GENERATOR_FILES)]
    monkeypatch.setattr(fixtures, "GENERATOR_FILES", tuple(copies))
    for copy in copies:  # an edit to any one of them is a new key
        before = fixtures._generator_hash()
        copy.write_text(copy.read_text(encoding="utf-8") + "# edited\n", encoding="utf-8")
        assert fixtures._generator_hash() != before
