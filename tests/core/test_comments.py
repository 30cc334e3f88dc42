"""Comments and docstrings say why the code is this way now (CONVENTIONS.md, rules 13 and 19).

- Every module docstring under recipes/ is at most 25 lines, its opening and closing quotes included.
- No comment (read with tokenize) or docstring (read with ast) under recipes/ tells history in
  words that are never right there: "stop N", "session", "used to", "earlier version",
  "no longer", "previously". History belongs in commit messages and benchmarks/README.md.
- README.md and benchmarks/README.md date their figures by release or commit, never by "stop N",
  a "session" or "the lent machine".
"""

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

import recipes

PACKAGE = Path(recipes.__file__).resolve().parent
ROOT = PACKAGE.parent
READMES = ("README.md", "benchmarks/README.md")
MAX_MODULE_DOCSTRING_LINES = 25
# \s+ rather than a space: a phrase may wrap onto the next line of a docstring or comment block
HISTORY = re.compile(
    r"\bstop\s+\d+|\bsession\b|\bused\s+to\b|\bearlier\s+version|\bno\s+longer\b|\bpreviously\b", re.IGNORECASE
)
README_HISTORY = re.compile(r"\bstop\s+\d+|session|\blent\s+machine|\bmachine\s+lent\b", re.IGNORECASE)

def _relative(path: Path) -> str:
    return path.resolve().relative_to(ROOT).as_posix()


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def module_docstring_lines(source: str) -> int:
    """Lines of the module docstring, from its opening quotes to its closing ones (0: none)."""
    body = ast.parse(source).body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        if isinstance(body[0].value.value, str):
            return body[0].end_lineno - body[0].lineno + 1
    return 0


def history_lines(source: str) -> list[tuple[int, str]]:
    """``(line, text)`` of every docstring and comment block in ``source`` that tells history."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            docstring = ast.get_docstring(node, clean=False)
            if docstring is not None and HISTORY.search(docstring):
                found.append((node.body[0].lineno, HISTORY.search(docstring).group()))
    # consecutive comment lines form one block, so a phrase wrapped over two lines is still seen
    blocks: list[tuple[int, int, list[str]]] = []  # (first line, last line, texts)
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type != tokenize.COMMENT:
            continue
        line, text = token.start[0], token.string.lstrip("#").strip()
        if blocks and blocks[-1][1] == line - 1:
            blocks[-1] = (blocks[-1][0], line, [*blocks[-1][2], text])
        else:
            blocks.append((line, line, [text]))
    for first, _, texts in blocks:
        match = HISTORY.search(" ".join(texts))
        if match:
            found.append((first, match.group()))
    return sorted(found)


def test_module_docstrings_are_at_most_25_lines():
    modules = _modules()
    assert len(modules) > 30  # the package was read
    long = [f"{_relative(path)}: {lines} lines" for path in modules
            if (lines := module_docstring_lines(path.read_text(encoding="utf-8"))) > MAX_MODULE_DOCSTRING_LINES]
    assert not long, f"module docstrings over {MAX_MODULE_DOCSTRING_LINES} lines:\n" + "\n".join(long)


def test_no_comment_or_docstring_tells_history():
    found = [f"{_relative(path)}:{line}: {words!r}" for path in _modules()
             for line, words in history_lines(path.read_text(encoding="utf-8"))]
    advice = "say why the code is this way now (history: commit messages, benchmarks/README.md)"
    assert not found, advice + ":\n" + "\n".join(found)


def test_the_readmes_date_figures_by_release_or_commit():
    found = []
    for name in READMES:
        for number, line in enumerate((ROOT / name).read_text(encoding="utf-8").splitlines(), 1):
            if match := README_HISTORY.search(line):
                found.append(f"{name}:{number}: {match.group()!r}")
    assert not found, "date figures by release or commit:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "source",
    [
        '"""Fast since stop 12."""',
        "x = 1  # measured in this session",
        "def f():\n    '''It used to copy.'''",
        "# unlike the earlier version\nx = 1",
        "class A:\n    '''No longer pickled.'''",
        "x = 1  # previously a list",
        "# this is what we used\n# to do\nx = 1",
        "async def f():\n    '''Stop\n    7 made it faster.'''",
    ],
    ids=range(8),
)
def test_the_check_catches_each_kind_of_history(source):
    assert history_lines(source)


def test_the_check_leaves_present_tense_and_code_alone():
    source = (
        '"""Stops at the first bad row; sessions = 3 is a variable."""\n'
        "sessions = 3  # the reader stops at 3 bytes, as the format asks\n"
        "used = 'no longer than 8'  # a string, not a comment\n"
    )
    assert history_lines(source) == []
    assert module_docstring_lines(source) == 1
    assert module_docstring_lines("x = 1\n") == 0
