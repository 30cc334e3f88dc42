"""MixedDataset: exact shares per epoch, even repeats, no repeat before a small source is shown
whole, determinism, refusals; the batch sampler's elastic resume; ResumableLoader across worker
counts (the torchdata state keys it reads are pinned here)."""

from collections import Counter
from itertools import pairwise

import numpy as np
import pytest
from torch.utils.data import Dataset, IterableDataset

from recipes.core import ByLength, GroupedBatchSampler, SeededBatchSampler, Shuffle, build_loader
from recipes.core.loading.mixing import MixedDataset, MixedStream


class Numbers(Dataset):
    """Items ``(name, i)``; ``lengths`` = i + 1, for the length-grouping sampler. It takes part in
    mixtures as the domains' datasets do: a batch contract and per-sample fields."""

    def __init__(self, name, size, pad_id=0):
        self.name, self.size, self.pad_id = name, size, pad_id
        self.lengths = np.arange(1, size + 1)

    def batch_contract(self):
        return {"collate": "numbers", "pad_id": self.pad_id, "per_sample": ("lengths",)}

    def __len__(self):
        return self.size

    def __getitem__(self, i):
        if not 0 <= i < self.size:
            raise IndexError(i)
        return self.name, i


def _sources(mixed, epoch, seed=0):
    return Counter(mixed.locate(int(i))[0] for i in mixed.epoch_indices(seed, epoch))


def test_each_source_contributes_its_rounded_share_every_epoch():
    mixed = MixedDataset([Numbers("a", 10), Numbers("b", 100), Numbers("c", 7)], [1, 2, 0.5], samples_per_epoch=350)
    assert mixed.draws == [100, 200, 50] and len(mixed) == 117
    for epoch in range(4):
        assert _sources(mixed, epoch) == {0: 100, 1: 200, 2: 50}
    default = MixedDataset([Numbers("a", 10), Numbers("b", 30)], [1, 1])
    assert default.samples_per_epoch == 40 and default.draws == [20, 20]


def test_an_up_weighted_source_repeats_evenly_and_a_down_weighted_one_shows_all_before_repeating():
    small, big = Numbers("small", 7), Numbers("big", 50)
    mixed = MixedDataset([small, big], [1, 1], samples_per_epoch=40)  # 20 draws each an epoch
    seen_big, counts = [], Counter()  # draws of each small sample since the start of the run
    for epoch in range(5):
        for index in mixed.epoch_indices(3, epoch):
            source, local = mixed.locate(int(index))
            if source == 0:
                counts[local] += 1
            else:
                seen_big.append(local)
        assert len(counts) == 7 and max(counts.values()) - min(counts.values()) <= 1  # 20 more over 7 each epoch
    assert len(set(seen_big[:40])) == 40  # epochs 0 and 1: no repeat
    assert set(seen_big[:60]) == set(range(50))  # epoch 2 shows the last 10 (and starts a fresh permutation)
    assert Counter(Counter(seen_big[:100]).values()) == {2: 50}  # 100 draws: everyone twice


def test_the_draws_are_deterministic_interleaved_and_change_with_the_epoch():
    mixed = MixedDataset([Numbers("a", 40), Numbers("b", 40)], [1, 1])
    first, again = mixed.epoch_indices(0, 0), mixed.epoch_indices(0, 0)
    assert np.array_equal(first, again) and not np.array_equal(first, mixed.epoch_indices(0, 1))
    assert not np.array_equal(first, mixed.epoch_indices(1, 0))
    sources = [mixed.locate(int(i))[0] for i in first]
    switches = sum(a != b for a, b in pairwise(sources))
    assert switches > 20  # interleaved, not one source after the other (40 switches expected)


