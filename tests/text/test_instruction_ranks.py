"""text_loader over an InstructionDataset on 2 and 3 real gloo ranks (torchrun), 36 conversations.

Each rank's batches are compared with a single-process run of the same code
(tests/text/instruction_ranks.py): training ranks get exactly their round-robin share of the
single-process batches (input ids and labels bit-identical), evaluation ranks give every
conversation exactly once.
"""

import pytest

from tests.harness import check_eval_ranks, check_train_ranks, rank_fixtures
from tests.text import instruction_ranks

pytestmark = pytest.mark.slow
config, single, launched = rank_fixtures(instruction_ranks)


def test_training_ranks_run_their_share_of_the_single_process_instruction_batches(launched, single):
    check_train_ranks([report["train"] for report in launched], single["train"])


def test_evaluation_ranks_give_every_conversation_exactly_once(launched, single):
    assert [sample["id"] for batch in single["eval"] for sample in batch] == list(range(36))
    check_eval_ranks([report["eval"] for report in launched], single["eval"])
