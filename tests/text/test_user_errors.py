"""A failing collate_fn names the batch's dataset indices and their file lines, in the main process or a worker."""

import pytest

from recipes.core.contracts.errors import SampleError
from recipes.text import TokenizedTextDataset, text_collate, text_loader
from tests.loader_errors import loader_error

TARGET = 5  # a batch holding this sample fails


class FailOnSample:
    """text_collate, except for a batch holding sample TARGET: what a user's bug looks like."""

    def __call__(self, batch):
        if any(item["index"] == TARGET for item in batch):
            raise IndexError("list index out of range")
        return text_collate(batch)


def oracle_lines(path) -> list[int]:
    """The file line of every sample: its non-blank lines, counted from 1."""
    return [number for number, line in enumerate(path.read_text().splitlines(), start=1) if line.strip()]


@pytest.mark.parametrize("workers", [0, 2])
def test_a_failing_collate_names_the_indices_and_lines_of_the_batch(fixtures, tokenizer, workers):
    path = fixtures / "text" / "labeled.jsonl"
    dataset = TokenizedTextDataset(path, tokenizer, label_field="label")
    loader = text_loader(dataset, 4, train=False, device="cpu", num_workers=workers, collate_fn=FailOnSample())
    error = loader_error(loader, SampleError)
    lines = oracle_lines(path)
    where = ", ".join(f"{path} line {lines[index]}" for index in (4, 5, 6, 7))
    expected = (
        f"the batch of dataset indices [4, 5, 6, 7] ({where}): "
        "the collate_fn raised IndexError: list index out of range"
    )
    assert expected in str(error)
    if workers == 0:
        assert isinstance(error.__cause__, IndexError)
