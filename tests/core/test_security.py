"""A scan of the package source for the classic unsafe calls, and a bomb checked by peak memory."""

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "recipes"


def _calls(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            yield node, ast.unparse(node.func)


def _keyword(call: ast.Call, name: str):
    for keyword in call.keywords:
        if keyword.arg == name:
            return ast.unparse(keyword.value)
    return None


def unsafe_calls(source: str) -> list[str]:
    """Describe every unsafe call in ``source``: unpickling, pickled numpy, unfiltered extraction."""
    problems = []
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [alias.name for alias in node.names] + [getattr(node, "module", None) or ""]
            if any(name.split(".")[0] in ("pickle", "cPickle", "dill", "marshal", "shelve") for name in names):
                problems.append(f"line {node.lineno}: imports an unpickler")
    for call, name in _calls(tree):
        where = f"line {call.lineno}: {name}"
        if name.endswith("torch.load") and _keyword(call, "weights_only") != "True":
            problems.append(f"{where} without weights_only=True")
        if name in ("np.load", "numpy.load") and _keyword(call, "allow_pickle") not in (None, "False"):
            problems.append(f"{where} with allow_pickle")
        if name.endswith((".extractall", ".extract", "unpack_archive")) and _keyword(call, "filter") is None:
            problems.append(f"{where} without a filter")
        if name in ("eval", "exec") or name.endswith(("yaml.load", "yaml.unsafe_load", "tempfile.mktemp")):
            problems.append(where)
        if name in ("os.system", "os.popen") or _keyword(call, "shell") == "True":
            problems.append(f"{where}: runs a shell")
    return problems


def test_the_scanner_catches_each_unsafe_pattern():
    bad = (
        "import pickle\nimport torch, numpy as np, tarfile\n"
        "torch.load(f)\ntorch.load(f, weights_only=False)\nnp.load(f, allow_pickle=True)\n"
        "tarfile.open(f).extractall(d)\neval(s)\n"
        "shutil.unpack_archive(f, d)\nyaml.unsafe_load(s)\nos.system(c)\nsubprocess.run(c, shell=True)\n"
        "tempfile.mktemp()\n"
    )
    assert len(unsafe_calls(bad)) == 11
    good = "import torch, numpy as np\ntorch.load(f, weights_only=True)\nnp.load(f, allow_pickle=False)\nnp.load(f)\n"
    assert unsafe_calls(good) == []


def test_package_source_has_no_unsafe_calls():
    # one test over every file: per-file ids would name the domains (see tests/conftest.py)
    problems = {
        str(path.relative_to(PACKAGE.parent)): found
        for path in sorted(PACKAGE.rglob("*.py"))
        if (found := unsafe_calls(path.read_text(encoding="utf-8")))
    }
    assert problems == {}


BOMB_PROBE = """
import resource, sys
from recipes.core.contracts.errors import DataError
from recipes.core.pixels.images import read_image
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    read_image(sys.argv[1])
except DataError as error:
    print("refused:", error)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print("peak growth MB:", (after - before) / 1024)
"""


def test_a_bomb_is_refused_before_its_pixels_are_allocated(fixtures):
    bomb = fixtures / "hostile" / "images" / "bomb.png"
    result = subprocess.run(
        [sys.executable, "-c", BOMB_PROBE, str(bomb)], capture_output=True, text=True, timeout=120, check=False
    )
    assert "refused:" in result.stdout and "bomb" in result.stdout, result.stdout + result.stderr
    growth = float(result.stdout.split("peak growth MB:")[1])
    print(f"peak RSS growth while refusing a 16000x16000 bomb: {growth:.1f} MB")
    assert growth < 32  # decoding it would take 256 MB (gray) or 768 MB (RGB)
