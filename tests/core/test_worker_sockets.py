"""A temporary directory too deep for the workers' sockets is refused when the loader is built.

torch's workers send tensors through a Unix socket under TMPDIR; a path over 107 bytes makes the
worker's bind fail where the training process never hears of it, and the first batch never comes.
The oracle is torch itself: one byte below the limit a plain DataLoader delivers, at the limit it
times out.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch

from recipes.core.loading.loader import loader_kwargs
from recipes.core.workers.worker_sockets import MAX_SOCKET_PATH_BYTES, SOCKET_SUFFIX_BYTES

LONGEST = MAX_SOCKET_PATH_BYTES - SOCKET_SUFFIX_BYTES  # the deepest TMPDIR workers still work in

FIRST_BATCH = """
import sys, torch
from torch.utils.data import DataLoader
try:
    kwargs = {"num_workers": 1}
    if sys.argv[1] == "preset":
        from recipes.core.loading.loader import loader_kwargs
        kwargs = loader_kwargs("cpu", train=False, num_workers=1)
    kwargs["timeout"] = int(sys.argv[2])
    print(next(iter(DataLoader(list(range(4)), batch_size=4, **kwargs))).tolist())
except RuntimeError as error:
    print(type(error).__name__, str(error).splitlines()[0][:200])
"""


def deep_dir(root: Path, length: int) -> Path:
    """A directory under ``root`` whose path is ``length`` bytes long."""
    path = root / ("d" * (length - len(os.fsencode(root)) - 1))
    path.mkdir()
    assert len(os.fsencode(path)) == length
    return path


def first_batch(temp: Path, how: str, timeout: int = 60) -> str:
    """The first batch of a one-worker loader with ``temp`` as TMPDIR, or the error it raised."""
    env = {**os.environ, "TMPDIR": str(temp)}
    result = subprocess.run([sys.executable, "-c", FIRST_BATCH, how, str(timeout)], env=env, capture_output=True, text=True,
                            timeout=120, cwd=Path(__file__).parents[2])
    return result.stdout.strip()


@pytest.fixture
def short_root():
    with tempfile.TemporaryDirectory(dir="/tmp", prefix="s") as root:
        yield Path(root)


pytestmark = pytest.mark.skipif(
    sys.platform != "linux" or torch.multiprocessing.get_sharing_strategy() != "file_descriptor",
    reason="the socket path limit matters for the file_descriptor sharing strategy, Linux's default",
)


def test_a_too_deep_temporary_directory_is_named_at_build(short_root, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(deep_dir(short_root, LONGEST + 1)))
    with pytest.raises(RuntimeError, match=r"temporary directory .* too long .*TMPDIR=/tmp"):
        loader_kwargs("cpu", train=True, num_workers=2)
    assert loader_kwargs("cpu", train=True, num_workers=0)["num_workers"] == 0  # no worker, no socket


@pytest.mark.slow
def test_the_limit_is_torchs_own(short_root):
    assert first_batch(deep_dir(short_root, LONGEST), "plain") == "[0, 1, 2, 3]"
    assert first_batch(deep_dir(short_root, LONGEST - 1), "preset") == "[0, 1, 2, 3]"
    too_deep = deep_dir(short_root, LONGEST + 1)
    assert first_batch(too_deep, "plain", timeout=4).startswith("RuntimeError DataLoader timed out")
    assert first_batch(too_deep, "preset").startswith("RuntimeError the temporary directory")
