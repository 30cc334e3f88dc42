"""tune_loader recommends workers for slow per-item work and none for in-memory data."""

import time

import pytest
import torch
from torch.utils.data import Dataset

from recipes.core.loading.tuning import Trial, recommend, settings, tune_loader, worker_counts


class SlowItems(Dataset):
    """Each item takes 4 ms of I/O-like waiting (like reading from a network disk)."""

    def __len__(self):
        return 512

    def __getitem__(self, index):
        time.sleep(0.004)
        return torch.tensor(index)


class InMemory(Dataset):
    def __init__(self):
        self.table = torch.arange(100_000)

    def __len__(self):
        return len(self.table)

    def __getitem__(self, index):
        return self.table[index]


def test_slow_items_get_workers_and_in_memory_items_get_none():
    # A simulated step, as a training loop would have: behind 100 ms, 32 slow items (128 ms of
    # waiting) need both workers to keep up; behind 300 ms, 256 in-memory rows (a few ms, ~10 on a
    # machine running other tests beside this one) stay within the 5% tie with no worker at all.
    # Raw rates (step_ms=0) would make the in-memory verdict hinge on a few percent of machine noise.
    slow, slow_trials = tune_loader(
        SlowItems(), batch_size=32, device="cpu", seconds=8, step_ms=100, max_workers=2, progress=False
    )
    fast, _ = tune_loader(InMemory(), batch_size=256, device="cpu", seconds=6, step_ms=300, max_workers=2, progress=False)
    assert slow["num_workers"] == 2 and slow["persistent_workers"] is True
    assert fast == {"num_workers": 0, "pin_memory": False}
    by_workers = {t.num_workers: t.batches_per_second for t in slow_trials}
    assert by_workers[2] > 1.5 * by_workers[0]


def test_sweep_covers_worker_counts_prefetch_and_pinning_only_on_cuda():
    assert worker_counts(6) == [0, 1, 2, 4, 6] and worker_counts(1) == [0, 1] and worker_counts(0) == [0]
    cpu = settings(torch.device("cpu"), max_workers=2)
    assert cpu == [(0, None, False), (1, 2, False), (1, 4, False), (2, 2, False), (2, 4, False)]
    assert {pin for _, _, pin in settings(torch.device("cuda"), max_workers=1)} == {False, True}


def test_recommend_prefers_the_cheapest_setting_within_five_percent():
    def trial(workers, prefetch, pin, rate):
        return Trial(workers, prefetch, pin, batches=int(rate * 10), seconds=10, samples=0, wait_seconds=0, startup_seconds=0)

    trials = [trial(0, None, False, 50), trial(2, 2, False, 100), trial(4, 2, False, 103), trial(2, 4, True, 101)]
    assert recommend(trials) == {"num_workers": 2, "pin_memory": True, "persistent_workers": True, "prefetch_factor": 4}


def _recording_factory(seen):
    """A make_loader that records the keyword arguments of each call."""

    def make_loader(**kwargs):
        seen.append(kwargs)
        return torch.utils.data.DataLoader(InMemory(), batch_size=64, **kwargs)

    return make_loader


def test_a_loader_factory_is_measured_with_each_setting():
    seen = []
    kwargs, trials = tune_loader(make_loader=_recording_factory(seen), device="cpu", seconds=2, max_workers=1, progress=False)
    assert [s["num_workers"] for s in seen] == [0, 1, 1] and len(trials) == 3
    assert kwargs["num_workers"] in (0, 1)


def _pairs_of_lists(batch):
    """A detection-style collate: (list of images, list of targets)."""
    return [torch.zeros(3, 4, 4) for _ in batch], [{"index": i} for i in batch]


def test_samples_are_counted_per_sample_for_list_batches_too():
    _, (trial,) = tune_loader(InMemory(), collate_fn=_pairs_of_lists, batch_size=8, device="cpu", seconds=0.5, max_workers=0, progress=False)
    assert trial.batches > 2 and trial.samples == 8 * trial.batches  # not 3 (an image's channels) per batch
    _, (trial,) = tune_loader(InMemory(), batch_size=8, device="cpu", seconds=0.5, max_workers=0, progress=False)
    assert trial.samples == 8 * trial.batches


def test_a_dataset_smaller_than_one_batch_is_an_error_not_an_endless_loop():
    class Three(Dataset):
        def __len__(self):
            return 3

        def __getitem__(self, index):
            return torch.tensor(index)

    with pytest.raises(ValueError, match="fewer samples than one batch"):
        tune_loader(Three(), batch_size=4, device="cpu", seconds=1, max_workers=0, progress=False, drop_last=True)


def test_workers_are_measured_persistent_as_they_are_recommended():
    seen = []
    tune_loader(make_loader=_recording_factory(seen), device="cpu", seconds=1, max_workers=1, progress=False)
    assert all(s["persistent_workers"] for s in seen if s["num_workers"])


def test_data_wait_is_the_share_of_time_spent_waiting_around_the_step():
    # 5 items of 4 ms = 20 ms of loading, then a 20 ms step: half the time goes to waiting
    _, (trial,) = tune_loader(SlowItems(), batch_size=5, device="cpu", seconds=1.5, step_ms=20, max_workers=0, progress=False)
    assert 0.35 < trial.wait_fraction < 0.65
    assert 15 < trial.batches_per_second < 26  # 1 / 40 ms, minus scheduling slack
