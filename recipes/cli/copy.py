"""``recipes copy DOMAIN DEST``: a domain's folder as the start of your own code.

    python -m recipes copy detection my_project
    cd my_project && python -c "from detection import CocoDataset"

A domain's files import each other, so the unit to copy is the folder: ``recipes/<domain>/``
(its ``.py`` files, ``demo.py`` included as a usage example) goes to ``DEST/<domain>/``. The
copy's imports of its own domain (``from recipes.detection.coco_files import ...``) are rewritten
to the copy (``from detection.coco_files import ...``); those of ``recipes.core``, and
multimodal's of ``recipes.text`` and ``recipes.vision``, keep using the installed package.
Import statements change, found in the syntax tree and edited at the token's position, and so
do the usage examples in docstrings (``from recipes.detection import`` there reads
``from detection import``), so that they run against the copy; comments and other strings stay.
A domain's own tests (``recipes/<domain>/tests/``, built on its fixture writer) come along:
``python -m pytest vision/tests`` in DEST checks the copy after each edit.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
from dataclasses import dataclass
from pathlib import Path

import recipes
from recipes.cli.import_rewrite import rewrite_imports
from recipes.cli.vendoring import VENDORED, needed_modules, vendored_files

PACKAGE = Path(recipes.__file__).resolve().parent


@dataclass(frozen=True)
class CopiedFolder:
    """What :func:`copy_domain` wrote: the folder, its files and lines, what it still imports from the
    installed package (``{"recipes.core": ["errors", ...], "recipes.text": [...]}``; nothing when
    standalone), and the files and lines vendored inside it."""

    target: Path
    files: int
    lines: int
    needs: dict[str, list[str]]
    datasets: list[str]
    vendored_files: int = 0
    vendored_lines: int = 0


def _is_package(module: str) -> bool:
    """Whether ``module`` is a package (what is imported from it may be a module), not a module."""
    try:
        spec = importlib.util.find_spec(module)
    except ModuleNotFoundError:
        spec = None
    if spec is None:  # not installed here: of its modules, the top-level ones are packages
        return "." not in module.removeprefix("recipes.")
    return spec.submodule_search_locations is not None


def installed_imports(source: str, domain: str) -> dict[str, set[str]]:
    """The modules of the installed package that ``source`` imports, outside its own domain, by their
    path in it: ``{"recipes.core": {"contracts.errors", ...}}``; a name imported from a package itself
    is listed as is."""
    needs: dict[str, set[str]] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names_listed = node.module.count(".") == 1 or _is_package(node.module)  # recipes.<x>, or a package
            modules = [f"{node.module}.{alias.name}" for alias in node.names] if names_listed else [node.module]
        elif isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        else:
            continue
        for module in modules:
            parts = module.split(".")
            if parts[0] == "recipes" and len(parts) >= 3 and parts[1] != domain:
                needs.setdefault(f"recipes.{parts[1]}", set()).add(".".join(parts[2:]))
    return needs


def copy_domain(domain: str, dest: Path, *, standalone: bool = False) -> CopiedFolder:
    """Copy ``recipes/<domain>/`` to ``dest/<domain>/`` with its own imports pointed at the copy;
    ``standalone``: with the modules of ``recipes`` it imports in ``dest/<domain>/vendored/``
    (:mod:`recipes.cli.vendoring`), its other imports pointed there.

    Every file is rewritten before anything is written; an existing ``dest/<domain>`` is never
    touched (``FileExistsError``).
    """
    source = PACKAGE / domain
    target = dest / domain
    if target.exists():
        raise FileExistsError(f"{target} already exists; remove it or copy into another DEST")
    vendored = f"{domain}.{VENDORED}" if standalone else None
    files: dict[Path, str] = {}
    needs: dict[str, set[str]] = {}
    originals = []
    for path in sorted(source.rglob("*.py")):
        relative = path.relative_to(source)
        if "__pycache__" in relative.parts:
            continue
        text = path.read_text(encoding="utf-8")
        originals.append(text)
        files[relative] = rewrite_imports(text, domain, name=f"recipes/{domain}/{relative.as_posix()}", vendored=vendored)
        for package, modules in installed_imports(text, domain).items():
            needs.setdefault(package, set()).update(modules)
    extra = vendored_files(domain, needed_modules(domain, originals)) if standalone else {}
    dest.mkdir(parents=True, exist_ok=True)
    target.mkdir()  # FileExistsError if another process made it since the check above
    written = {**files, **{Path(VENDORED) / relative: text for relative, text in extra.items()}}
    for relative, text in written.items():
        (target / relative).parent.mkdir(parents=True, exist_ok=True)
        (target / relative).write_text(text, encoding="utf-8", newline="")
    return CopiedFolder(
        target, len(files), _lines(files),
        {} if standalone else {package: sorted(needs[package])
                               for package in sorted(needs, key=lambda package: package != "recipes.core")},
        _datasets(files.get(Path("__init__.py"), "")),
        len(extra), _lines(extra),
    )


def _lines(files: dict[Path, str]) -> int:
    return sum(text.count("\n") for text in files.values())


def _datasets(init: str) -> list[str]:
    """The ``*Dataset`` names of a package's ``__all__``, for the import example."""
    for node in ast.walk(ast.parse(init)):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            names = ast.literal_eval(node.value)
            return [n for n in names if n.endswith("Dataset")] or list(names[:1])
    return []


def run(args: argparse.Namespace) -> int:
    """Copy, then say what was copied, what it still needs from the installed package and how to import it."""
    copied = copy_domain(args.domain, args.dest, standalone=args.standalone)
    print(f"{args.domain}/ ({copied.files} files, {copied.lines:,} lines) -> {copied.target}")
    if args.standalone:
        print(f"{args.domain}/{VENDORED}/ ({copied.vendored_files} files, {copied.vendored_lines:,} lines): the modules "
              f"of recipes it imports; {copied.lines + copied.vendored_lines:,} lines in all, recipes not needed")
    for package, modules in copied.needs.items():
        print(f"it needs {package}: {', '.join(modules)}")
    names = ", ".join(copied.datasets) or "..."
    if (copied.target / "tests").is_dir():
        print(f"test it from {args.dest}: python -m pytest {args.domain}/tests")
    print(f"import it with {args.dest} as the working directory or on sys.path: from {args.domain} import {names}")
    return 0
