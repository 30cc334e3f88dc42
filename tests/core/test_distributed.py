"""Rank splitting with real processes: torchrun + gloo on CPU, on a size no world size divides."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from recipes.core.loading.loader import build_loader
from tests.core.toy import NoisyRange, collate

ROOT = Path(__file__).resolve().parents[2]
SIZE = 103  # prime: 2 and 3 ranks both leave a remainder


def _launch(world_size: int, out: Path) -> list[dict]:
    command = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={world_size}",
        str(ROOT / "tests" / "core" / "dist_sampler_worker.py"), str(out), str(SIZE),
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(world_size)]


@pytest.fixture(scope="module", params=[2, 3], ids=["two-ranks", "three-ranks"])
def ranks(request, tmp_path_factory):
    return _launch(request.param, tmp_path_factory.mktemp(f"ranks{request.param}"))


def test_ranks_agree_on_a_broadcast_seed(ranks):
    for name in ranks[0]["samplers"]:
        assert len({report["samplers"][name]["seed"] for report in ranks}) == 1


@pytest.mark.parametrize("name", ["plain-train", "grouped-train", "sorted-train", "budget-train"])
def test_training_ranks_run_equal_steps_on_disjoint_samples_and_reshuffle(name, ranks):
    for epoch in range(2):
        batches = [report["samplers"][name]["epochs"][epoch] for report in ranks]
        assert len({len(b) for b in batches}) == 1, "ranks must run the same number of steps"
        samples = [i for rank_batches in batches for batch in rank_batches for i in batch]
        assert len(samples) == len(set(samples)), "a sample went to two ranks"
    first, second = (ranks[0]["samplers"][name]["epochs"][e] for e in (0, 1))
    assert first != second


@pytest.mark.parametrize("name", ["plain-eval", "budget-eval"])
def test_eval_ranks_see_every_sample_exactly_once(name, ranks):
    for epoch in range(2):
        samples = [i for report in ranks for batch in report["samplers"][name]["epochs"][epoch] for i in batch]
        assert samples == list(range(SIZE))


def test_rank_batches_are_exactly_the_single_process_batches_split(ranks):
    single = build_loader(NoisyRange(SIZE), collate, batch_size=4, train=True, device="cpu", seed=5, num_workers=0)
    expected = {tuple(b["index"].tolist()): b["noise"].tolist() for b in single}
    got = {tuple(b["index"]): b["noise"] for report in ranks for b in report["loader"]}
    per_rank = len(expected) // len(ranks)
    assert len(got) == per_rank * len(ranks)
    for key, noise in got.items():
        assert expected[key] == noise  # same samples, same augmentation, whatever the rank


@pytest.mark.parametrize("seed", ["5", "None"], ids=["seeded", "unseeded"])
def test_no_two_workers_of_any_rank_share_a_seed(seed, ranks):
    draws = [item for report in ranks for item in report["worker_draws"][seed]]
    assert len(draws) == 2 * len(ranks)
    for key in ("torch_seed", "torch", "random", "numpy"):
        assert len({item[key] for item in draws}) == len(draws), key


def test_each_rank_resumes_its_own_batches_from_its_own_state(ranks):
    for report in ranks:
        resume = report["resume"]
        assert resume["resumed"] == resume["continuation"]
        assert resume["taken"] + resume["resumed"] == [batch["index"] for batch in report["loader"]]
