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
        run = index.run(order, slot, slots)
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
