"""Runs the python blocks of the README and of docs/*.md as written, from a folder other than the
repository root: they find the fixtures with ``recipes.fixtures.fixtures_dir()``, as a user's script does."""

import importlib.util
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def python_blocks(path: Path) -> list[str]:
    """The fenced ```python blocks of a Markdown file, in order."""
    return re.findall(r"```python\n(.*?)```", path.read_text(encoding="utf-8"), flags=re.S)


def _installed(block: str) -> bool:
    """Whether every package ``block`` imports is installed: CI's floors pass leaves out test tools whose own
    floors are above the library's (.ci/floors.py), so the examples that use them are not run there."""
    imported = re.findall(r"^\s*(?:from|import) ([A-Za-z_]\w*)", block, flags=re.M)
    return all(importlib.util.find_spec(name) is not None for name in imported)


def _suite_ignores() -> list[str]:
    """pyproject's ignores as ``-W`` options: an example meets only the third-party warnings the suite
    ignores (each entry is literal text, which ``-W`` and pytest's regular expressions read alike)."""
    filters = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]["ini_options"]
    return [option for entry in filters["filterwarnings"] if entry.startswith("ignore:") for option in ("-W", entry)]


# Runs each block as `python -W error -c BLOCK` would, in a fork of one interpreter that has imported
# only torch and torchvision (with -W error too): a fresh process and a fresh __main__ per block, without
# paying their import (~4 s of CPU) once per block. Writes each block's exit status and stderr.
FORKING_RUNNER = """
import json, os, sys, types, warnings
import torch, torchvision

# Ray before 2.56 leaves the log files and the child processes of its local cluster to the garbage
# collector: ResourceWarnings a user never sees (Python hides them by default), caused by Ray
warnings.filterwarnings("ignore", r"unclosed file <_io\\.TextIOWrapper name='(/tmp/ray/|/dev/null')", ResourceWarning)
warnings.filterwarnings("ignore", r"subprocess \\d+ is still running", ResourceWarning)

blocks, out = json.loads(sys.argv[1]), sys.argv[2]
for number, block in enumerate(blocks):
    sys.stdout.flush(), sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.dup2(os.open(os.path.join(out, f"{number}.stderr"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 2)
        sys.argv = ["-c"]
        sys.modules["__main__"] = module = types.ModuleType("__main__")
        exec(compile(block, "<string>", "exec"), module.__dict__)
        sys.exit(0)
    _, status = os.waitpid(pid, 0)
    with open(os.path.join(out, f"{number}.status"), "w") as file:
        file.write(str(os.waitstatus_to_exitcode(status)))
"""


def run_blocks(pages: dict[str, list[str]], out: Path) -> list[str]:
    """Run every block of ``pages`` (a page's name -> its blocks) from an empty folder in ``out``, each in
    a fresh forked process with warnings as errors; one message per block that failed or warned."""
    named = [(page, number, block) for page, blocks in pages.items() for number, block in enumerate(blocks)
             if _installed(block)]
    blocks = [block for _, _, block in named]
    elsewhere = out / "elsewhere"  # not the repository root: a relative "fixtures/..." fails here
    elsewhere.mkdir()
    runner = subprocess.run(
        [sys.executable, "-W", "error", *_suite_ignores(), "-c", FORKING_RUNNER, json.dumps(blocks), str(out)],
        cwd=elsewhere, check=False,
        capture_output=True, text=True, timeout=300 * len(blocks), env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert runner.returncode == 0, runner.stderr[-3000:]
    failures = []
    for index, (page, number, block) in enumerate(named):
        status, stderr = ((out / f"{index}.{kind}").read_text() for kind in ("status", "stderr"))
        if status != "0" or "Warning" in stderr:
            failures.append(f"{page}, block {number} (exit status {status}):\n{block}\n{stderr[-1500:]}")
    return failures
