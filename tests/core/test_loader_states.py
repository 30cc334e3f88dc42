"""A loader state names what it belongs to, and every field of it is checked at load_state_dict().

A state of other data, of another batch size or plan, or one with a damaged torchdata field is
a ValueError naming the field when it is loaded, never a raw error (or a wrong epoch) at the
next iter(); the refused state changes nothing, so the loader serves on as if it was never given.
"""

from __future__ import annotations

import copy
import json

import pytest
import torch

from recipes.core.loading.loader import build_loader
from recipes.core.sources.streams import ResumableStream
from tests.core.toy import NoisyRange, collate

DELETE = object()


class NamedRange(NoisyRange):
    """:class:`NoisyRange` whose data has a name, as a dataset's ``state_source()`` gives it."""

    def __init__(self, size: int, name: str) -> None:
        super().__init__(size)
        self.name = name

    def state_source(self) -> str:
        return f"{self.name}: {self.size} samples"


class Numbers(ResumableStream):
    """Numbers ``0 .. size-1``, each reader taking every ``slots``-th, in blocks of 4."""

    def __init__(self, size: int, *, seed: int | None = None) -> None:
        super().__init__(seed, source=f"{size} numbers")
        self.size = size

    def _max_taken(self, slots):
        return 4

    def _blocks(self, slot, slots, epoch, resume):
        numbers = list(range(slot, self.size, slots))
        first = resume[0] if resume is not None else 0
        for block in range(first, -(-len(numbers) // 4)):
            items = numbers[block * 4 : block * 4 + 4]
            yield block, block * 4, items[resume[2] :] if resume is not None and block == first else items


def _indices(batches) -> list[list[int]]:
    return [batch["index"].tolist() for batch in batches]


def _numbers(batches) -> list[list[int]]:
    return [batch.tolist() for batch in batches]


# The loaders below use no persistent workers: a loader with live workers that the garbage collector
# frees from a reference cycle (here pytest.raises' ExceptionInfo holds the test's frame) waits torch's
# 5 s join timeout for each worker, as torch's own DataLoader does (docs/troubleshooting.md), which
# cost this file 110-300 s; the states checked here are the same either way.
def _mapped(workers: int, *, size: int = 37, batch_size: int = 4, seed: int | None = 1, name: str = "a.bin",
            train: bool = True):
    return build_loader(NamedRange(size, name), collate, batch_size=batch_size, train=train, device="cpu", seed=seed,
                        stateful=True, num_workers=workers, persistent_workers=False)


def _stream(workers: int, *, size: int = 40, batch_size: int = 4, seed: int | None = 3):
    return build_loader(Numbers(size, seed=seed), torch.tensor, batch_size=batch_size, train=True, device="cpu",
                        stateful=True, num_workers=workers, persistent_workers=False)


def _saved(loader, taken: int = 3) -> dict:
    iterator = iter(loader)
    for _ in range(taken):
        next(iterator)
    return json.loads(json.dumps(loader.state_dict()))  # as a checkpoint keeps it


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: _mapped(0, name="b.bin"), r"saved with source=a.bin: 37 samples, this loader has b.bin: 37 samples"),
        (lambda: _mapped(0, size=40), r"saved with num_samples=37, this loader has 40"),
        (lambda: _mapped(0, batch_size=12), r"saved with batch_size=4, this loader has 12"),
        (lambda: _mapped(0, train=False), r"saved with plan=Shuffle\(\), shuffled, drop_last, this loader has "
                                          r"Shuffle\(\), in order"),
        (lambda: _mapped(2, batch_size=8), r"saved with batch_size=4, this loader has 8"),
        (lambda: _stream(0, size=41), r"saved with source=40 numbers, this loader has 41 numbers"),
        (lambda: _stream(0, batch_size=5), r"saved with batch_size=4, this loader has 5"),
    ],
    ids=["other-source", "other-size", "other-batch-size", "other-plan", "other-batch-size-workers",
         "stream-other-source", "stream-other-batch-size"],
)
def test_a_state_of_other_data_or_batching_is_refused_when_loaded_and_the_loader_serves_on(build, message):
    state = _saved(_mapped(0) if "numbers" not in message and "=5" not in message else _stream(0))
    loader = build()
    with pytest.raises(ValueError, match=r"ResumableLoader state: " + message):
        loader.load_state_dict(state)
    fresh = build()
    assert _indices_or_numbers(loader) == _indices_or_numbers(fresh)  # a whole first epoch, as if never given


