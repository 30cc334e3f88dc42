"""multimodal_loader and ImageTextShards on 2 and 3 real gloo ranks (torchrun), 41 images.

Each rank's batches are compared with a single-process run of the same code
(tests/multimodal/ranks.py): training ranks get exactly their round-robin share of the
single-process batches, bit for bit (crops and random caption draws included), equal in number,
disjoint, reshuffled per epoch; evaluation ranks give every pair exactly once; the tar shards,
with 2 loader workers per rank, give every sample exactly once per epoch across (rank, worker),
with the content a single process gives and a new order each epoch.
"""

import pytest

from tests.harness import (
    check_eval_ranks,
    check_seeds_agree,
    check_stream_ranks,
    check_stream_train_ranks,
    check_train_ranks,
    rank_fixtures,
)
from tests.multimodal import ranks

pytestmark = pytest.mark.slow
config, single, launched = rank_fixtures(ranks)


def test_training_ranks_run_their_round_robin_share_of_the_single_process_batches(launched, single):
    check_train_ranks([report["train"] for report in launched], single["train"])


def test_evaluation_ranks_give_every_pair_exactly_once_as_one_process_does(launched, single):
    assert [sample["id"] for batch in single["eval"] for sample in batch] == list(range(41))
    check_eval_ranks([report["eval"] for report in launched], single["eval"])


def test_shards_give_every_sample_once_per_epoch_across_ranks_and_workers(launched, single):
    assert len([s for batch in single["shards"][0] for s in batch]) == 41
    check_stream_ranks([report["shards"] for report in launched], single["shards"])


def test_training_on_the_shards_runs_equal_steps_on_every_rank_with_no_sample_on_two(launched):
    # shares equal by count, each a step or so apart; EqualSteps stops them all at one step
    check_stream_train_ranks([report["shards_train"] for report in launched])


def test_shards_of_unequal_sizes_are_shared_by_count_so_training_loses_less_than_a_batch_per_reader(launched, single):
    # 5 shards of 17, 2, 1, 12 and 9 samples; 2 workers a rank, so 3 ranks are more readers than shards
    assert len({s["id"] for batch in single["unequal"][0] for s in batch}) == 41
    check_stream_ranks([report["unequal"] for report in launched], single["unequal"])
    readers_x_batch = len(launched) * 2 * 2
    check_stream_train_ranks([report["unequal_train"] for report in launched], samples=41, fewer_than=readers_x_batch)


def test_ranks_agree_on_the_seeds_drawn_without_one(launched):
    check_seeds_agree(launched)
