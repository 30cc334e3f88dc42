"""Point a copied file's imports of ``recipes`` at the copy: the syntax tree finds the import
statements, and each is edited at its tokens' position, so that comments and other strings stay."""

from __future__ import annotations

import ast
import io
import re
import tokenize


def rewrite_imports(source: str, domain: str, name: str = "<source>", vendored: str | None = None) -> str:
    """``source`` with its imports of ``recipes.<domain>`` pointed at a top-level ``<domain>``, and with
    ``vendored`` (``"vision.vendored"``) its other imports of ``recipes`` pointed there.

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
    edits: list[tuple[int, int, int, str]] = []  # (row, first column, end column, new text)

    def char_column(row: int, byte_column: int) -> int:
        return len(lines[row - 1].encode("utf-8")[:byte_column].decode("utf-8"))

    def replace(row: int, byte_column: int, skip: int, words: list[str], text: str) -> None:
        # tokens from the import's position: `skip` of them, then `words` (NAME recipes, OP ".", NAME <domain>)
        first = at[(row, char_column(row, byte_column))] + skip
        found, last = tokens[first : first + len(words)], tokens[first + len(words) - 1]
        if [token.string for token in found] != words or found[0].start[0] != last.start[0]:
            raise ValueError(f"{name}, line {row}: cannot find {'.'.join(words)} in {lines[row - 1].strip()!r}")
        edits.append((tokens[first].start[0], tokens[first].start[1], last.end[1], text))

    def point(row: int, byte_column: int, skip: int, module: str) -> None:
        if module == prefix or module.startswith(prefix + "."):
            replace(row, byte_column, skip, ["recipes", ".", domain], domain)
        elif vendored is not None and (module == "recipes" or module.startswith("recipes.")):
            replace(row, byte_column, skip, ["recipes"], vendored)

    for node in ast.walk(ast.parse(source, filename=name)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
            if node.module == "recipes" and any(alias.name == domain for alias in node.names):
                raise ValueError(f"{name}, line {node.lineno}: write `import {prefix} as {domain}`, "
                                 f"which the copy can point at itself, not `from recipes import {domain}`")
            point(node.lineno, node.col_offset, 1, node.module)  # after "from"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                own = alias.name == prefix or alias.name.startswith(prefix + ".")
                if (own or vendored is not None and alias.name.startswith("recipes.")) and alias.asname is None:
                    raise ValueError(f"{name}, line {node.lineno}: `import {alias.name}` binds the name recipes, "
                                     "which the copy cannot point at itself; add `as NAME`")
                point(alias.lineno, alias.col_offset, 0, alias.name)
    for row, start, end, text in sorted(edits, reverse=True):  # right to left: earlier columns stay valid
        lines[row - 1] = lines[row - 1][:start] + text + lines[row - 1][end:]
    _rewrite_docstrings(lines, ast.parse(source, filename=name), domain, skip={row for row, *_ in edits})
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
