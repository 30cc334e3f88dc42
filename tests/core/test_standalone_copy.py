"""`recipes copy DOMAIN DEST --standalone`: each domain's copy, with the modules of recipes it imports
vendored inside it, runs in a virtualenv where recipes cannot be imported: its demo loader gives the
installed package's batches, to the bit, and the tests it carries (recipes/<domain>/tests/) pass there."""

import contextlib
import io
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import torch

from recipes.__main__ import main
from recipes.domains import DOMAINS
from recipes.cli.vendoring import PACKAGE, needed_modules

RUN = """
import importlib, pkgutil, sys, torch
from pathlib import Path
assert importlib.util.find_spec("recipes") is None, "recipes is importable here"
batches = {}
for domain in DOMAINS:
    package = importlib.import_module(domain)
    for module in pkgutil.walk_packages(package.__path__, domain + "."):  # every file of the copy imports
        importlib.import_module(module.name)
    _, loader = importlib.import_module(domain + ".demo").build(Path(FIXTURES))
    batches[domain] = next(iter(loader))
torch.save(batches, OUT)
assert not [name for name in sys.modules if name.split(".")[0] == "recipes"]
"""


def venv_without_recipes(folder: Path) -> Path:
    """A virtualenv that sees this interpreter's packages (a .pth line adds site-packages to sys.path,
    whose own .pth files, the editable install's among them, are then not run) but not recipes."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    paths = dict.fromkeys(sysconfig.get_paths()[key] for key in ("purelib", "platlib"))
    (folder / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages" /
     "this-environment.pth").write_text("".join(f"{path}\n" for path in paths))
    return folder / "bin" / "python"


def flat(batch, path=""):
    """``(path, tensor or value)`` leaves of a nested batch, tv_tensors as plain tensors."""
    if isinstance(batch, dict):
        return [leaf for key in batch for leaf in flat(batch[key], f"{path}.{key}")]
    if isinstance(batch, (list, tuple)):
        return [leaf for i, item in enumerate(batch) for leaf in flat(item, f"{path}[{i}]")]
    return [(path, batch.as_subclass(torch.Tensor) if isinstance(batch, torch.Tensor) else batch)]


@pytest.mark.slow
def test_every_standalone_copy_runs_without_recipes_and_batches_as_the_package_does(tmp_path, fixtures):
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        for domain in DOMAINS:
            assert main(["copy", domain, str(tmp_path / "project"), "--standalone"]) == 0
    assert printed.getvalue().count("lines in all, recipes not needed") == len(DOMAINS)
    python = venv_without_recipes(tmp_path / "venv")
    env = {"PATH": "/usr/bin:/bin", "TOKENIZERS_PARALLELISM": "false"}
    script = f"DOMAINS, FIXTURES, OUT = {list(DOMAINS)!r}, {str(fixtures)!r}, {str(tmp_path / 'b.pt')!r}\n{RUN}"
    done = subprocess.run([str(python), "-c", script], cwd=tmp_path / "project", capture_output=True, text=True,
                          timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-4000:]
    carried = [f"{domain}/tests" for domain in DOMAINS if (tmp_path / "project" / domain / "tests").is_dir()]
    assert carried == [f"{domain}/tests" for domain in DOMAINS]  # every recipe carries its tests
    tested = subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:benchmark",
                             *carried], cwd=tmp_path / "project",
                            capture_output=True, text=True, timeout=300, env=env)
    assert tested.returncode == 0, tested.stdout[-4000:] + tested.stderr[-2000:]
    assert " passed" in tested.stdout and "skipped" not in tested.stdout, tested.stdout[-2000:]
    theirs = torch.load(tmp_path / "b.pt", weights_only=False)
    for domain in DOMAINS:
        _, loader = __import__(f"recipes.{domain}.demo", fromlist=["build"]).build(fixtures)
        ours = flat(next(iter(loader)))
        copied = flat(theirs[domain])
        assert [path for path, _ in copied] == [path for path, _ in ours], domain
        for (path, mine), (_, copy) in zip(ours, copied):
            same = torch.equal(mine, copy) if isinstance(mine, torch.Tensor) else mine == copy
            assert same, f"{domain}{path}"


def test_a_standalone_copy_vendors_only_what_its_domain_reaches():
    vision = set(needed_modules("vision", [p.read_text() for p in (PACKAGE / "vision").glob("*.py")]))
    assert "recipes.core.pixels.images" in vision and "recipes.core" in vision and "recipes" in vision
    assert not {m for m in vision if m.startswith(("recipes.core.tokens", "recipes.text", "recipes.detection"))}