def _indices_or_numbers(loader) -> list[list[int]]:
    batches = list(loader)
    return _indices(batches) if isinstance(batches[0], dict) else _numbers(batches)


def test_the_world_size_is_not_part_of_what_a_state_belongs_to():
    state = _saved(_mapped(0))
    assert "world_size" not in state["belongs_to"]
    assert set(state["belongs_to"]) == {"num_samples", "source", "batch_size", "plan"}


def test_the_states_seed_wins_and_another_seed_on_the_loader_is_a_warning():
    saved = _mapped(0, seed=1)
    iterator = iter(saved)
    for _ in range(3):
        next(iterator)
    state, expected = json.loads(json.dumps(saved.state_dict())), _indices(iterator)
    resumed = _mapped(0, seed=5)
    with pytest.warns(UserWarning, match=r"the loaded state's seed 1 replaces seed=5 given to this object"):
        resumed.load_state_dict(state)
    assert _indices(resumed) == expected
    stream_state = _saved(_stream(2, seed=3))
    with pytest.warns(UserWarning, match=r"Numbers: the loaded state's seed 3 replaces seed=4"):
        _stream(2, seed=4).load_state_dict(stream_state)


# (layout, path into the state, the value put there or DELETE, what the refusal names)
MAP_DAMAGE = [
    ("single", ("_num_yielded",), DELETE, r"lacks \['_num_yielded'\]"),
    ("single", ("_num_yielded",), "3", r"_num_yielded = '3' is not an integer"),
    ("single", ("_index_sampler_state",), DELETE, r"lacks \['_index_sampler_state'\]"),
    ("single", ("_index_sampler_state", "yielded"), 10, r"yielded = 10 is not an integer in \[0, 9\]"),
    ("single", ("_sampler_iter_yielded",), -1, r"_sampler_iter_yielded = -1"),
    ("single", ("_iterator_finished",), True, r"_iterator_finished = True, but the sampler's state has 6 batches"),
    ("single", ("_iterator_finished",), "no", r"_iterator_finished = 'no' is not True or False"),
    ("single", ("dataset_state",), {"a": 1}, r"dataset_state = \{'a': 1\} is not None"),
    ("single", ("_shared_seed",), "x", r"_shared_seed = 'x' is not an integer"),
    ("multi", ("_snapshot",), DELETE, r"lacks \['_snapshot'\]"),
    ("multi", ("_snapshot", "_main_snapshot", "_index_sampler_state"), DELETE, r"lacks \['_index_sampler_state'\]"),
    ("multi", ("_snapshot", "_main_snapshot", "_index_sampler_state", "seed"), "x", r"seed = 'x' is not an integer"),
    ("multi", ("_snapshot", "_main_snapshot", "_base_seed"), "x", r"_base_seed'\] = 'x' is not an integer"),
    ("multi", ("_snapshot", "_main_snapshot", "_base_seed"), -1, r"_base_seed'\] = -1 is not an integer"),
    ("multi", ("_steps_since_snapshot",), 7, r"_steps_since_snapshot = 7 is not an integer in \[0, 6\]"),
    ("multi", ("_iterator_finished",), True, r"_iterator_finished = True, but the sampler's state has 6 batches"),
    ("multi", ("_snapshot", "_snapshot_step"), -1, r"_snapshot_step'\] = -1 is not an integer"),
    ("multi", ("_snapshot", "_last_yielded_worker_id"), 2, r"_last_yielded_worker_id'\] = 2 is not an integer in \[0, 1\]"),
    ("multi", ("_snapshot", "_worker_snapshots", "worker_1"), DELETE, r"not the 2 workers"),
    ("multi", ("_snapshot", "_worker_snapshots", "worker_0", "worker_id"), 1, r"\['worker_id'\] = 1 is not an integer"),
    ("multi", ("_snapshot", "_worker_snapshots", "worker_0", "fetcher_state"), {"x": 1}, r"fetcher_state'\] = .* is not None"),
    ("multi", ("_snapshot", "_main_snapshot", "_sampler_iter_state"), {"samples_yielded": 3}, r"_sampler_iter_state'\] = .* is not None"),
    ("multi", ("belongs_to", "batch_size"), 8, r"saved with batch_size=8, this loader has 4"),
    ("multi", ("belongs_to",), "x", r"belongs_to = 'x' is not a dict"),
    ("single", ("belongs_to",), DELETE, r"no belongs_to, though its sampler state is of a version that always"),
    ("multi", ("belongs_to",), DELETE, r"no belongs_to, though its sampler state is of a version that always"),
]