def test_locate_and_items():
    mixed = MixedDataset([Numbers("a", 3), Numbers("b", 4)], [1, 1])
    assert [mixed.locate(i) for i in (0, 2, 3, 6)] == [(0, 0), (0, 2), (1, 0), (1, 3)]
    assert mixed[4] == ("b", 1)
    assert np.array_equal(mixed.lengths, [1, 2, 3, 1, 2, 3, 4]) and mixed.pad_id == 0
    with pytest.raises(IndexError):
        mixed.locate(7)


def test_sources_that_cannot_share_a_collate_are_refused_with_the_reason():
    with pytest.raises(ValueError, match="different pad_id .*padded with one pad id"):
        MixedDataset([Numbers("a", 3, pad_id=0), Numbers("b", 3, pad_id=1)], [1, 1])
    with pytest.raises(ValueError, match="one weight per dataset"):
        MixedDataset([Numbers("a", 3)], [1, 1])
    with pytest.raises(ValueError, match="not all 0"):
        MixedDataset([Numbers("a", 3)], [0])


class Counting(IterableDataset):
    def __iter__(self):
        return iter(range(3))


def test_map_style_and_streams_each_go_to_their_own_mixture():
    with pytest.raises(ValueError, match="Counting cannot be mixed here: use recipes.core.MixedStream"):
        MixedDataset([Numbers("a", 3), Counting()], [1, 1])
    with pytest.raises(ValueError, match="Numbers cannot be mixed here: use recipes.core.MixedDataset"):
        MixedStream([Numbers("a", 3)], [1], samples_per_epoch=3)
    with pytest.raises(ValueError, match="Counting has no state_dict: a mixture of streams resumes through them"):
        MixedStream([Counting()], [1], samples_per_epoch=3)


def test_datasets_of_different_domains_are_refused(tmp_path):
    from recipes.text import TokenizedTextDataset
    from recipes.vision import ImageFolderDataset

    images = ImageFolderDataset("fixtures/vision")
    lines = TokenizedTextDataset("fixtures/text/corpus.txt", "fixtures/text/tokenizer.json")
    with pytest.raises(ValueError, match="different collate functions \\(image_collate, text_collate\\)"):
        MixedDataset([images, lines], [1, 1])


def _keys(batches):
    return [[index for index, _ in batch] for batch in batches]


@pytest.mark.parametrize("saved_world, world", [(2, 3), (3, 2), (2, 2), (1, 4)])
def test_elastic_resume_deals_the_rest_of_the_epoch_to_the_new_ranks(saved_world, world):
    def sampler(rank, size, lengths=None):
        plan = None if lengths is None else ByLength(lengths)
        return SeededBatchSampler(103, 4, shuffle=True, drop_last=True, seed=5, rank=rank, world_size=size, plan=plan)

    everyone = [b.tolist() for b in sampler(0, 1).batches(0)]
    samplers = [sampler(r, saved_world) for r in range(saved_world)]
    ranks = [iter(s) for s in samplers]
    taken = [next(rank) for _ in range(3) for rank in ranks]  # three steps on every rank
    state = samplers[-1].state_dict()  # any rank's: they agree
    assert all(s.state_dict() == state for s in samplers)
    resumed = []
    for r in range(world):
        fresh = sampler(r, world)
        fresh.load_state_dict(state)
        resumed.append(list(fresh))
    assert len({len(batches) for batches in resumed}) == 1  # every rank runs the same number of steps
    seen = [i for batch in _keys(taken) + [b for rank in resumed for b in _keys(rank)] for i in batch]
    assert len(seen) == len(set(seen))  # no sample twice
    rest = everyone[3 * saved_world :]
    assert sorted(map(sorted, _keys(b for rank in resumed for b in rank))) == sorted(
        map(sorted, rest[: len(rest) - len(rest) % world]))  # the rest of the same global order
    assert len(rest) % world < world  # at most one partial round lost
    assert resumed[0][0][0][0] == rest[0][0]  # rank 0 starts where the global order stands


