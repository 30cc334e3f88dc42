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
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import io
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path

import recipes

PACKAGE = Path(recipes.__file__).resolve().parent


@dataclass(frozen=True)
class CopiedFolder:
    """What :func:`copy_domain` wrote: the folder, its files and lines, and what it still imports
    from the installed package (``{"recipes.core": ["errors", ...], "recipes.text": [...]}``)."""

    target: Path
    files: int
    lines: int
    needs: dict[str, list[str]]
    datasets: list[str]


def rewrite_imports(source: str, domain: str, name: str = "<source>") -> str:
    """``source`` with its imports of ``recipes.<domain>`` pointed at a top-level ``<domain>``.

    ``from recipes.<domain>[.x] import ...`` and ``import recipes.<domain>.x as y`` are rewritten
    wherever they appear (functions included); text outside import statements is left alone.
    ``import recipes.<domain>.x`` without ``as`` binds the name ``recipes``, which the copy
    cannot keep, so it raises ``ValueError`` naming ``name`` and the line, as does
    ``from recipes import <domain>``. Docstrings' examples (``from recipes.<domain> import``,
    ``import recipes.<domain>.x as y``) are rewritten alike; comments and other strings are not.
    """
    prefix = f"recipes.{domain}"
    lines = source.splitlines(keepends=True)
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    at = {token.start: position for position, token in enumerate(tokens) if token.type == tokenize.NAME}
    cuts: list[tuple[int, int, int]] = []  # (row, first column, end column) of each "recipes." to remove

    def char_column(row: int, byte_column: int) -> int:
        return len(lines[row - 1].encode("utf-8")[:byte_column].decode("utf-8"))

    def cut_after(row: int, byte_column: int, skip: int) -> None:
        # tokens from the import's position: `skip` of them, then NAME recipes, OP ".", NAME <domain>
        first = at[(row, char_column(row, byte_column))] + skip
        words = [token.string for token in tokens[first : first + 3]]
        if words != ["recipes", ".", domain] or tokens[first].start[0] != tokens[first + 2].start[0]:
            raise ValueError(f"{name}, line {row}: cannot find {prefix} in {lines[row - 1].strip()!r}")
        cuts.append((tokens[first].start[0], tokens[first].start[1], tokens[first + 2].start[1]))

    for node in ast.walk(ast.parse(source, filename=name)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
            if node.module == prefix or node.module.startswith(prefix + "."):
                cut_after(node.lineno, node.col_offset, skip=1)  # after "from"
            elif node.module == "recipes" and any(alias.name == domain for alias in node.names):
                raise ValueError(f"{name}, line {node.lineno}: write `import {prefix} as {domain}`, "
                                 f"which the copy can point at itself, not `from recipes import {domain}`")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == prefix or alias.name.startswith(prefix + "."):
                    if alias.asname is None:
                        raise ValueError(f"{name}, line {node.lineno}: `import {alias.name}` binds the name recipes, "
                                         "which the copy cannot point at itself; add `as NAME`")
                    cut_after(alias.lineno, alias.col_offset, skip=0)
    for row, start, end in sorted(cuts, reverse=True):  # right to left: earlier columns stay valid
        lines[row - 1] = lines[row - 1][:start] + lines[row - 1][end:]
    _rewrite_docstrings(lines, ast.parse(source, filename=name), domain, skip={row for row, _, _ in cuts})
    return "".join(lines)


def _rewrite_docstrings(lines: list[str], tree: ast.Module, domain: str, skip: set[int]) -> None:
    """Point the import examples in docstrings at the copy, in place: a copied docstring's usage
    example then runs against the copy, not the installed package. Rows in ``skip`` hold a rewritten
    import statement (a docstring sharing its line is left alone)."""
    example = re.compile(rf"(?<![\w.])(from|import) recipes\.{re.escape(domain)}(?=[\s.])")
    owners = [node for node in ast.walk(tree)
              if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))]
    for owner in owners:
        first = owner.body[0] if owner.body else None
        if not (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)):
            continue
        for row in range(first.lineno, first.end_lineno + 1):
            if row not in skip:
                lines[row - 1] = example.sub(rf"\1 {domain}", lines[row - 1])


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


def copy_domain(domain: str, dest: Path) -> CopiedFolder:
    """Copy ``recipes/<domain>/`` to ``dest/<domain>/`` with its own imports pointed at the copy.

    Every file is rewritten before anything is written; an existing ``dest/<domain>`` is never
    touched (``FileExistsError``).
    """
    source = PACKAGE / domain
    target = dest / domain
    if target.exists():
        raise FileExistsError(f"{target} already exists; remove it or copy into another DEST")
    files: dict[Path, str] = {}
    needs: dict[str, set[str]] = {}
    for path in sorted(source.rglob("*.py")):
        relative = path.relative_to(source)
        if "__pycache__" in relative.parts:
            continue
        text = path.read_text(encoding="utf-8")
        files[relative] = rewrite_imports(text, domain, name=f"recipes/{domain}/{relative.as_posix()}")
        for package, modules in installed_imports(text, domain).items():
            needs.setdefault(package, set()).update(modules)
    dest.mkdir(parents=True, exist_ok=True)
    target.mkdir()  # FileExistsError if another process made it since the check above
    for relative, text in files.items():
        (target / relative).parent.mkdir(parents=True, exist_ok=True)
        (target / relative).write_text(text, encoding="utf-8", newline="")
    return CopiedFolder(
        target, len(files), sum(text.count("\n") for text in files.values()),
        {package: sorted(needs[package]) for package in sorted(needs, key=lambda package: package != "recipes.core")},
        _datasets(files.get(Path("__init__.py"), "")),
    )


def _datasets(init: str) -> list[str]:
    """The ``*Dataset`` names of a package's ``__all__``, for the import example."""
    for node in ast.walk(ast.parse(init)):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            names = ast.literal_eval(node.value)
            return [n for n in names if n.endswith("Dataset")] or list(names[:1])
    return []


def run(args: argparse.Namespace) -> int:
    """Copy, then say what was copied, what it still needs from the installed package and how to import it."""
    copied = copy_domain(args.domain, args.dest)
    print(f"{args.domain}/ ({copied.files} files, {copied.lines:,} lines) -> {copied.target}")
    for package, modules in copied.needs.items():
        print(f"it needs {package}: {', '.join(modules)}")
    names = ", ".join(copied.datasets) or "..."
    print(f"import it with {args.dest} as the working directory or on sys.path: from {args.domain} import {names}")
    return 0
