"""The built wheel runs the demo from any directory, without the repository's fixtures/."""

import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def short_tmp():
    folder = Path(tempfile.mkdtemp(prefix="recipes-wheel-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.slow
def test_wheel_install_runs_the_demo_outside_the_repository(tmp_path, short_tmp):
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp_path / "dist"), str(ROOT)],
        capture_output=True, text=True, timeout=300,
    )
    assert build.returncode == 0, build.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("dataloader_recipes-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "recipes/fixtures.py" in names and not any(n.startswith(("fixtures/", "tests/")) for n in names)

    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)  # a wheel is a zip of the installed tree
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # -S skips site-packages' .pth files, so an editable install of the repo cannot shadow the
    # wheel; the dependencies are found through PYTHONPATH instead.
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]),
        # short: a worker hands tensors over through a Unix socket in TMPDIR, and a socket path over 107
        # bytes (pytest-xdist's tmp_path can be) fails in the worker while the main process waits on
        "TMPDIR": str(short_tmp),
    }
    run = subprocess.run(
        # a hang prints every thread's stack (faulthandler) before the timeout, instead of a bare TimeoutExpired;
        # stdin is not the test runner's (pytest-xdist talks to its workers through theirs)
        [sys.executable, "-S", "-c", "import faulthandler; faulthandler.dump_traceback_later(300, exit=True); "
         "import recipes, sys; print(recipes.__file__); from recipes.__main__ import main; sys.exit(main(['demo']))"],
        cwd=elsewhere, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    assert run.stdout.splitlines()[0].startswith(str(site))
    assert "fixtures: " + str(short_tmp) in run.stdout
