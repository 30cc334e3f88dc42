"""Elastic resume under torchrun (gloo): a mixture's text loader saved mid-epoch on 2 ranks resumes
on 3, and on 3 resumes on 2, saved with 0 and with 2 workers, each resumed with 0 and with 2.

The single-process run is the global batch order (it does not depend on the world size): the
saving ranks took its first batches round-robin; the resumed ranks deal the rest of the epoch
round-robin, each the same number of steps, losing at most one partial round, seeing no draw
twice; the next epoch is the usual round-robin share. The mixture's shares are exact.
"""

from collections import Counter

import pytest

from tests.core import elastic
from tests.harness import torchrun

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def config(fixtures, tmp_path_factory):
    return elastic.build(fixtures, tmp_path_factory.mktemp("elastic"))


@pytest.fixture(scope="module")
def single(config):
    return elastic.report({**config, "phase": "single"})


def test_the_single_process_epoch_draws_the_exact_shares(config, single):
    for workers in elastic.WORKERS:
        epochs = single[f"workers{workers}"]["epochs"]
        assert epochs == single["workers0"]["epochs"]  # batches do not depend on the worker count
        for epoch in epochs:
            draws = [index for batch in epoch for index in batch]
            assert Counter("small" if i < 13 else "big" for i in draws) == {"small": 99, "big": 49}


@pytest.mark.parametrize("saved, resumed", [(2, 3), (3, 2)], ids=["2-to-3", "3-to-2"])
def test_a_state_saved_on_one_world_size_resumes_on_another(config, single, saved, resumed, tmp_path):
    steps = config["steps"]
    saves = torchrun(elastic.__name__, saved, tmp_path / "save", {**config, "phase": "save"})
    states = {key: saves[-1][key]["state"] for key in saves[0] if key.startswith("workers")}  # any rank's
    loads = torchrun(elastic.__name__, resumed, tmp_path / "load", {**config, "phase": "load", "states": states})
    for key in states:
        everyone, following = single[key]["epochs"]
        for rank, report in enumerate(saves):
            assert report[key]["taken"] == everyone[rank : steps * saved : saved]
        rest = everyone[steps * saved :]
        per_rank = len(rest) // resumed
        assert len(rest) - per_rank * resumed < resumed  # at most one partial round is lost
        for resumed_workers in ("to0", "to2"):
            for rank, report in enumerate(loads):
                run = report[key][resumed_workers]
                assert len(run["rest"]) == per_rank  # every rank runs the same number of steps
                assert run["rest"] == rest[rank : per_rank * resumed : resumed]
                assert run["next"] == following[rank : len(following) // resumed * resumed : resumed]
            # so the epoch's batches 0 .. steps*saved + per_rank*resumed - 1 were each run once, by one
            # rank, and only the last len(rest) % resumed were left out
            ran = sum(len(r[key]["taken"]) for r in saves) + sum(len(r[key][resumed_workers]["rest"]) for r in loads)
            assert ran == len(everyone) - (len(rest) - per_rank * resumed)
