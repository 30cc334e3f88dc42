"""streams.GroupedBatches: a stream's items in batches of one group each, as detectron2's
AspectRatioGroupedDataset fills them, resumed exactly from a state taken after any batch, in the
main process and through a stateful loader's spawned workers; a state it cannot resume refused."""

import json
import pickle

import pytest

from recipes.core import build_loader, streams
from tests.core.test_streams import Blocks


def detectron2_batches(items, batch_size, group_of):
    """The oracle: detectron2's AspectRatioGroupedDataset.__iter__ (detectron2/data/common.py) on a list."""
    buckets: dict[int, list] = {}
    for item in items:
        bucket = buckets.setdefault(group_of(item), [])
        bucket.append(item)
        if len(bucket) == batch_size:
            yield list(bucket)
            del bucket[:]


def by_three(number: int) -> int:
    return number % 3


def grouped(size: int = 40) -> streams.GroupedBatches:
    return streams.GroupedBatches(Blocks(size, seed=3), 4, by_three)


def test_batches_are_detectron2s_and_resume_exactly_from_a_state_taken_after_any_batch():
    reference = Blocks(40, seed=3)
    passes = [list(detectron2_batches(list(reference), 4, by_three)) for _ in range(2)]  # two epochs
    batches = grouped()
    assert [list(batches), list(batches)] == passes and all(len(batch) == 4 for batch in passes[0])
    assert len({by_three(n) for batch in passes[0] for n in batch}) == 3
    for cut in range(len(passes[0]) + 1):
        interrupted = grouped()
        going = iter(interrupted)
        taken = [next(going) for _ in range(cut)]
        state = json.loads(json.dumps(interrupted.state_dict()))  # plain data, as a checkpoint holds it
        assert state["grouped"]["replay"] >= sum(count for _, count in state["grouped"]["carried"])
        resumed = grouped()
        resumed.load_state_dict(state)
        assert taken + list(resumed) == passes[0], cut
        assert list(resumed) == passes[1], cut


def test_a_stateful_loaders_spawned_workers_resume_with_exactly_the_batches_still_to_come():
    def loader(context: str = "fork"):
        return build_loader(pickle.loads(pickle.dumps(grouped(64))), None, batch_size=None, train=True, device="cpu",
                            stateful=True, num_workers=2, multiprocessing_context=context)

    whole = loader()
    expected = [batch.tolist() for batch in whole]
    assert all(len({by_three(n) for n in batch}) == 1 and len(batch) == 4 for batch in expected)
    assert len(expected) >= 64 // 4 - 2 * 3  # each worker's pass ends with under a batch a group left over
    interrupted = loader()
    going = iter(interrupted)
    taken = [next(going).tolist() for _ in range(5)]
    resumed = loader("spawn")
    resumed.load_state_dict(interrupted.state_dict())
    assert taken + [batch.tolist() for batch in resumed] == expected


def test_a_state_of_the_stream_alone_or_carrying_a_full_batch_is_refused_by_name():
    batches = grouped()
    going = iter(batches)
    next(going)
    state = batches.state_dict()
    with pytest.raises(ValueError, match=r"GroupedBatches state: no 'grouped' dict \(a state of the stream alone"):
        grouped().load_state_dict({name: value for name, value in state.items() if name != "grouped"})
    full = {**state, "grouped": {"replay": 9, "carried": [[0, 4]]}}
    with pytest.raises(ValueError, match=r"grouped.carried count = 4 is not an integer in \[1, 3\]"):
        grouped().check_state(full)
    with pytest.raises(ValueError, match=r"carries more items than it re-reads"):
        grouped().load_state_dict({**state, "grouped": {"replay": 1, "carried": [[0, 2]]}})
    with pytest.raises(ValueError, match=r"Blocks state: source = '40 numbers' is not this one's '41 numbers'"):
        grouped(41).load_state_dict(state)
    assert batches.seed == 3 and batches.state_source() == "40 numbers, grouped in batches of 4"
