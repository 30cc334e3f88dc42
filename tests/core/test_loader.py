"""loader_kwargs and build_loader: presets, per-sample seeding, exact resume, error policy."""

import json
import pickle
import warnings

import pytest
import torch
from torch.utils.data import DataLoader

from recipes.core.contracts.errors import DataError, SkippedSampleWarning
from recipes.core.loading.loader import SET_VITAL_WARNING, build_loader, loader_kwargs, usable_cpus
from tests.core.toy import IterableSeedProbe, NoisyRange, SeedProbe, as_list, collate
from tests.harness import STOPS, check_resume
from tests.loader_errors import loader_error


def test_cuda_preset_pins_memory_and_keeps_workers():
    kwargs = loader_kwargs("cuda", train=True, seed=0)
    assert kwargs["pin_memory"] is True and kwargs["drop_last"] is True
    assert kwargs["num_workers"] == min(8, usable_cpus())
    assert kwargs["persistent_workers"] is True and kwargs["prefetch_factor"] == 4
    assert kwargs["generator"].initial_seed() == 0


def test_cpu_preset_does_not_pin_and_eval_keeps_the_last_batch():
    kwargs = loader_kwargs("cpu", train=False)
    assert kwargs["pin_memory"] is False and kwargs["drop_last"] is False
    assert "generator" not in kwargs


def test_debug_preset_has_no_workers_and_no_worker_options():
    kwargs = loader_kwargs("debug", train=True)
    assert kwargs["num_workers"] == 0
    assert "persistent_workers" not in kwargs and "prefetch_factor" not in kwargs
    DataLoader(range(4), **kwargs)  # accepted as is


def test_detected_device_is_cpu_without_an_accelerator():
    if torch.accelerator.current_accelerator(check_available=True) is not None:
        pytest.skip("an accelerator is present")
    assert loader_kwargs(None, train=True)["pin_memory"] is False


def test_local_world_size_divides_the_workers(monkeypatch):
    monkeypatch.setattr("recipes.core.loading.loader.usable_cpus", lambda: 32)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "8")
    assert loader_kwargs("cuda", train=True)["num_workers"] == 4


def _batches(loader):
    return [(b["index"].tolist(), b["noise"]) for b in loader]


def _assert_same(a, b):
    assert [i for i, _ in a] == [i for i, _ in b]
    for (_, x), (_, y) in zip(a, b):
        torch.testing.assert_close(x, y, rtol=0, atol=0)


def test_same_seed_gives_identical_batches_whatever_the_worker_count():
    dataset = NoisyRange(37)
    runs = [
        _batches(build_loader(dataset, collate, batch_size=4, train=True, device="cpu", seed=3, num_workers=n))
        for n in (0, 2, 0)
    ]
    _assert_same(runs[0], runs[1])
    _assert_same(runs[0], runs[2])


def test_different_seeds_give_different_batches():
    dataset = NoisyRange(37)
    a = _batches(build_loader(dataset, collate, batch_size=4, train=True, device="cpu", seed=3, num_workers=0))
    b = _batches(build_loader(dataset, collate, batch_size=4, train=True, device="cpu", seed=4, num_workers=0))
    assert [i for i, _ in a] != [i for i, _ in b]


def test_each_epoch_draws_new_augmentations_for_the_same_sample():
    loader = build_loader(NoisyRange(8), collate, batch_size=8, train=False, device="cpu", seed=0, num_workers=0)
    first, second = next(iter(loader)), next(iter(loader))
    assert first["index"].tolist() == second["index"].tolist()
    assert not torch.equal(first["noise"], second["noise"])