def _damaged(state: dict, path: tuple[str, ...], value) -> dict:
    state = copy.deepcopy(state)
    node = state
    for key in path[:-1]:
        node = node[key]
    if value is DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return state


@pytest.mark.parametrize(("layout", "path", "value", "message"), MAP_DAMAGE,
                         ids=[f"{c[0]}-{'.'.join(c[1])}-{'delete' if c[2] is DELETE else c[2]}" for c in MAP_DAMAGE])
def test_each_damaged_field_of_a_loader_state_is_refused_when_loaded_and_changes_nothing(layout, path, value, message):
    workers = 0 if layout == "single" else 2
    state = _saved(_mapped(workers))  # 9 batches a pass; 3 taken, 6 to come
    loader = _mapped(workers)
    iterator = iter(loader)
    first = [next(iterator)["index"].tolist() for _ in range(2)]
    with pytest.raises(ValueError, match=r"ResumableLoader state") as refused:
        loader.load_state_dict(_damaged(state, path, value))
    assert refused.match(message)
    rest = [batch["index"].tolist() for batch in iterator]  # the running pass goes on
    reference = _indices(_mapped(workers))
    assert first + rest == reference
    assert _indices(loader) == _indices(list(_epochs(_mapped(workers), 2))[1])  # and then the next epoch
    loader.load_state_dict(state)  # the state itself still loads: nothing stuck
    assert len(_indices(loader)) == 6


def _epochs(loader, count):
    for _ in range(count):
        yield list(loader)


def test_a_refused_state_leaves_a_loader_never_iterated_serving_its_first_epoch():
    state = _damaged(_saved(_mapped(2)), ("_snapshot", "_main_snapshot", "_base_seed"), "x")
    loader = _mapped(2)
    with pytest.raises(ValueError, match=r"_base_seed"):
        loader.load_state_dict(state)
    assert _indices(loader) == _indices(_mapped(2))
    assert _indices(loader) == _indices(list(_epochs(_mapped(2), 2))[1])


STREAM_DAMAGE = [
    (("_snapshot", "_worker_snapshots", "worker_0", "dataset_state", "position"), [0, 0, 9],
     r"worker 0's dataset_state: Numbers state: position\[2\] \(items taken\) = 9"),
    (("_snapshot", "_worker_snapshots", "worker_1", "dataset_state", "source"), "41 numbers",
     r"worker 1's dataset_state: Numbers state: source = '41 numbers' is not this one's '40 numbers'"),
    (("_snapshot", "_worker_snapshots", "worker_1", "dataset_state", "slots"), 3,
     r"read by 3 readers \(ranks x workers\), and this loader has 2"),
    (("_snapshot", "_worker_snapshots", "worker_0", "dataset_state"), "x", r"dataset_state'\] = 'x' is not a dict"),
    (("_snapshot", "_worker_snapshots", "worker_0", "fetcher_state", "fetcher_ended"), 1,
     r"fetcher_ended'\] = 1 is not True or False"),
    (("_snapshot", "_main_snapshot", "_sampler_iter_state", "samples_yielded"), 10**9,
     r"samples_yielded'\] = 1000000000 is not an integer in \[0, \d+\]"),
    (("_snapshot", "_main_snapshot", "_index_sampler_state"), {"yielded": 1}, r"_index_sampler_state'\] = .* is not None"),
    (("_steps_since_snapshot",), 5, r"_steps_since_snapshot = 5 is not an integer in \[0, 0\]"),
]


