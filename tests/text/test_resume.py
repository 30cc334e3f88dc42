"""text_loader(stateful=True): exact resume at every stop with 0 or 2 workers, and seeded batches.

torchdata's own recipe (test_state_dict.py), via tests.harness.check_resume: interrupt after 0, 1
or k batches, at the end of an epoch or inside the next one, or twice; a fresh loader given the
state yields exactly the padded batches the interrupted one still had (length-grouped, with the
epoch's fresh sort noise).
"""

import pytest

from recipes.text import TokenizedTextDataset, text_loader
from tests.harness import assert_same_batches, digest, resume_suite

# 120 labelled lines, batch 8: 15 batches an epoch
resume_reference, test_resumed_loader_yields_exactly_the_batches_still_to_come = resume_suite(15)


@pytest.fixture(scope="module")
def corpus(fixtures):
    return TokenizedTextDataset(fixtures / "text" / "labeled.jsonl", fixtures / "text" / "tokenizer.json", label_field="label")


def _make(corpus, workers, seed=3):
    return text_loader(corpus, 8, device="cpu", seed=seed, stateful=True, num_workers=workers)


@pytest.fixture(scope="module")
def make_loader(corpus):
    return lambda workers: _make(corpus, workers)


def test_same_seed_gives_bit_identical_epochs_with_2_workers_and_another_seed_does_not(corpus, resume_reference):
    loader = _make(corpus, 2)
    expected = [batch for epoch in resume_reference for batch in epoch]
    assert_same_batches([batch for _ in range(3) for batch in loader], expected)
    other = list(_make(corpus, 0, seed=4))
    assert [digest(b) for b in other] != [digest(b) for b in resume_reference[0]]
    assert [b["index"].tolist() for b in other] != [b["index"].tolist() for b in resume_reference[0]]
