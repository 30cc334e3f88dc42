"""Write the loader states that tests/core/test_saved_states.py resumes: python tests/states/make_states.py

Run by hand, not by pytest, and only to add a case: the committed files are states an earlier
commit saved, which later code must still load. For each case of the test it builds the loader
(stateful, no workers, CPU, a fixed seed), runs epoch 0, takes ``taken`` batches of epoch 1,
saves ``state_dict()`` and the summaries of the batches still to come in that pass:

    tests/states/<commit>/<case>.pt = {"state": ..., "rest": [...], "built_at": <commit sha>}

(the shards case also keeps ``"shards"``, a digest of the shards it read). Only plain Python and
torch objects go in, so ``torch.load(weights_only=True)`` reads them; the script checks that.
"""

import subprocess
import sys
import tempfile
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))  # the checkout's recipes/ and tests/, even when not installed

from recipes.fixtures import fixtures_dir  # noqa: E402
from tests.core.test_saved_states import CASES, shards_digest  # noqa: E402


def commit() -> str:
    """HEAD's sha, marked ``-dirty`` when recipes/ differs from it."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()

    return git("rev-parse", "HEAD") + ("-dirty" if git("status", "--porcelain", "--", "recipes") else "")


def save(name: str, built_at: str) -> Path:
    case = CASES[name]
    with tempfile.TemporaryDirectory() as scratch:
        loader = case.build(fixtures_dir(), Path(scratch))
        assert list(loader), f"{name}: epoch 0 is empty"
        batches = iter(loader)  # epoch 1: its state holds a non-zero epoch
        for _ in range(case.taken):
            next(batches)
        saved = {"state": loader.state_dict(), "rest": [case.summary(batch) for batch in batches], "built_at": built_at}
        if name == "shards":
            saved["shards"] = shards_digest(Path(scratch))
    assert saved["rest"], f"{name}: taking {case.taken} batches left none to come"
    path = HERE / built_at[:7] / f"{name}.pt"
    path.parent.mkdir(exist_ok=True)
    torch.save(saved, path)
    assert torch.load(path, weights_only=True) == saved, f"{name}: the state does not round-trip"
    return path


if __name__ == "__main__":
    built_at = commit()
    for name in sys.argv[1:] or CASES:
        path = save(name, built_at)
        print(f"{path.relative_to(ROOT)}: {path.stat().st_size} bytes")
