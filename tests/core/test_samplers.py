"""GroupedBatchSampler against brute-force checks: coverage, grouping, ranks, epochs, resume."""

import itertools

import numpy as np
import pytest

from recipes.core.sampling.plans import ByGroup, ByLength, TokenBudget
from recipes.core.sampling.samplers import GroupedBatchSampler, SeededBatchSampler
from tests.harness import mutated_state, mutation_cases


def _epoch(sampler):
    return [list(batch) for batch in sampler]


def _flat(batches):
    return [i for batch in batches for i in batch]


CONFIGS = {
    "plain": {},
    "groups": {"groups": "two"},
    "lengths": {"lengths": "tailed"},
    "budget": {"lengths": "tailed", "max_tokens": 400, "batch_size": None},
    "budget-capped": {"lengths": "tailed", "max_tokens": 400},
    "sorted": {"lengths": "tailed", "length_noise": 0.0},
    "budget-sorted": {"lengths": "tailed", "max_tokens": 400, "batch_size": None, "length_noise": 0.0},
}


def _make(name, n=103, batch_size=8, **kwargs):
    rng = np.random.default_rng(7)
    options = dict(CONFIGS[name])
    if options.get("groups") == "two":
        options["groups"] = rng.integers(0, 2, n)
    if options.get("lengths") == "tailed":
        options["lengths"] = np.minimum(rng.lognormal(3, 1, n).astype(int) + 1, 300)
    options.setdefault("batch_size", batch_size)
    return GroupedBatchSampler(n, options["batch_size"], plan=_plan(options), **kwargs), options


def _plan(options):
    """The plan a config names (one of CONFIGS, with its arrays drawn)."""
    noise = {"noise": options["length_noise"]} if "length_noise" in options else {}
    if "groups" in options:
        return ByGroup(options["groups"])
    if "max_tokens" in options:
        return TokenBudget(options["lengths"], options["max_tokens"], **noise)
    if "lengths" in options:
        return ByLength(options["lengths"], **noise)
    return None


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("drop_last", [False, True], ids=["keep-last", "drop-last"])
def test_a_training_epoch_never_repeats_a_sample(name, drop_last):
    sampler, options = _make(name, shuffle=True, drop_last=drop_last, seed=1)
    seen = _flat(_epoch(sampler))
    assert len(seen) == len(set(seen))
    if not drop_last or "max_tokens" in options:
        assert sorted(seen) == list(range(103))


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_an_eval_pass_yields_every_sample_in_order(name):
    sampler, _ = _make(name, shuffle=False, seed=1)
    assert _flat(_epoch(sampler)) == list(range(103))


