"""Errors from user code (transforms, collates) name the sample: recipes.core.contracts.errors."""

import pickle

import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from recipes.core.loading.device import to_device
from recipes.core.contracts.errors import (
    BatchSamples,
    DataError,
    NamedCollate,
    SampleError,
    UserCode,
    describe_batch,
    describe_sample,
)
from recipes.core.loading.mixing import MixedDataset
from recipes.core.workers.packing import PackedBatch
from recipes.core.sampling.seeding import SeededDataset
from tests.loader_errors import loader_error


class Lines(Dataset):
    """Ten samples, each described as a line of a file, as the recipes' datasets describe theirs."""

    def __init__(self, name: str = "rows.jsonl") -> None:
        self.name = name

    def __len__(self) -> int:
        return 10

    def __getitem__(self, index: int) -> dict:
        return {"value": torch.tensor([index]), "index": index}

    def describe(self, index: int) -> str:
        return f"{self.name} line {index + 1}"


def failing_collate(samples: list) -> dict:
    if any(sample["index"] == 6 for sample in samples):
        raise KeyError("no field 'mask'")
    return {"index": torch.tensor([sample["index"] for sample in samples])}


def test_user_code_names_the_sample_and_keeps_the_original_as_cause():
    original = ZeroDivisionError("division by zero")
    with pytest.raises(SampleError) as caught:
        with UserCode(lambda: describe_sample(Lines(), 4)):
            raise original
    expected = "dataset index 4 (rows.jsonl line 5): the transform raised ZeroDivisionError: division by zero"
    assert str(caught.value) == expected
    assert caught.value.__cause__ is original


def test_user_code_lets_bad_data_errors_through_unchanged():
    error = DataError("a.jpg: truncated")
    with pytest.raises(DataError) as caught:
        with UserCode("dataset index 0"):
            raise error
    assert caught.value is error


def test_sample_error_survives_the_rebuild_from_a_worker_message():
    # DataLoader's ExceptionWrapper rebuilds type(error)(text) in the main process, with no cause
    rebuilt = SampleError("Caught SampleError in DataLoader worker process 0.\nOriginal ... KeyError: 'x'")
    assert "KeyError: 'x'" in str(rebuilt) and isinstance(rebuilt, RuntimeError) and not isinstance(rebuilt, DataError)


def test_a_description_that_fails_still_names_the_index():
    class Broken(Lines):
        def describe(self, index: int) -> str:
            raise IndexError(index)

    assert describe_sample(Broken(), 3) == "dataset index 3"
    assert describe_sample(object(), 3) == "dataset index 3"


def test_batch_samples_pickle_as_a_plain_list_without_their_dataset():
    samples = BatchSamples([1, 2], [5, 7], Lines())
    restored = pickle.loads(pickle.dumps(samples))
    assert type(restored) is list and restored == [1, 2]


def test_a_collate_that_returns_its_samples_gives_a_batch_that_still_moves_and_packs():
    samples = BatchSamples([{"value": torch.ones(2)}], [3], Lines())
    moved = to_device(samples, "cpu")
    assert len(moved) == 1 and torch.equal(moved[0]["value"], torch.ones(2))
    packed = pickle.loads(pickle.dumps(PackedBatch(samples)))
    assert torch.equal(packed[0]["value"], torch.ones(2))


def test_a_batch_names_every_index_and_its_first_files():
    samples = BatchSamples(list(range(10)), list(range(10)), Lines())
    assert describe_batch(samples) == (
        "the batch of dataset indices [0, 1, 2, 3, 4, 5, 6, 7, 8, 9] (rows.jsonl line 1, rows.jsonl line 2, "
        "rows.jsonl line 3, rows.jsonl line 4, rows.jsonl line 5, rows.jsonl line 6, rows.jsonl line 7, "
        "rows.jsonl line 8 and 2 more)"
    )
    assert describe_batch([{"key": "a/1"}, {"key": "a/2"}]) == "a batch of 2 samples (key: a/1, a/2)"
    assert describe_batch([(1, 2)]) == "a batch of 1 samples"


@pytest.mark.parametrize("workers", [0, 2])
def test_a_failing_collate_in_a_plain_loader_names_the_batch(workers):
    collate = NamedCollate(failing_collate)
    loader = DataLoader(SeededDataset(Lines()), batch_size=4, num_workers=workers, collate_fn=collate)
    error = loader_error(loader, SampleError)
    expected = (
        "the batch of dataset indices [4, 5, 6, 7] (rows.jsonl line 5, rows.jsonl line 6, rows.jsonl line 7, "
        "rows.jsonl line 8): the collate_fn raised KeyError: \"no field 'mask'\""
    )
    assert expected in str(error)
    if workers == 0:
        assert isinstance(error.__cause__, KeyError)


def test_a_mixture_describes_the_source_sample():
    mixed = MixedDataset([Lines("a.jsonl"), Lines("b.jsonl")], weights=[1, 1])
    assert describe_sample(mixed, 13) == "dataset index 13 (source 1, dataset index 3 (b.jsonl line 4))"
