"""The documentation site (docs/, mkdocs.yml) builds strictly, its examples run, its figures hold."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from recipes.domains import DOMAINS
from tests.core.blocks import python_blocks, run_blocks

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
TEST_COUNT_SLACK = 0.15  # how far the quoted test count may drift from the collected one before it is stale


def _pages() -> dict[str, str]:
    return {path.relative_to(DOCS).as_posix(): path.read_text(encoding="utf-8") for path in sorted(DOCS.rglob("*.md"))}


@pytest.mark.slow
def test_the_site_builds_strictly(tmp_path):
    pytest.importorskip("mkdocs", reason='the docs extra: pip install -e ".[docs]"')
    # --strict: a warning fails the build (a broken link or anchor, a page left out of the nav,
    # a docstring griffe cannot read, an API name that does not exist)
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    built = {path.parent.relative_to(tmp_path / "site").as_posix() for path in (tmp_path / "site").rglob("index.html")}
    for page in _pages():
        assert (page.removesuffix(".md").removesuffix("index").rstrip("/") or ".") in built, page


@pytest.mark.slow
def test_every_docs_example_runs_without_a_warning(tmp_path):
    if not (ROOT / "fixtures").is_dir():
        pytest.skip("the examples use the repository's fixtures/")
    pages = {page: python_blocks(DOCS / page) for page in _pages()}
    assert sum(map(len, pages.values())) >= len(DOMAINS)  # each domain's guide has at least one
    failures = run_blocks({page: blocks for page, blocks in pages.items() if blocks}, tmp_path)
    assert not failures, "\n\n".join(failures)


def test_each_domain_has_a_guide_and_a_reference_page_with_its_public_api():
    import importlib

    for name in DOMAINS:
        guide = (DOCS / f"{name}.md").read_text(encoding="utf-8")
        assert f"from recipes.{name} import" in guide, name
        assert f"::: recipes.{name}\n" in (DOCS / "reference" / f"{name}.md").read_text(encoding="utf-8"), name
        assert importlib.import_module(f"recipes.{name}").__all__, name  # what mkdocstrings renders


def test_the_core_reference_lists_every_public_name_under_its_module():
    import importlib

    import recipes.core

    reference = (DOCS / "reference" / "core.md").read_text(encoding="utf-8")
    listed = {}  # name -> the module its ::: block documents
    for module, members in re.findall(r"^::: (recipes\.core\.\w+)\n(.*?)(?=^::: |\Z)", reference, flags=re.S | re.M):
        for name in re.findall(r"^\s+- (\w+)$", members, flags=re.M):
            listed[name] = module
    assert sorted(listed) == sorted(recipes.core.__all__)
    for name, module in listed.items():  # documented where it is defined (a constant: where it is set)
        assert hasattr(importlib.import_module(module), name), name
        assert name.isupper() or getattr(recipes.core, name).__module__ == module, name


def test_every_glossary_term_the_docs_link_exists():
    headings = re.findall(r"^## (.+)$", (DOCS / "glossary.md").read_text(encoding="utf-8"), flags=re.M)
    for term in ("bomb-safe", "rank-aware", "draws", "plan", "W1/W2 ranks", "data-wait", "USS", "draft_size",
                 "EXIF-turned", "row group footer"):
        assert any(term in heading for heading in headings), term


def test_the_readme_says_how_to_build_and_serve_the_site():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert 'pip install -e ".[docs]" && mkdocs serve' in readme


def _quoted_test_counts() -> list[tuple[str, int]]:
    """Every "N passed, M skipped" the README and docs quote about this suite, as (file, N + M)."""
    found = []
    for path in [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]:
        for passed, skipped in re.findall(r"(\d[\d,]*) passed, (\d[\d,]*) skipped", path.read_text(encoding="utf-8")):
            found.append((path.relative_to(ROOT).as_posix(), int(passed.replace(",", "")) + int(skipped.replace(",", ""))))
    return found


@pytest.mark.slow
def test_the_quoted_test_count_is_within_15_percent_of_the_collected_count():
    quoted = _quoted_test_counts()
    assert quoted, "docs/index.md quotes the suite's test count"
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "tests"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    collected = int(re.search(r"(\d+) tests? collected", done.stdout).group(1))
    for path, count in quoted:
        # stale: measure again (docs/index.md says how) and date it by the commit measured
        assert abs(count - collected) <= TEST_COUNT_SLACK * collected, (path, count, collected)