def test_grouped_batches_never_mix_groups_and_leftovers_are_dropped_not_padded():
    sampler, options = _make("groups", shuffle=True, drop_last=True, seed=3)
    groups = options["groups"]
    batches = _epoch(sampler)
    assert all(len({groups[i] for i in batch}) == 1 for batch in batches)
    assert all(len(batch) == 8 for batch in batches)
    assert len(batches) == sum(np.bincount(groups) // 8) == len(sampler)


def test_token_budget_is_respected_unless_one_sample_is_longer_than_it():
    sampler, options = _make("budget", shuffle=True, seed=0)
    lengths = options["lengths"]
    for batch in _epoch(sampler):
        cost = len(batch) * max(lengths[i] for i in batch)
        assert cost <= 400 or len(batch) == 1


def test_length_grouping_pads_far_less_than_random_batches():
    def waste(batches, lengths):
        padded = sum(len(b) * max(lengths[i] for i in b) for b in batches)
        return 1 - sum(lengths[i] for b in batches for i in b) / padded

    grouped, options = _make("lengths", n=2000, shuffle=True, seed=0)
    plain, _ = _make("plain", n=2000, shuffle=True, seed=0)
    lengths = options["lengths"]
    assert waste(_epoch(grouped), lengths) < 0.5 * waste(_epoch(plain), lengths)


def test_epochs_advance_by_themselves_and_reshuffle():
    sampler, _ = _make("plain", shuffle=True, seed=5)
    first, second = _epoch(sampler), _epoch(sampler)
    assert first != second and sampler.epoch == 2
    sampler.set_epoch(0)
    assert _epoch(sampler) == first


def test_same_seed_same_batches_and_different_seed_different_batches():
    a, _ = _make("lengths", shuffle=True, seed=11)
    b, _ = _make("lengths", shuffle=True, seed=11)
    c, _ = _make("lengths", shuffle=True, seed=12)
    assert _epoch(a) == _epoch(b) != _epoch(c)


def test_keyed_batches_carry_a_seed_per_sample_that_depends_on_the_epoch():
    sampler = SeededBatchSampler(10, 5, shuffle=False, seed=0)
    first, second = _epoch(sampler), _epoch(sampler)
    assert [i for batch in first for i, _ in batch] == list(range(10))
    seeds = [s for batch in first for _, s in batch]
    assert len(set(seeds)) == 10
    assert seeds != [s for batch in second for _, s in batch]


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("world_size", [2, 3, 4])
def test_training_ranks_get_equal_batch_counts_and_disjoint_samples(name, world_size):
    ranks = [_make(name, shuffle=True, drop_last=True, seed=9, rank=r, world_size=world_size)[0] for r in range(world_size)]
    epochs = [_epoch(sampler) for sampler in ranks]
    assert len({len(batches) for batches in epochs}) == 1
    assert all(len(batches) == len(sampler) for batches, sampler in zip(epochs, ranks))
    flat = [_flat(batches) for batches in epochs]
    assert sum(map(len, flat)) == len(set(itertools.chain(*flat)))


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("world_size", [2, 3, 4])
def test_eval_ranks_see_every_sample_exactly_once(name, world_size):
    ranks = [_make(name, shuffle=False, seed=9, rank=r, world_size=world_size)[0] for r in range(world_size)]
    assert list(itertools.chain(*(_flat(_epoch(s)) for s in ranks))) == list(range(103))


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_resume_from_any_point_yields_exactly_the_batches_still_to_come(name):
    reference, _ = _make(name, shuffle=True, seed=2)
    _epoch(reference)  # move into epoch 1 so resume must carry the epoch
    full, following = _epoch(reference), _epoch(reference)
    for stop in range(len(full) + 1):
        sampler, _ = _make(name, shuffle=True, seed=2)
        _epoch(sampler)
        iterator = iter(sampler)
        taken = [next(iterator) for _ in range(stop)]
        fresh, _ = _make(name, shuffle=True, seed=999)  # the state carries the seed
        with pytest.warns(UserWarning, match=r"the loaded state's seed 2 replaces seed=999"):
            fresh.load_state_dict(sampler.state_dict())
        assert taken + _epoch(fresh) == full  # after the last batch, the rest of the pass is empty
        assert _epoch(fresh) == following


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_a_state_taken_after_a_finished_pass_resumes_at_the_next_epoch(name):
    reference, _ = _make(name, shuffle=True, seed=2)
    _epoch(reference)
    following = _epoch(reference)
    sampler, _ = _make(name, shuffle=True, seed=2)
    _epoch(sampler)
    fresh, _ = _make(name, shuffle=True, seed=None)  # the state carries the seed
    fresh.load_state_dict(sampler.state_dict())
    assert _epoch(fresh) == following


def test_state_at_the_end_of_an_epoch_points_at_the_next_epoch():
    sampler = GroupedBatchSampler(10, 3, shuffle=True, seed=0)
    _epoch(sampler)
    assert sampler.state_dict() == {"seed": 0, "epoch": 1, "yielded": 0, "world_size": 1, "offset": 0, "order": "keyed",
                                    "num_samples": 10, "batch_size": 3, "plan": "Shuffle(), shuffled"}


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: GroupedBatchSampler(5, None, seed=0), "give batch_size, or a TokenBudget"),
        (lambda: GroupedBatchSampler(5, 0, seed=0), r"batch_size must be an int in \[1, \.\.\.\]"),
        (lambda: GroupedBatchSampler(5, float("nan"), seed=0), r"batch_size must be an int in \[1, \.\.\.\]"),
        (lambda: TokenBudget([1] * 5, 0), r"max_tokens must be an int in \[1, \.\.\.\]"),
        (lambda: TokenBudget([1] * 5, float("inf")), r"max_tokens must be an int in \[1, \.\.\.\]"),
        (lambda: GroupedBatchSampler(5, 2, seed=0, plan=ByGroup([0] * 4)), "one entry per sample"),
        (lambda: GroupedBatchSampler(5, None, seed=0, plan=TokenBudget([1] * 4, 9)), "one entry per sample"),
        (lambda: ByLength([1] * 5, noise=-0.1), ">= 0"),
        (lambda: ByLength([1] * 5, jitter=float("inf")), "jitter must be a finite number >= 0"),
        (lambda: GroupedBatchSampler(5, 2, seed=0, rank=2, world_size=2), "outside"),
    ],
    ids=["no-size", "zero-size", "nan-size", "zero-budget", "infinite-budget", "short-groups", "short-lengths",
         "negative-noise", "infinite-jitter", "bad-rank"],
)
def test_bad_arguments_raise_clear_errors(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_one_sample_seed_equals_the_vectorised_seeds():
    import random

    from recipes.core.sampling.seeding import sample_seed, sample_seeds

    rng = random.Random(0)
    cases = [(rng.getrandbits(64), rng.getrandbits(20), rng.getrandbits(64)) for _ in range(500)] + [(0, 0, 0)]
    assert [sample_seed(*case) for case in cases] == [int(sample_seeds(s, e, [i])[0]) for s, e, i in cases]


SAMPLER_FIELDS = ["seed", "epoch", "yielded", "world_size", "offset", "order"]


@pytest.mark.parametrize(
    ("field", "kind"),
    # a state without "order" is one saved before the keyed permutation (it resumes with randperm)
    mutation_cases(SAMPLER_FIELDS, {("seed", "negative"), ("seed", "too-large"), ("epoch", "too-large"),
                                    ("order", "missing")}),
)
def test_every_field_of_a_loaded_sampler_state_is_checked_and_a_refusal_changes_nothing(field, kind):
    sampler = GroupedBatchSampler(103, 8, shuffle=True, seed=2)
    iterator = iter(sampler)
    taken = [next(iterator) for _ in range(3)]
    state = sampler.state_dict()
    fresh = GroupedBatchSampler(103, 8, shuffle=True, seed=None)
    before = fresh.state_dict()
    with pytest.raises(ValueError, match="GroupedBatchSampler state"):
        fresh.load_state_dict(mutated_state(state, field, kind))
    assert fresh.state_dict() == before
    fresh.load_state_dict(state)  # the state itself still resumes exactly
    assert taken + list(fresh) == list(GroupedBatchSampler(103, 8, shuffle=True, seed=2))


def test_a_sampler_state_past_the_epochs_batches_is_refused():
    sampler = GroupedBatchSampler(103, 8, shuffle=True, seed=2, drop_last=True)  # 12 batches
    state = {"seed": 2, "epoch": 0, "yielded": 13, "world_size": 1, "offset": 0}
    with pytest.raises(ValueError, match=r"yielded = 13 is not an integer in \[0, 12\]"):
        sampler.load_state_dict(state)
    with pytest.raises(ValueError, match=r"offset = 13 is not an integer in \[0, 12\]"):
        sampler.load_state_dict({**state, "yielded": 0, "offset": 13})
    with pytest.raises(ValueError, match=r"yielded = 5 is not an integer in \[0, 4\]"):
        sampler.load_state_dict({**state, "yielded": 5, "world_size": 2, "offset": 4})  # 2 ranks had 4 each left
    evaluation = GroupedBatchSampler(103, 8, shuffle=False)
    with pytest.raises(ValueError, match=r"offset = 2 is not an integer in \[0, 0\]"):
        evaluation.load_state_dict({**state, "yielded": 0, "offset": 2})