def test_loading_in_the_main_process_leaves_the_global_rng_alone():
    loader = build_loader(NoisyRange(8), collate, batch_size=4, train=True, device="cpu", seed=0, num_workers=0)
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    list(loader)
    assert torch.equal(torch.rand(3), expected)


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("stop", [0, 1, 5, 9, 10, 13])
def test_stateful_loader_resumes_with_exactly_the_batches_still_to_come(workers, stop):
    # 37 samples, batch 4, drop_last -> 9 batches per epoch; stop 9..13 crosses into epoch 2
    def make():
        return build_loader(
            NoisyRange(37), collate, batch_size=4, train=True, device="cpu", seed=1, stateful=True, num_workers=workers
        )

    reference = make()
    expected = _batches(reference) + _batches(reference) + _batches(reference)
    loader = make()
    taken, state = [], loader.state_dict()
    while len(taken) < stop:
        for batch in loader:
            taken.append((batch["index"].tolist(), batch["noise"]))
            if len(taken) == stop:
                state = loader.state_dict()
                break
    resumed = make()
    resumed.load_state_dict(state)
    rest = _batches(resumed)  # the rest of the epoch: none after its last batch (stop 9)
    following = _batches(resumed)  # then the whole next epoch
    assert (len(taken) + len(rest)) % 9 == 0 and len(following) == 9
    _assert_same(taken + rest + following, expected[: len(taken) + len(rest) + 9])


def test_skip_policy_drops_bad_samples_and_warns_with_their_names():
    dataset = NoisyRange(10, bad=(2, 7), on_error="skip")
    loader = build_loader(dataset, collate, batch_size=5, train=False, device="cpu", num_workers=0)
    with pytest.warns(SkippedSampleWarning) as caught:
        seen = [i for batch in loader for i in batch["index"].tolist()]
    assert seen == [0, 1, 3, 4, 5, 6, 8, 9]
    assert sorted(str(w.message) for w in caught) == [
        "skipped: item-2.bin: broken on purpose",
        "skipped: item-7.bin: broken on purpose",
    ]


def test_an_error_in_a_worker_names_the_file_in_the_main_process():
    dataset = NoisyRange(10, bad=(7,))
    loader = build_loader(dataset, collate, batch_size=5, train=False, device="cpu", num_workers=2)
    loader_error(loader, DataError, match="item-7.bin: broken on purpose")


def test_spawned_workers_receive_a_picklable_loader():
    loader = build_loader(
        NoisyRange(12), collate, batch_size=4, train=True, device="cpu", seed=0,
        num_workers=2, multiprocessing_context="spawn",
    )
    forked = build_loader(NoisyRange(12), collate, batch_size=4, train=True, device="cpu", seed=0, num_workers=0)
    _assert_same(_batches(loader), _batches(forked))
    pickle.dumps(loader.dataset), pickle.dumps(loader.batch_sampler)


def test_overrides_replace_preset_values():
    loader = build_loader(NoisyRange(10), collate, batch_size=4, train=True, device="cpu", num_workers=0, drop_last=False)
    assert sum(len(b["index"]) for b in loader) == 10
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert loader.num_workers == 0


def _probe(loader):
    return [{k: v for k, v in item.items() if k != "worker"} for batch in loader for item in batch]


def test_every_sample_draws_from_its_own_seed_whatever_the_worker_count():
    def run(workers):
        return build_loader(SeedProbe(24), as_list, batch_size=4, train=True, device="cpu", seed=2, num_workers=workers)

    alone, split = _probe(run(0)), _probe(run(2))
    assert alone == split  # torch, random and numpy draws alike
    for key in ("torch_seed", "torch", "random", "numpy"):
        assert len({item[key] for item in split}) == 24, key
    assert {item["worker"] for batch in run(2) for item in batch} == {0, 1}


def test_workers_of_an_iterable_dataset_get_distinct_seeds_and_the_rank_is_mixed_in(monkeypatch):
    def draws():
        loader = build_loader(IterableSeedProbe(), as_list, batch_size=None, train=False, device="cpu", seed=9,
                              num_workers=2)
        return sorted((item["worker"], item["torch_seed"], item["random"], item["numpy"]) for item in loader)

    rank0 = draws()
    assert rank0 == draws()  # a seed reproduces the workers' seeds
    assert [w for w, *_ in rank0] == [0, 1] and len({d for _, *x in rank0 for d in x}) == 6
    monkeypatch.setattr("recipes.core.loading.loader.distributed_rank_and_size", lambda: (1, 2))
    rank1 = draws()
    assert not {d for _, *x in rank0 for d in x} & {d for _, *x in rank1 for d in x}
    assert loader_kwargs("cpu", train=True, seed=9)["generator"].initial_seed() != 9  # only rank 0 keeps it as is


