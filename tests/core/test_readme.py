"""The README's code blocks run as written, from the repository root, on the fixtures."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), flags=re.S)


def test_readme_has_an_example_for_each_recipe_folder():
    blocks = _blocks()
    packages = sorted(p.parent.name for p in (ROOT / "recipes").glob("*/__init__.py") if p.parent.name not in ("core", "cli"))
    for package in packages:
        assert any(f"from recipes.{package} import" in block for block in blocks), package


def _suite_ignores() -> list[str]:
    """pyproject's ignores as ``-W`` options: an example meets only the third-party warnings the suite
    ignores (each entry is literal text, which ``-W`` and pytest's regular expressions read alike)."""
    import tomllib

    filters = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]["ini_options"]
    return [option for entry in filters["filterwarnings"] if entry.startswith("ignore:") for option in ("-W", entry)]


# Runs each block as `python -W error -c BLOCK` would, in a fork of one interpreter that has imported
# only torch and torchvision (with -W error too): a fresh process and a fresh __main__ per block, without
# paying their import (~4 s of CPU) once per block. Writes each block's exit status and stderr.
FORKING_RUNNER = """
import json, os, sys, types
import torch, torchvision

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


@pytest.mark.slow
def test_every_readme_example_runs_without_a_warning(tmp_path):
    if not (ROOT / "fixtures").is_dir():
        pytest.skip("the examples use the repository's fixtures/")
    blocks = _blocks()
    runner = subprocess.run(
        [sys.executable, "-W", "error", *_suite_ignores(), "-c", FORKING_RUNNER, json.dumps(blocks), str(tmp_path)],
        cwd=ROOT, check=False,
        capture_output=True, text=True, timeout=300 * len(blocks), env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert runner.returncode == 0, runner.stderr[-3000:]
    failures = []
    for number, block in enumerate(blocks):
        status, stderr = ((tmp_path / f"{number}.{kind}").read_text() for kind in ("status", "stderr"))
        if status != "0" or "Warning" in stderr:
            failures.append(f"block {number} (exit status {status}):\n{block}\n{stderr[-1500:]}")
    assert not failures, "\n\n".join(failures)


def test_every_install_line_installs_this_project_or_a_named_dependency():
    # "recipes" on the package index is another project: an extra is installed from the clone
    # (".[parquet]") or by naming the dependency itself, never as "recipes[...]".
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = set(project["optional-dependencies"])
    texts = [ROOT / "README.md", ROOT / "benchmarks" / "README.md", *sorted((ROOT / "recipes").rglob("*.py"))]
    for path in texts:
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"\brecipes\[", text), f"{path}: installs 'recipes[...]' from the index"
        for extra in re.findall(r"""pip install (?:-e )?["']?\.\[([\w,-]+)\]""", text):
            assert set(extra.split(",")) <= extras, f"{path}: no extra {extra!r} in pyproject.toml"
    assert project["name"] != "recipes"


def _needs_table(text: str) -> dict[str, dict[str, str]]:
    """The README's table of what each copy imports: folder -> {package: "module, module"}."""
    section = re.search(r"## Copy a recipe(.*?)\n## ", text, flags=re.S).group(1)
    rows = re.findall(r"^\| `(\w+)/` \| (.*) \|$", section, flags=re.M)
    return {folder: dict(re.findall(r"`([\w.]+)`: ([\w, ]+)", needs)) for folder, needs in rows}


@pytest.mark.slow
def test_the_copy_commands_run_as_written_and_every_copy_imports(tmp_path):
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    (commands,) = re.findall(r"## Copy a recipe.*?```bash\n(.*?)```", text, flags=re.S)
    clone = tmp_path / "clone"  # a fresh clone's root, as the README's commands expect
    clone.mkdir()
    (clone / "recipes").symlink_to(ROOT / "recipes", target_is_directory=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout's package, as if installed
    done = subprocess.run(["bash", "-e", "-c", commands], cwd=clone, capture_output=True, text=True, timeout=300,
                          env=env)
    assert done.returncode == 0, done.stderr
    # what the commands printed: "<domain>/ (...) -> my_project/<domain>", then "it needs <package>: <modules>"
    printed: dict[str, dict[str, str]] = {}
    for line in done.stdout.splitlines():
        if head := re.match(r"(\w+)/ \(\d+ files, [\d,]+ lines\) -> ", line):
            folder = head.group(1)
            printed[folder] = {}
        elif needs := re.match(r"it needs ([\w.]+): (.*)$", line):
            printed[folder][needs.group(1)] = needs.group(2)
    assert printed == _needs_table(text)
    assert sorted(p.name for p in clone.iterdir()) == ["recipes"]  # nothing written inside the clone
    project = tmp_path / "my_project"  # ../my_project: beside the clone
    packages = sorted(p.parent.name for p in (ROOT / "recipes").glob("*/__init__.py")
                      if p.parent.name not in ("core", "cli"))
    assert sorted(printed) == packages and sorted(p.name for p in project.iterdir()) == packages
    modules = [".".join(path.relative_to(project).with_suffix("").parts).removesuffix(".__init__")
               for path in sorted(project.rglob("*.py"))]
    script = ("import importlib, os\nfor name in {names!r}:\n"
              "    path = os.path.abspath(importlib.import_module(name).__file__)\n"
              "    assert path.startswith(os.getcwd() + os.sep), (name, path)")
    imported = subprocess.run(  # one interpreter: torch is imported once, not once a file
        [sys.executable, "-W", "error", "-c", script.format(names=modules)], cwd=project,
        capture_output=True, text=True, timeout=120, env=env,
    )
    assert imported.returncode == 0, imported.stderr[-1500:]
