"""text_loader and StreamingTextDataset on 2 and 3 real gloo ranks (torchrun), 103 lines.

Each rank's batches are compared with a single-process run of the same code (tests/text/ranks.py):
training ranks (fixed batch size or token budget) get exactly their round-robin share of the
single-process batches, equal in number, disjoint, reshuffled per epoch; evaluation ranks give
every line exactly once; the stream, with 2 loader workers per rank, reads every line exactly once
per epoch across (rank, worker), with a new shuffle each epoch.
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
from tests.text import ranks

pytestmark = pytest.mark.slow
config, single, launched = rank_fixtures(ranks)


@pytest.mark.parametrize("name", ["train", "budget"], ids=["batch-size", "token-budget"])
def test_training_ranks_run_their_round_robin_share_of_the_single_process_batches(launched, single, name):
    check_train_ranks([report[name] for report in launched], single[name])


def test_evaluation_ranks_give_every_line_exactly_once_as_one_process_does(launched, single):
    assert [sample["id"] for batch in single["eval"] for sample in batch] == list(range(103))
    check_eval_ranks([report["eval"] for report in launched], single["eval"])


def test_stream_reads_every_line_once_per_epoch_across_ranks_and_workers(launched, single):
    assert len([s for batch in single["stream"][0] for s in batch]) == 103
    check_stream_ranks([report["stream"] for report in launched], single["stream"])


def test_training_on_the_stream_runs_equal_steps_on_every_rank_with_no_line_on_two(launched):
    # shares equal by line count: EqualSteps stops every rank at one step, leaving out fewer than
    # ranks x workers x batch size lines an epoch (each worker's last partial batch, a step at most)
    ranks = len(launched)
    check_stream_train_ranks([report["stream_train"] for report in launched], samples=103, fewer_than=ranks * 2 * 4)


def test_a_mixture_of_streams_trains_on_every_line_of_each_source_within_a_few_epochs(launched):
    # each reader draws an equal share of the mixture, and each source's passes run on from one
    # epoch to the next: what a cut epoch leaves out of a source comes in its next pass
    world, passes = len(launched), [report["mixed_train"] for report in launched]
    for epoch in range(ranks.MIXED_EPOCHS):
        assert len({len(rank[epoch]) for rank in passes}) == 1, f"epoch {epoch}: unequal steps"
        drawn = sum(len(batch) for rank in passes for batch in rank[epoch])
        assert ranks.MIXED_PER_EPOCH - drawn < world * 2 * 4, f"epoch {epoch}: {drawn} of {ranks.MIXED_PER_EPOCH} draws"
    seen = {tuple(s["id"]) for rank in passes for epoch in rank for batch in epoch for s in batch}
    assert [len({line for source, line in seen if source == k}) for k in (0, 1)] == [60, 43]


def test_ranks_agree_on_the_seeds_drawn_without_one(launched):
    check_seeds_agree(launched)
