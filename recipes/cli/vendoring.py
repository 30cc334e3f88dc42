"""``recipes copy DOMAIN DEST --standalone``: the package's modules a domain's copy imports, inside it.

    python -m recipes copy vision my_project --standalone
    # my_project/vision/            the domain, its imports of recipes.vision pointed at itself
    # my_project/vision/vendored/   the modules of recipes it imports, directly or through each other

The copy then runs where ``dataloader-recipes`` is not installed. What is vendored is found in the
syntax trees, from the domain's import statements (those inside functions too: a feature reached at
run time must be there) through every module they reach, and nothing else: the facade
``vendored/core/__init__.py`` keeps only the names whose modules came along. Each vendored file is
the package's own, its imports of ``recipes`` pointed at ``<domain>.vendored``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import recipes
import recipes.core
from recipes.cli.import_rewrite import rewrite_imports

PACKAGE = Path(recipes.__file__).resolve().parent

VENDORED = "vendored"  # the folder, inside the copy


def module_file(module: str) -> Path | None:
    """The source of ``recipes.x.y`` (a module, or a package's ``__init__.py``), None if there is none."""
    folder = PACKAGE.joinpath(*module.split(".")[1:])
    for path in (folder / "__init__.py", folder.with_name(folder.name + ".py")):
        if path.is_file():
            return path
    return None


def imported_modules(source: str) -> set[str]:
    """The modules of ``recipes`` that ``source`` imports: a name from the facade counts as the module
    that defines it, a namespace of the facade (``storage``) as itself and the modules of the names
    ``source`` reads from it (``storage.shown``), a name from a package as its module where it is one."""
    found: set[str] = set()
    nodes = _run_time_nodes(ast.parse(source))
    spaces: dict[str, dict[str, str]] = {}  # the name source gives a namespace -> the namespace's HOMES
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "recipes":
            for alias in node.names:
                if node.module == "recipes.core" and alias.name in recipes.core.HOMES:
                    found.add(f"recipes.core.{recipes.core.HOMES[alias.name]}")
                elif node.module == "recipes.core" and alias.name in recipes.core.NAMESPACES:
                    spaces[alias.asname or alias.name] = getattr(recipes.core, alias.name).HOMES
                elif (namespace := node.module.removeprefix("recipes.core.")) in recipes.core.NAMESPACES:
                    found.add(f"recipes.core.{getattr(recipes.core, namespace).HOMES[alias.name]}")
                submodule = f"{node.module}.{alias.name}"
                found.add(submodule if module_file(submodule) else node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.split(".")[0] == "recipes")
    for node in nodes:  # storage.shown: the module that defines shown
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in spaces:
            home = spaces[node.value.id].get(node.attr)
            found.update([f"recipes.core.{home}"] if home else [])
    return found


def _is_type_checking(node: ast.AST) -> bool:
    """``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``): a block that only static readers run."""
    test = node.test if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _run_time_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node of ``tree`` but those inside ``if TYPE_CHECKING:`` blocks (their ``else`` kept)."""
    nodes, todo = [], [tree]
    while todo:
        node = todo.pop()
        nodes.append(node)
        children = node.orelse if _is_type_checking(node) else list(ast.iter_child_nodes(node))
        todo.extend(children)
    return nodes


def needed_modules(domain: str, sources: list[str]) -> list[str]:
    """Every module of ``recipes`` outside ``domain`` that ``sources`` (the domain's files) reach, with
    the packages that hold them, sorted."""
    own = f"recipes.{domain}"
    needed: set[str] = set()
    todo = [module for source in sources for module in imported_modules(source)]
    while todo:
        module = todo.pop()
        if module in needed or module == own or module.startswith(own + "."):
            continue
        path = module_file(module)
        if path is None:
            raise ValueError(f"recipes/{domain} imports {module}, which is not a module of the installed package")
        needed.add(module)
        todo.extend(imported_modules(path.read_text(encoding="utf-8")))
        parts = module.split(".")
        todo.extend(".".join(parts[:end]) for end in range(1, len(parts)))  # the packages holding it
    return sorted(needed)


def vendored_files(domain: str, modules: list[str]) -> dict[Path, str]:
    """``modules``' sources, by their path under ``<domain>/vendored/``, imports pointed there; the
    facade keeps the names of the modules that are vendored."""
    files: dict[Path, str] = {}
    for module in modules:
        path = module_file(module)
        assert path is not None  # needed_modules found each
        relative = path.relative_to(PACKAGE)
        text = rewrite_imports(path.read_text(encoding="utf-8"), domain, name=f"recipes/{relative.as_posix()}",
                               vendored=f"{domain}.{VENDORED}")
        if module == "recipes.core" or module.removeprefix("recipes.core.") in recipes.core.NAMESPACES:
            text = _facade_of(text, {m.removeprefix("recipes.core.") for m in modules})
        files[relative] = text
    return files


def _facade_of(text: str, rooms: set[str]) -> str:
    """The facade's source (or a namespace's) with the ``HOMES`` entries, the namespaces, and the
    imports its ``if TYPE_CHECKING:`` block makes for static readers, of modules that are not
    vendored left out."""
    entry = re.compile(r'^\s+"(\w+)": "([\w.]+)",\n$')
    namespace = re.compile(r'^    "(\w+)",\n$')  # an entry of the facade's NAMESPACES
    lines = text.splitlines(keepends=True)
    for block in [node for node in ast.walk(ast.parse(text)) if _is_type_checking(node)]:
        for statement in block.body:
            room = ".".join((getattr(statement, "module", None) or "").split(".core.")[1:])
            if isinstance(statement, ast.ImportFrom) and room not in rooms:
                lines[statement.lineno - 1 : statement.end_lineno] = [""] * (statement.end_lineno - statement.lineno + 1)
        if not any(lines[statement.lineno - 1] for statement in block.body):
            lines[block.body[0].lineno - 1] = "    pass\n"
    kept = [line for line in lines if not (match := entry.match(line) or namespace.match(line))
            or match.group(match.lastindex) in rooms]
    return "".join(kept)
