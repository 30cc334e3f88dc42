"""video_loader on 2 and 3 real gloo ranks (torchrun) over 38 clips of 19 videos: no world size divides it.

Each rank's batches are compared with a single-process run of the same code (tests/video/ranks.py):
training ranks get exactly their round-robin share of the single-process batches, bit for bit
(random clips and crops included), equal in number, disjoint, reshuffled per epoch; evaluation ranks
give every clip exactly once.
"""

import pytest

from tests.harness import check_eval_ranks, check_seeds_agree, check_train_ranks, rank_fixtures
from tests.video import ranks

pytestmark = pytest.mark.slow
config, single, launched = rank_fixtures(ranks)


def test_training_ranks_run_their_round_robin_share_of_the_single_process_batches(launched, single):
    check_train_ranks([report["train"] for report in launched], single["train"])


def test_evaluation_ranks_give_every_clip_exactly_once_as_one_process_does(launched, single):
    assert [sample["id"] for batch in single["eval"] for sample in batch] == list(range(38))
    check_eval_ranks([report["eval"] for report in launched], single["eval"])


def test_ranks_agree_on_the_seed_drawn_without_one(launched):
    check_seeds_agree(launched)