def test_a_loader_without_a_seed_resumes_from_the_seed_in_its_state():
    def make():
        return build_loader(NoisyRange(37), collate, batch_size=4, train=True, device="cpu", stateful=True, num_workers=0)

    loader = make()
    iterator = iter(loader)
    next(iterator), next(iterator)
    state = json.loads(json.dumps(loader.state_dict()))
    continuation = _batches(iterator)
    resumed = make()  # draws another seed, which the state replaces
    resumed.load_state_dict(state)
    _assert_same(_batches(resumed), continuation)


@pytest.mark.parametrize("workers", [0, 2])
def test_an_evaluation_pass_resumes_exactly_at_every_stop(workers):
    def make():
        return build_loader(NoisyRange(37), collate, batch_size=4, train=False, device="cpu", seed=1, stateful=True,
                            num_workers=workers)

    reference = make()
    epochs = [list(reference) for _ in range(3)]  # 10 batches, the last one of 1 sample
    for stop in STOPS:
        check_resume(make, stop, 10, epochs)


def test_a_batch_fetched_at_once_equals_its_samples_fetched_one_by_one():
    from recipes.core.sampling.seeding import SeededDataset

    dataset = SeededDataset(NoisyRange(6))
    keys = [(3, 11), (0, 12), (5, 11)]
    torch.manual_seed(0)
    expected_next = torch.rand(2)
    torch.manual_seed(0)
    batch = dataset.__getitems__(keys)
    assert torch.equal(torch.rand(2), expected_next)  # the caller's generator is untouched
    for sample, key in zip(batch, keys):
        single = dataset[key]
        assert sample["index"] == single["index"] and torch.equal(sample["noise"], single["noise"])
    assert torch.equal(batch[0]["noise"], dataset[(5, 11)]["noise"])  # same seed, same draw
    assert [s["index"] for s in dataset.__getitems__([4, 2])] == [4, 2]


def test_a_stateful_loader_is_built_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loader = build_loader(NoisyRange(8), collate, batch_size=4, train=True, device="cpu", seed=0, stateful=True,
                              num_workers=0)
    assert len(as_list(loader)) == 2


def test_torchdata_still_calls_the_deprecated_set_vital():
    # build_loader filters this one warning around StatefulDataLoader's constructor. When this
    # fails, torchdata stopped calling torch.set_vital: remove SET_VITAL_WARNING and its filter.
    from torchdata.stateful_dataloader import StatefulDataLoader

    if "set_vital" in vars(torch):  # torch 2.11: a plain function, no warning to filter
        pytest.skip(f"torch {torch.__version__} does not deprecate set_vital")
    with pytest.warns(UserWarning, match=SET_VITAL_WARNING):
        StatefulDataLoader(list(range(4)), batch_size=2)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda state: state.update(_steps_since_snapshot=-1), r"_steps_since_snapshot = -1 is not an integer"),
        (lambda state: state.update(_num_workers="x"), r"_num_workers = 'x' is not an integer"),
        (lambda state: state.update(_index_sampler_state=None), r"_index_sampler_state = None is not a dict"),
        (lambda state: state["_index_sampler_state"].update(yielded=10**12), r"GroupedBatchSampler state: yielded"),
        (lambda state: state["_index_sampler_state"].pop("offset"), r"GroupedBatchSampler state: missing keys \['offset'\]"),
    ],
    ids=["negative-steps", "workers-not-an-int", "no-sampler-state", "yielded-past-the-epoch", "sampler-key-missing"],
)
def test_a_crafted_loader_state_loaded_with_another_worker_count_is_refused(change, reason):
    def make(workers):
        return build_loader(NoisyRange(37), collate, batch_size=4, train=True, device="cpu", seed=1, stateful=True,
                            num_workers=workers)

    loader = make(0)
    iterator = iter(loader)
    next(iterator)
    state = loader.state_dict()
    assert make(2).load_state_dict(json.loads(json.dumps(state))) is None  # the state as saved loads
    change(state)
    with pytest.raises(ValueError, match=f"ResumableLoader state|{reason}") as refused:
        make(2).load_state_dict(state)
    assert refused.match(reason)
