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


def _other_lines(tmp_path, fixtures, count):
    """A .jsonl of ``count`` other labelled lines (the fixture's, reversed and repeated)."""
    lines = (fixtures / "text" / "labeled.jsonl").read_text().splitlines()[::-1]
    path = tmp_path / f"other-{count}.jsonl"
    path.write_text("\n".join((lines * (count // len(lines) + 1))[:count]) + "\n")
    return path


@pytest.mark.parametrize(
    ("source", "batch_size", "message"),
    [
        ("other-120", 8, r"saved with source=labeled.jsonl: 120 samples, lengths \w+, this loader has "
                         r"other-120.jsonl: 120 samples"),
        ("corpus", 8, r"saved with num_samples=120, this loader has 200"),
        ("other-40", 8, r"saved with num_samples=120, this loader has 40"),
        ("same", 12, r"saved with batch_size=8, this loader has 12"),
        ("same", 64, r"saved with batch_size=8, this loader has 64"),
    ],
)
def test_a_state_of_other_lines_or_another_batch_size_is_refused_when_loaded(corpus, fixtures, tmp_path, source,
                                                                             batch_size, message):
    loader = _make(corpus, 0)
    iterator = iter(loader)
    for _ in range(3):
        next(iterator)
    state = loader.state_dict()
    tokenizer = fixtures / "text" / "tokenizer.json"
    if source == "same":
        other = corpus
    elif source == "corpus":
        other = TokenizedTextDataset(fixtures / "text" / "corpus.txt", tokenizer)
    else:
        other = TokenizedTextDataset(_other_lines(tmp_path, fixtures, int(source.split("-")[1])), tokenizer,
                                     label_field="label")
    resumed = text_loader(other, batch_size, device="cpu", seed=3, stateful=True, num_workers=0)
    with pytest.raises(ValueError, match=r"ResumableLoader state: " + message):
        resumed.load_state_dict(state)
    served = [index for batch in resumed for index in batch["index"].tolist()]
    assert len(served) == len(other) - len(other) % batch_size  # a whole fresh epoch, as if never given
