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
# a Sphinx role as the site would show it unread: ":class:<code>Name</code>"
RAW_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|attr|data|exc|obj|const):[`<]")
TEST_COUNT_SLACK = 0.15  # how far the quoted test count may drift from the collected one before it is stale


def _pages() -> dict[str, str]:
    return {path.relative_to(DOCS).as_posix(): path.read_text(encoding="utf-8") for path in sorted(DOCS.rglob("*.md"))}


@pytest.mark.slow
def test_the_site_builds_strictly(tmp_path):
    import importlib

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
    # the docstrings' Sphinx roles are links or code on the site (docs/sphinx_roles.py), never raw markup
    for path in (tmp_path / "site").rglob("*.html"):
        raw = RAW_ROLE.findall(path.read_text(encoding="utf-8"))
        assert not raw, f"{path.relative_to(tmp_path / 'site')}: {raw[:5]}"
    reference = {name: (tmp_path / "site" / "reference" / name / "index.html").read_text(encoding="utf-8")
                 for name in ("core", *DOMAINS)}
    # a role in a domain's docstring reaches the core's page: `:class:`DataError`` from an imported name
    assert any('href="../core/#recipes.core.contracts.errors.DataError"' in page for page in reference.values())
    # and a public spelling, a namespace's too (`:func:`recipes.core.streams.turning_point``), where it is defined
    assert any('href="../core/#recipes.core.sources.streams.turning_point"' in page for page in reference.values())
    for name in DOMAINS:  # each public class and function is documented on its page, so a role can link it
        module = importlib.import_module(f"recipes.{name}")
        for public in module.__all__:
            if callable(getattr(module, public)):
                assert re.search(rf'id="recipes\.{name}(\.\w+)*\.{public}"', reference[name]), (name, public)


def test_sphinx_roles_become_cross_references_resolved_where_the_docstring_stands(tmp_path):
    griffe = pytest.importorskip("griffe", reason='the docs extra: pip install -e ".[docs]"')
    package = tmp_path / "papers"
    package.mkdir()
    sources = {
        "__init__.py": ['"""Its :class:`Thing`."""', "from papers.report import report",
                        "from papers.things import Thing"],
        # griffe puts the module at papers.report, Python the function
        "report.py": ["def report():", '    """A report."""'],
        "other.py": ["class Stray:", '    """Imported nowhere."""'],
        "things.py": ['"""Things: :func:`report`, :class:`torch.Tensor`,',
                      ':meth:`~papers.things.Thing.size`, :func:`!f`."""',
                      "class Thing:",
                      '    """A thing; :meth:`size`, :class:`Stray`, :py:meth:`its length <__len__>`."""',
                      "    def size(self):",
                      '        """:meth:`__len__`"""'],
    }
    for name, lines in sources.items():
        (package / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    extensions = griffe.load_extensions(f"{DOCS / 'sphinx_roles.py'}:SphinxRoles")
    loaded = griffe.load("papers", search_paths=[tmp_path], extensions=extensions)

    def ref(identifier: str, title: str) -> str:
        return f'<autoref identifier="{identifier}" optional>`{title}`</autoref>'

    assert loaded.docstring.value == f"Its {ref('papers.things.Thing', 'Thing')}."
    assert loaded["things"].docstring.value == (  # ~ keeps the last name, ! only the code
        f"Things: {ref('papers.report.report', 'report')}, {ref('torch.Tensor', 'torch.Tensor')},\n"
        f"{ref('papers.things.Thing.size', 'size')}, `f`.")
    assert loaded["things.Thing"].docstring.value == (  # a name not imported: the package's only one
        f"A thing; {ref('papers.things.Thing.size', 'size')}, {ref('papers.other.Stray', 'Stray')}, "
        f"{ref('__len__', 'its length')}.")
    assert loaded["things.Thing.size"].docstring.value == ref("__len__", "__len__")


@pytest.mark.slow
@pytest.mark.parametrize("part", range(3), ids=["pages-1-of-3", "pages-2-of-3", "pages-3-of-3"])
def test_every_docs_example_runs_without_a_warning(tmp_path, part):
    # in three parts of the pages, so that the suite's workers share them
    pages = {page: python_blocks(DOCS / page) for page in _pages()}
    assert sum(map(len, pages.values())) >= len(DOMAINS)  # each domain's guide has at least one
    failures = run_blocks(_share(pages, 3)[part], tmp_path)
    assert not failures, "\n\n".join(failures)


SLOW_PAGES = {"scale.md": 12, "trainers.md": 12}  # Ray starts; the trainers run: about 12 s each, the rest 1-2 s a block


def _share(pages: dict[str, list[str]], parts: int) -> list[dict[str, list[str]]]:
    """The pages with blocks in ``parts`` of about equal time, the longest first into the shortest part."""
    shares: list[dict[str, list[str]]] = [{} for _ in range(parts)]
    totals = [0] * parts
    weights = {page: SLOW_PAGES.get(page, 2 + 2 * len(blocks)) for page, blocks in pages.items() if blocks}
    for page in sorted(weights, key=lambda page: (-weights[page], page)):
        shortest = totals.index(min(totals))
        shares[shortest][page], totals[shortest] = pages[page], totals[shortest] + weights[page]
    return shares


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
    for module, members in re.findall(r"^::: (recipes\.core\.[\w.]+)\n(.*?)(?=^::: |\Z)", reference, flags=re.S | re.M):
        for name in re.findall(r"^\s+- (\w+)$", members, flags=re.M):
            listed[name] = module
    # the facade's names, then each namespace's under its heading
    facade, *parts = re.split(r"^### (\w+)\n(?=\n`from recipes\.core import \1`)", reference.split("## Namespaces")[1], flags=re.M)
    sections = {"": (recipes.core, reference.split("## Namespaces")[0])} | {
        name: (getattr(recipes.core, name), text) for name, text in zip(parts[::2], parts[1::2])}
    assert sorted(sections) == sorted(["", *recipes.core.NAMESPACES])
    for name, (namespace, text) in sections.items():
        assert sorted(re.findall(r"^\s+- (\w+)$", text, flags=re.M)) == sorted(namespace.HOMES), name or "the facade"
    assert sorted(listed) == sorted(name for namespace, _ in sections.values() for name in namespace.HOMES)
    for name, module in listed.items():  # documented where it is defined (a constant: where it is set)
        assert hasattr(importlib.import_module(module), name), name


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
