"""recipes.core.sources.shard_index: readers' runs cut the epoch's samples into equal contiguous shares."""

import numpy as np
import pytest

from recipes.core.sources.shard_index import ShardIndex


@pytest.mark.parametrize("slots", [1, 2, 3, 7, 40])
def test_runs_partition_the_epochs_samples_into_shares_equal_give_or_take_one(slots):
    counts = [5, 0, 1, 9, 0, 3, 12]  # empty shards too; 30 samples
    index = ShardIndex([np.arange(count, dtype=np.int64) * 1024 for count in counts])
    order = [3, 0, 6, 1, 5, 2, 4]
    expected = [(shard, offset) for shard in order for offset in index.starts[shard].tolist()]  # the epoch's sequence
    got, sizes = [], []
    for slot in range(slots):
        run = index.run(order, *index.share(order, slot, slots))
        share = []
        for position, shard in enumerate(run.shards):
            for offset in index.starts[shard].tolist():
                if (position == 0 and offset < run.begin) or (run.stop is not None and (position, offset) >= run.stop):
                    continue
                share.append((shard, offset))
                assert run.sample(position, offset) == len(got) + len(share) - 1  # its number in the epoch
                assert run.where(run.sample(position, offset)) == (position, offset)
        got += share
        sizes.append(len(share))
    assert got == expected
    assert set(sizes) <= {30 // slots, 30 // slots + 1}


def _reader(index):
    """``read_samples`` over the index alone: each sample is its (shard, offset)."""
    def read(numbers, begin):
        for position in range(begin[0], len(numbers)):
            for offset in index.starts[numbers[position]].tolist():
                if position > begin[0] or offset >= begin[1]:
                    yield [position, offset], (numbers[position], offset)
    return read


@pytest.mark.parametrize("slots", [1, 2, 3, 7])
def test_a_turned_share_reads_from_its_turn_to_its_end_then_up_to_it_and_resumes_anywhere(slots):
    counts = [5, 0, 1, 9, 0, 3, 12]
    index = ShardIndex([np.arange(count, dtype=np.int64) * 1024 for count in counts])
    order, read = [3, 0, 6, 1, 5, 2, 4], _reader(index)
    epoch = [(shard, offset) for shard in order for offset in index.starts[shard].tolist()]

    def middle(low, high):  # where an odd epoch turns a share (turning_point)
        return low + (high - low) // 2

    for slot in range(slots):
        low, high = index.share(order, slot, slots)
        turn = middle(low, high)
        passed = list(index.samples(order, slot, slots, None, read, turned_in=1))
        assert [sample for _, sample in passed] == epoch[turn:high] + epoch[low:turn]
        assert [position[2] for position, _ in passed] == [*range(turn, high), *range(low, turn)]
        for k, (position, _) in enumerate(passed):  # a state saved before sample k: the rest, exactly
            rest = list(index.samples(order, slot, slots, position, read, turned_in=1))
            assert rest == passed[k:]
        unturned = list(index.samples(order, slot, slots, None, read))
        assert [sample for _, sample in unturned] == epoch[low:high]
