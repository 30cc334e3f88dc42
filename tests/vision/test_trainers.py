"""The vision preset under Lightning's own DDP launcher and Accelerate under torchrun, two CPU
ranks: the batches plain torchrun gives, every image once an evaluation (tests/trainer_runs.py)."""

from __future__ import annotations

import pytest

from recipes.core import SeededBatchSampler
from tests.trainer_runs import launch
from tests.vision.trainer_loaders import BATCH, ROOT, NumberedImages

pytest.importorskip("lightning")
pytest.importorskip("accelerate")

WORLD, EPOCHS = 2, 2


@pytest.mark.slow
@pytest.mark.parametrize("trainer", ["lightning", "accelerate"])
def test_a_trainer_on_two_ranks_sees_what_torchrun_gives(tmp_path, trainer):
    size = len(NumberedImages(ROOT))
    reports = launch(trainer, tmp_path, {"run": trainer, "factory": "tests.vision.trainer_loaders:images",
                                         "epochs": EPOCHS, "workers": 0})
    for rank, report in enumerate(reports):
        oracle = SeededBatchSampler(size, BATCH, shuffle=True, drop_last=True, seed=0, rank=rank, world_size=WORLD)
        for epoch in range(EPOCHS):
            assert [step[1:] for step in report["steps"] if step[0] == epoch] == [
                batch.tolist() for batch in oracle.batches(epoch)]
    for epoch in range(EPOCHS):
        seen = [i for report in reports for step in report["steps"] if step[0] == epoch for i in step[1:]]
        assert len(seen) == len(set(seen)) == (size // BATCH // WORLD) * WORLD * BATCH
    firsts = [[step for step in reports[0]["steps"] if step[0] == epoch][0] for epoch in range(EPOCHS)]
    assert firsts[0][1:] != firsts[1][1:]  # a new order each epoch
    assert sorted(i for report in reports for i in report["evaluated"]) == sorted(list(range(size)) * EPOCHS)
