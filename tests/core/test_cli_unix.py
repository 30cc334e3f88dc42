"""The `recipes` command behaves as Unix tools do: a closed pipe ends it quietly, --help is instant."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from recipes.domains import DOMAINS

ROOT = Path(__file__).resolve().parents[2]
FIRST, SECOND = DOMAINS[0], DOMAINS[1]  # any domain serves; the registry's first ones, unnamed here

# argv after `python -m recipes`, with {fixtures} and {tmp} filled in: commands that print to stdout
PRINTING = [
    pytest.param(["demo", FIRST], id="demo"),
    pytest.param(["check", FIRST, "{fixtures}/" + FIRST, "--json", "--workers", "1"], id="check-json"),
    pytest.param(["copy", SECOND, "{tmp}/project"], id="copy"),
]


@pytest.mark.parametrize("argv", PRINTING)
def test_a_reader_that_closes_the_pipe_ends_the_command_quietly_with_exit_0(argv, fixtures, tmp_path):
    # `recipes ... | head -0`: the reader is gone before the first line; -u writes each print at once
    argv = [a.format(fixtures=fixtures, tmp=tmp_path) for a in argv]
    command = subprocess.Popen([sys.executable, "-u", "-m", "recipes", *argv], cwd=tmp_path,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env={**os.environ, "PYTHONPATH": str(ROOT)})
    command.stdout.close()
    _, err = command.communicate(timeout=300)
    assert (command.returncode, err.decode()) == (0, "")


def test_a_closed_pipe_at_the_exit_flush_is_quiet_too(tmp_path):
    # without -u the output waits in Python's buffer until the end: the flush in main() meets the pipe
    command = subprocess.Popen([sys.executable, "-m", "recipes", "copy", SECOND, str(tmp_path / "project")],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path,
                               env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": ""})
    command.stdout.close()
    _, err = command.communicate(timeout=120)
    assert (command.returncode, err.decode()) == (0, "")
    assert (tmp_path / "project" / SECOND / "__init__.py").is_file()  # the work was done all the same


HELP_PROBE = r"""
import re, sys
from pathlib import Path
from recipes.__main__ import main
try:
    main(sys.argv[1:])
except SystemExit as exit:
    assert exit.code == 0, exit.code
heavy = sorted(name for name in ("torch", "torchvision", "numpy", "PIL", "tokenizers") if name in sys.modules)
# VmHWM: this process image's peak resident memory (ru_maxrss would carry the forking parent's)
peak = int(re.search(r"VmHWM:\s+(\d+) kB", Path("/proc/self/status").read_text()).group(1))
print(heavy, peak // 1024, file=sys.stderr)
"""


@pytest.mark.parametrize("command", ["", "demo", "bench", "check", "show", "copy"],
                         ids=["top", "demo", "bench", "check", "show", "copy"])
def test_help_imports_no_torch_and_stays_under_100_mb(command):
    if not Path("/proc/self/status").is_file():
        pytest.skip("reads the peak memory from Linux's /proc")
    # was 655 MB and ~2 s (torch imported before parsing); now ~15 MB and the interpreter's start-up
    argv = [command, "--help"] if command else ["--help"]
    done = subprocess.run([sys.executable, "-c", HELP_PROBE, *argv], capture_output=True, text=True, check=True,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
    heavy, megabytes = done.stderr.rsplit(" ", 1)
    assert "usage: recipes" in done.stdout
    assert heavy == "[]" and int(megabytes) < 100, done.stderr