@pytest.mark.parametrize(("path", "value", "message"), STREAM_DAMAGE,
                         ids=[".".join(case[0][-2:]) for case in STREAM_DAMAGE])
def test_each_damaged_field_of_a_stream_loaders_state_is_refused_when_loaded(path, value, message):
    state = _saved(_stream(2))
    loader = _stream(2)
    with pytest.raises(ValueError, match=r"ResumableLoader state") as refused:
        loader.load_state_dict(_damaged(state, path, value))
    assert refused.match(message)
    assert _numbers(loader) == _numbers(_stream(2))  # a whole first pass, as if never given
    loader.load_state_dict(state)
    assert sum(map(len, _numbers(loader))) == 40 - 12


@pytest.mark.parametrize("workers", [0, 2])
def test_a_resumable_loader_with_torchdatas_own_sampler_still_resumes(workers):
    from recipes.core.loading.loader import ResumableLoader

    def make():
        generator = torch.Generator().manual_seed(0)
        return ResumableLoader(NoisyRange(20), batch_size=4, shuffle=True, collate_fn=collate, generator=generator,
                               num_workers=workers)

    loader = make()
    iterator = iter(loader)
    taken = [next(iterator)["index"].tolist() for _ in range(2)]
    state, rest = copy.deepcopy(loader.state_dict()), _indices(iterator)  # the generator's state is a tensor
    resumed = make()
    resumed.load_state_dict(state)
    assert _indices(resumed) == rest and len(taken + rest) == 5
    with pytest.raises(ValueError, match=r"saved with batch_size=4, this loader has 5"):
        ResumableLoader(NoisyRange(20), batch_size=5, collate_fn=collate, num_workers=workers).load_state_dict(state)


def test_a_mixtures_state_is_refused_by_a_mixture_of_other_weights_or_sources():
    from recipes.core import MixedDataset, MixedStream

    def mixed(weights, size=30):
        return build_loader(MixedDataset([NamedRange(20, "a"), NamedRange(size, "b")], weights), collate, batch_size=4,
                            train=True, device="cpu", seed=1, stateful=True, num_workers=0)

    state = _saved(mixed([1, 3]))
    with pytest.raises(ValueError, match=r"saved with source=mixture of \[a: 20 samples; b: 30 samples\] at \[1.0, 3.0\]"):
        mixed([1, 2]).load_state_dict(state)
    with pytest.raises(ValueError, match=r"saved with num_samples=50, this loader has 51"):
        mixed([1, 3], size=31).load_state_dict(state)
    mixed([1, 3]).load_state_dict(state)

    def streams(weights):
        mixture = MixedStream([Numbers(20, seed=1), Numbers(30, seed=2)], weights, samples_per_epoch=40, seed=3)
        return build_loader(mixture, torch.tensor, batch_size=4, train=True, device="cpu", stateful=True,
                            num_workers=0)

    stream_state = _saved(streams([1, 3]))
    with pytest.raises(ValueError, match=r"saved with source=mixture of \[20 numbers; 30 numbers\] at \[1.0, 3.0\]"):
        streams([1, 1]).load_state_dict(stream_state)
    with pytest.raises(ValueError, match=r"MixedStream state: source = 'mixture of .*' is not this one's"):
        streams([1, 1]).dataset.load_state_dict(stream_state["dataset_state"])  # the stream's own state says so too
    streams([1, 3]).load_state_dict(stream_state)