def test_an_evaluation_pass_resumes_only_on_its_world_size():
    sampler = GroupedBatchSampler(20, 4, shuffle=False, rank=0, world_size=2)
    state = sampler.state_dict()
    with pytest.raises(ValueError, match="evaluation pass was saved on 2 ranks and cannot resume on 3"):
        GroupedBatchSampler(20, 4, shuffle=False, rank=0, world_size=3).load_state_dict(state)


def _collate(batch):
    return [tuple(item) for item in batch]


def _mixed_loader(workers, **kwargs):
    mixed = MixedDataset([Numbers("a", 9), Numbers("b", 40)], [2, 1], samples_per_epoch=60)
    return build_loader(mixed, _collate, batch_size=4, train=True, device="cpu", seed=1, stateful=True,
                        num_workers=workers, plan=ByLength(mixed.lengths), **kwargs)


@pytest.mark.parametrize("saved_workers, workers", [(0, 2), (2, 0), (2, 1), (2, 2)])
def test_a_loader_state_loads_with_another_worker_count(saved_workers, workers):
    reference = list(_mixed_loader(0))
    loader = _mixed_loader(saved_workers)
    iterator = iter(loader)
    head = [next(iterator) for _ in range(5)]
    state = loader.state_dict()
    del iterator
    resumed = _mixed_loader(workers)
    resumed.load_state_dict(state)
    assert head + list(resumed) == reference


def test_a_mixture_in_a_loader_draws_each_epochs_shares_with_distinct_seeds_for_repeats():
    mixed = MixedDataset([Numbers("a", 5), Numbers("b", 40)], [1, 1], samples_per_epoch=40)
    sampler = SeededBatchSampler(len(mixed), 4, shuffle=True, seed=0, plan=Shuffle(draws=mixed.epoch_indices))
    keys = [key for batch in sampler for key in batch]
    assert Counter(mixed.locate(index)[0] for index, _ in keys) == {0: 20, 1: 20}
    seeds_of_small = [seed for index, seed in keys if index < 5]
    assert len(set(seeds_of_small)) == 20  # four draws of each of 5 samples, each augmented anew


def test_torchdata_state_layout_the_resumable_loader_reads():
    """ResumableLoader reads the sampler state and worker count from torchdata's state dict: if a
    torchdata release renames these keys, this fails instead of resumes going wrong."""
    loader = _mixed_loader(2)
    iterator = iter(loader)
    next(iterator)
    state = loader.state_dict()
    main = state["_snapshot"]["_main_snapshot"]
    assert main["_num_workers"] == 2 and set(main["_index_sampler_state"]) >= {"seed", "epoch", "yielded"}
    assert "_steps_since_snapshot" in state
    single = _mixed_loader(0)
    next(iter(single))
    assert "_index_sampler_state" in single.state_dict() and "_snapshot" not in single.state_dict()
    del iterator


def test_samples_per_epoch_and_len_of_a_mixed_loader():
    loader = _mixed_loader(0)
    batches = list(loader)
    assert len(batches) == 15 == len(loader)  # 40 + 20 draws, batches of 4


def test_what_the_sources_share_is_the_mixtures_and_their_errors_too(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers

    from recipes.text import TokenizedTextDataset, text_loader

    vocabulary = {"[UNK]": 0, "a": 1, "b": 2}
    tokenizer = Tokenizer(models.WordLevel(vocabulary, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    (tmp_path / "a.txt").write_text("a b\nb\n", encoding="utf-8")
    sources = [TokenizedTextDataset(tmp_path / "a.txt", tokenizer) for _ in range(2)]
    mixed = MixedDataset(sources, [1, 1])  # no pad token: fine until something pads
    with pytest.raises(ValueError, match="no padding config and none of the pad tokens"):
        text_loader(mixed, 2, device="cpu", num_workers=0)
    numbers = MixedDataset([Numbers("a", 3, pad_id=7), Numbers("b", 3, pad_id=7)], [1, 1])
    assert numbers.pad_id == 7 and not hasattr(numbers, "classes")
