"""reader_slot + shuffled_blocks + StreamCursor + ResumableStream + build_loader on an IterableDataset: each item
once per epoch, and a resume mid-pass exactly."""

import random

import pytest
import torch
from torch.utils.data import IterableDataset

from recipes.core.loading.loader import build_loader
from recipes.core.sampling.plans import ByLength
from recipes.core.contracts.states import check_int
from recipes.core.sources.streams import ResumableStream, StreamCursor, reader_slot, shuffled_blocks


class Numbers(IterableDataset):
    """0..size-1, item i read by slot i % slots (module level: picklable)."""

    def __init__(self, size: int, rank: int = 0, world_size: int = 1, buffer: int = 0) -> None:
        self.size, self.rank, self.world_size, self.buffer = size, rank, world_size, buffer

    def __iter__(self):
        slot, slots = reader_slot(self.rank, self.world_size)
        items = ((i, i) for i in range(slot, self.size, slots))
        rng_of_block = (lambda block: random.Random(block * slots + slot)) if self.buffer else None
        blocks = shuffled_blocks(items, max(self.buffer, 1), rng_of_block)
        return (item for _, _, block in blocks for item in block)


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
    with pytest.raises(ValueError, match=r"plan= needs a map-style dataset"):
        build_loader(Numbers(10), _collate, batch_size=4, train=True, plan=ByLength([1] * 10))
    with pytest.raises(ValueError, match=r"stateful=True: Numbers has no state_dict"):
        build_loader(Numbers(10), _collate, batch_size=4, train=True, stateful=True)


def test_shuffled_blocks_permute_each_block_by_its_index_alone():
    blocks = list(shuffled_blocks(((i, i) for i in range(1000)), 10, lambda block: random.Random(block)))
    flat = [item for _, _, block in blocks for item in block]
    assert sorted(flat) == list(range(1000)) and flat != list(range(1000))
    assert all(abs(item - position) < 10 for position, item in enumerate(flat))  # within its block
    assert [(index, start) for index, start, _ in blocks[:3]] == [(0, 0), (1, 10), (2, 20)]
    # read again from block 57's first position, numbered from 57: the same blocks
    again = list(shuffled_blocks(((i, i) for i in range(570, 1000)), 10, lambda block: random.Random(block), 57))
    assert again == blocks[57:]
    assert [block for _, _, block in shuffled_blocks(((i, i) for i in range(5)), 2)] == [[0, 1], [2, 3], [4]]


def test_stream_cursor_numbers_passes_and_resumes_one():
    cursor = StreamCursor(seed=7)
    assert cursor.state_dict() == {"seed": 7, "epoch": 0, "slots": None, "position": None}
    assert cursor.begin(2) == (0, None)
    cursor.advance(3, 120, 5)
    saved = cursor.state_dict()
    assert saved == {"seed": 7, "epoch": 0, "slots": 2, "position": [3, 120, 5]}
    cursor.finish()
    assert cursor.begin(2) == (1, None)  # the next pass is the next epoch
    resumed = StreamCursor(seed=0)
    resumed.load_state_dict(saved)
    assert resumed.begin(2) == (0, [3, 120, 5]) and resumed.begin(2) == (1, None)
    resumed.load_state_dict(saved)
    with pytest.raises(ValueError, match="middle of a pass read by 2 readers"):
        resumed.begin(3)
    resumed.set_epoch(5)
    assert resumed.begin(3) == (5, None)



class Blocks(ResumableStream):
    """0..size-1 in blocks of 4 shuffled by ``(seed, epoch, block)``, read by slot i % slots: only a
    pass of its own, the rest is the base class's."""

    def __init__(self, size: int, *, seed: int | None = None, rank: int | None = None, world_size: int | None = None):
        self.size = size
        super().__init__(seed, rank, world_size, source=f"{size} numbers")

    def _max_taken(self, slots: int) -> int:
        return 4

    def _check_position(self, position, slots):
        check_int(position[1], "position[1] (start)", "Blocks", 0, self.size - 1)

    def _blocks(self, slot, slots, epoch, resume):
        first = resume[1] if resume is not None else slot
        numbers = ((i, i) for i in range(first, self.size, slots))

        def rng_of_block(block: int) -> random.Random:
            return random.Random(self.seed * 1000 + epoch * 100 + block)

        skip = resume[2] if resume is not None else 0
        for block, start, items in shuffled_blocks(numbers, 4, rng_of_block, resume[0] if resume else 0):
            yield block, start, items[skip if resume is not None and block == resume[0] else 0 :]


def test_a_resumable_stream_resumes_mid_pass_exactly_and_refuses_other_data():
    stream = Blocks(30, seed=3)
    first, second = list(stream), list(stream)  # each pass is the next epoch
    assert sorted(first) == list(range(30)) and first != second
    for stop in (0, 1, 6, 29):
        stream = Blocks(30, seed=3)
        items = iter(stream)
        taken = [next(items) for _ in range(stop)]
        state = stream.state_dict()
        assert set(state) == {"seed", "epoch", "slots", "position", "source"} and state["source"] == "30 numbers"
        resumed = Blocks(30, seed=0)
        with pytest.warns(UserWarning, match=r"Blocks: the loaded state's seed 3 replaces seed=0"):
            resumed.load_state_dict(state)
        assert taken + list(resumed) == first and resumed.seed == 3
        assert list(resumed) == second
    with pytest.raises(ValueError, match=r"Blocks state: source = '30 numbers' is not this one's '31 numbers'"):
        Blocks(31).load_state_dict(state)
    with pytest.raises(ValueError, match=r"Blocks state: position\[2\] \(items taken\) = 5 is not an integer in \[0, 4\]"):
        Blocks(30).load_state_dict({**state, "position": [0, 0, 5]})
    with pytest.raises(ValueError, match=r"Blocks state: position\[1\] \(start\) = 30 is not an integer"):
        Blocks(30).load_state_dict({**state, "position": [0, 30, 0]})
    chosen = Blocks(30, seed=3)
    chosen.set_epoch(1)
    assert list(chosen) == second


def test_equal_steps_passes_batches_through_outside_a_process_group():
    from torch.utils.data import DataLoader

    from recipes.core.sampling.distributed import EqualSteps

    loader = DataLoader(list(range(10)), batch_size=4)
    wrapped = EqualSteps(loader)
    assert [b.tolist() for b in wrapped] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert wrapped.batch_size == 4 and wrapped.dataset is loader.dataset  # the loader's attributes
