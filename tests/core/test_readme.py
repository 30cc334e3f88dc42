"""The README's code blocks run as written, from a folder other than the repository root, on the fixtures;
so do the copy commands of docs/copying.md, and its table of what each copy imports matches what they print."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.core.blocks import python_blocks, run_blocks

ROOT = Path(__file__).resolve().parents[2]


def _blocks() -> list[str]:
    return python_blocks(ROOT / "README.md")


def test_readme_has_an_example_for_each_recipe_folder():
    blocks = _blocks()
    packages = sorted(p.parent.name for p in (ROOT / "recipes").glob("*/__init__.py") if p.parent.name not in ("core", "cli"))
    for package in packages:
        assert any(f"from recipes.{package} import" in block for block in blocks), package


def test_examples_find_the_fixtures_with_fixtures_dir_not_the_working_folder():
    # a path relative to the clone's root fails from any other folder, and in a pip-installed copy
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for block in python_blocks(path):
            assert not re.search(r"""["']fixtures/""", block), f"{path.name}: use recipes.fixtures.fixtures_dir()"


@pytest.mark.slow
def test_every_readme_example_runs_without_a_warning(tmp_path):
    failures = run_blocks({"README.md": _blocks()}, tmp_path)
    assert not failures, "\n\n".join(failures)


def test_every_install_line_installs_this_project_or_a_named_dependency():
    # "recipes" on the package index is another project: an extra is installed from the clone
    # (".[parquet]") or by naming the dependency itself, never as "recipes[...]".
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = set(project["optional-dependencies"])
    texts = [ROOT / "README.md", ROOT / "benchmarks" / "README.md", *sorted((ROOT / "docs").rglob("*.md")),
             *sorted((ROOT / "recipes").rglob("*.py"))]
    for path in texts:
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"\brecipes\[", text), f"{path}: installs 'recipes[...]' from the index"
        for extra in re.findall(r"""pip install (?:-e )?["']?\.\[([\w,-]+)\]""", text):
            assert set(extra.split(",")) <= extras, f"{path}: no extra {extra!r} in pyproject.toml"
    assert project["name"] != "recipes"


def test_the_test_extra_caps_boto3_where_the_installed_aiobotocore_caps_botocore():
    # the cap spares pip's resolver a search through every newer boto3 (pyproject.toml says why); once
    # aiobotocore moves, the cap moves with it, or pip installs an older aiobotocore to meet it
    import tomllib
    from importlib import metadata

    from packaging.requirements import Requirement

    pytest.importorskip("aiobotocore", reason='the test extra: pip install -e ".[test]"')
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    (boto3,) = [Requirement(line) for line in extra["test"] if Requirement(line).name == "boto3"]
    (botocore,) = [Requirement(line) for line in metadata.requires("aiobotocore")
                   if Requirement(line).name == "botocore"]
    caps = [{spec.version for spec in requirement.specifier if spec.operator == "<"}
            for requirement in (boto3, botocore)]
    assert caps[0] == caps[1], (str(boto3), str(botocore))


def _needs_table(text: str) -> dict[str, dict[str, str]]:
    """docs/copying.md's table of what each copy imports: folder -> {package: "module, module"}."""
    section = text
    rows = re.findall(r"^\| `(\w+)/` \| (.*) \|$", section, flags=re.M)
    return {folder: dict(re.findall(r"`([\w.]+)`: ([\w., ]+)", needs)) for folder, needs in rows}


@pytest.mark.slow
def test_the_copy_commands_run_as_written_and_every_copy_imports(tmp_path):
    text = (ROOT / "docs" / "copying.md").read_text(encoding="utf-8")
    (commands,) = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    clone = tmp_path / "clone"  # a fresh clone's root, as the commands expect
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
