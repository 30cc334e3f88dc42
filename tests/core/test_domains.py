"""One registry of domains (recipes/domains.py) feeds the CLI, the demo, the fixtures and the tests.

- Every folder of recipes/ that is a domain has an entry, and every entry's pieces exist.
- An entry missing a piece fails loudly, naming the entry and the piece.
- ``recipes --help`` reads the registry without importing a domain or torch.
"""

import inspect
import subprocess
import sys
from pathlib import Path

import pytest

import recipes
from recipes.cli.datasets import DataOptions, loader_function
from recipes.domains import DOMAINS, OPTIONAL, PIECES, REGISTRY, Domain, domain

PACKAGE = Path(recipes.__file__).resolve().parent
NOT_DOMAINS = {"core", "cli", "__pycache__"}
ENTRY = {"name": "sounds", "nickname": "clips", "paths": "a folder of clips", "loader": "recipes.core:build_loader",
         "demo": "recipes.core:build_loader", "opens": "recipes.core:build_loader", "fixtures": "recipes.fixtures:generate"}


def test_every_domain_folder_is_registered_and_every_entry_is_a_folder():
    folders = {path.parent.name for path in PACKAGE.glob("*/__init__.py")} - NOT_DOMAINS
    assert folders == set(DOMAINS)


@pytest.mark.parametrize("entry", REGISTRY, ids=lambda entry: entry.nickname)
def test_each_entry_names_pieces_that_exist(entry):
    for piece in PIECES:
        if piece in OPTIONAL and getattr(entry, piece) is None:  # the command says it has none for it
            continue
        assert callable(entry.load(piece)), f"{entry.nickname}: {piece}"
    package = __import__(f"recipes.{entry.name}", fromlist=["__all__"])
    assert entry.load("loader") is getattr(package, f"{entry.name}_loader")  # CONVENTIONS rule 8
    assert f"{entry.name}_loader" in package.__all__
    assert loader_function(entry.name) is entry.load("loader")
    assert list(inspect.signature(entry.load("opens")).parameters) == ["options", "train"]
    assert set(entry.composes) <= set(DOMAINS) - {entry.name}


def test_an_entry_missing_a_piece_fails_loudly():
    with pytest.raises(TypeError, match="fixtures"):  # a field not given at all
        Domain(**{key: value for key, value in ENTRY.items() if key != "fixtures"})
    with pytest.raises(ValueError, match="the 'sounds' entry has no opens"):
        Domain(**{**ENTRY, "opens": ""})
    with pytest.raises(ValueError, match="sounds.demo must be 'module:attribute'"):
        Domain(**{**ENTRY, "demo": "recipes.core.build_loader"})
    with pytest.raises(ValueError, match=r"sounds.reads names \['tokenizers'\]"):
        Domain(**{**ENTRY, "reads": ("tokenizers",)})
    missing = Domain(**{**ENTRY, "loader": "recipes.core:sounds_loader"})
    with pytest.raises(LookupError, match=r"recipes/domains.py: sounds.loader = 'recipes.core:sounds_loader' does not exist"):
        missing.load("loader")
    with pytest.raises(LookupError, match=r"sounds.opens = 'recipes.nowhere:open_path' does not exist"):
        Domain(**{**ENTRY, "opens": "recipes.nowhere:open_path"}).load("opens")


def test_an_unknown_domain_lists_the_registered_ones():
    with pytest.raises(ValueError, match=r"domain must be one of \("):
        domain("sounds")
    with pytest.raises(ValueError, match=r"domain must be one of"):
        DataOptions("sounds", Path("."))


def test_the_cli_options_a_domain_reads_come_from_its_entry(tmp_path):
    tokenized = [entry.name for entry in REGISTRY if "tokenizer" in entry.reads]
    for name in DOMAINS:
        message = DataOptions(name, tmp_path, tokenizer=tmp_path / "none.json").missing()
        assert (message is not None) == (name in tokenized), name


def test_help_reads_the_registry_without_importing_a_domain_or_torch():
    probe = ("import sys; from recipes.__main__ import build_parser; build_parser().format_help(); "
             "print(sorted(n for n in sys.modules if n == 'torch' or n.split('.')[:2] in "
             f"[['recipes', d] for d in {DOMAINS!r}]))")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                            cwd=PACKAGE.parent)
    assert result.stdout.strip() == "[]"


ROOT = PACKAGE.parent


def _in_order(text: str, items: list[str]) -> bool:
    """Does ``text`` hold every one of ``items``, in this order?"""
    places = [text.find(item) for item in items]
    return -1 not in places and places == sorted(places)


def test_every_list_of_domains_on_the_front_pages_follows_the_registry():
    work = f"{', '.join(DOMAINS[:-1])} and {DOMAINS[-1]} work"  # "vision, ..., audio and video work"
    for page in ("pyproject.toml", "mkdocs.yml", "docs/index.md", "README.md"):
        assert work in (ROOT / page).read_text(encoding="utf-8"), page
    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    assert _in_order(index, [f"[{name}]({name}.md)" for name in DOMAINS])  # one guide per domain
    assert _in_order(index, [f"[recipes.{name}](reference/{name}.md)" for name in DOMAINS])  # the API reference
    assert f"pytest -k {DOMAINS[0]}        # or {', '.join(DOMAINS[1:])}\n" in index  # one domain's tests
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8").split("\nnav:\n", 1)[1]
    assert _in_order(nav, [f": {name}.md\n" for name in DOMAINS])
    assert _in_order(nav, [f"- recipes.{name}: reference/{name}.md\n" for name in DOMAINS])


def test_the_command_line_branches_on_no_domain_name():
    import ast

    sources = [*sorted((PACKAGE / "cli").glob("*.py")), PACKAGE / "__main__.py"]
    found = []
    for path in sources:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare):
                named = [c.value for c in ast.walk(node) if isinstance(c, ast.Constant) and c.value in DOMAINS]
                found += [f"{path.relative_to(PACKAGE)}:{node.lineno} compares with {name!r}" for name in named]
    assert not found, f"the CLI finds a domain's pieces through recipes/domains.py: {found}"


def test_the_option_help_names_the_domains_that_read_each_option(capsys):
    from recipes.__main__ import main
    from recipes.domains import readers

    helps = {}
    for command in ("bench", "show", "check"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        helps[command] = " ".join(capsys.readouterr().out.split())
    for text in helps.values():
        assert f"tokenizer.json ({readers('tokenizer')})" in text
    assert "audio" in readers("tokenizer")
    assert "--train" not in helps["bench"].split("--clip-seconds S")[-1].split("--max-length N")[0]  # bench has none
    assert all(f"{entry.name} {entry.shows}" in helps["show"] for entry in REGISTRY)


def test_an_entry_without_a_check_or_a_picture_is_told_so_by_name():
    bare = Domain(**ENTRY)
    assert bare.check is None and bare.show is None
    with pytest.raises(LookupError, match=r"the 'sounds' entry names no check \(check\(options"):
        bare.load("check")
