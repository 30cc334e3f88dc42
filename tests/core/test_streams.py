"""reader_slot + buffer_shuffle + build_loader on an IterableDataset: each item once per epoch."""

import random

import pytest
import torch
from torch.utils.data import IterableDataset

from recipes.core.loader import build_loader
from recipes.core.streams import buffer_shuffle, reader_slot


class Numbers(IterableDataset):
    """0..size-1, item i read by slot i % slots (module level: picklable)."""

    def __init__(self, size: int, rank: int = 0, world_size: int = 1, buffer: int = 0) -> None:
        self.size, self.rank, self.world_size, self.buffer = size, rank, world_size, buffer

    def __iter__(self):
        slot, slots = reader_slot(self.rank, self.world_size)
        items = iter(range(slot, self.size, slots))
        return buffer_shuffle(items, self.buffer, random.Random(slot)) if self.buffer else items


def _collate(batch):
    return torch.tensor(batch)


@pytest.mark.parametrize("workers", [0, 2])
def test_every_item_is_read_once_across_ranks_and_workers(workers):
    seen = []
    for rank in range(3):
        loader = build_loader(Numbers(101, rank, 3, buffer=7), _collate, batch_size=4, train=False, device="cpu", num_workers=workers)
        seen += [i for batch in loader for i in batch.tolist()]
    assert sorted(seen) == list(range(101))


def test_training_drops_each_readers_partial_batch_and_refuses_sampler_options():
    loader = build_loader(Numbers(10), _collate, batch_size=4, train=True, device="cpu", num_workers=0)
    assert [b.tolist() for b in loader] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    with pytest.raises(ValueError, match=r"\['lengths', 'stateful'\] need a map-style dataset"):
        build_loader(Numbers(10), _collate, batch_size=4, train=True, stateful=True, lengths=[1] * 10)


def test_buffer_shuffle_is_a_seeded_permutation_that_moves_items_a_bounded_distance():
    first = list(buffer_shuffle(range(1000), 10, random.Random(0)))
    assert sorted(first) == list(range(1000)) and first != list(range(1000))
    assert first == list(buffer_shuffle(range(1000), 10, random.Random(0)))
    assert all(item - position <= 10 for position, item in enumerate(first))  # never more than 10 places early


def test_equal_steps_passes_batches_through_outside_a_process_group():
    from torch.utils.data import DataLoader

    from recipes.core.streams import EqualSteps

    loader = DataLoader(list(range(10)), batch_size=4)
    wrapped = EqualSteps(loader)
    assert [b.tolist() for b in wrapped] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert wrapped.batch_size == 4 and wrapped.dataset is loader.dataset  # the loader's attributes
