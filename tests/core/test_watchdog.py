"""A stalled loader names the samples its silent worker is loading and shows that worker's stack: under
``timeout=`` as an error, otherwise as one warning past ``stall_warning_s``, and it keeps waiting."""

import math
import pickle
import time
import warnings
from pathlib import Path

import pytest
import torch
from torch.utils.data import Dataset, IterableDataset

from recipes.core.loading.loader import build_loader
from recipes.core.workers.watchdog import STALL_WARNING_S, LoaderStallWarning, LoaderTimeoutError, WatchedWorkerInit


class Stuck(Dataset):
    """Item ``hang`` waits until ``release`` exists (or sleeps ``sleep_s``); each item is named ``item-<i>.bin``."""

    def __init__(self, size: int, hang: int, *, release: Path | None = None, sleep_s: float = 0.0) -> None:
        self.size, self.hang, self.release, self.sleep_s = size, hang, release, sleep_s

    def __len__(self) -> int:
        return self.size

    def describe(self, index: int) -> str:
        return f"item-{index}.bin"

    def __getitem__(self, index: int) -> int:
        if index == self.hang:
            self.wait_for_release()
        return index

    def wait_for_release(self) -> None:
        if self.release is None:
            time.sleep(self.sleep_s)
        while self.release is not None and not self.release.exists():
            time.sleep(0.02)


class StuckStream(IterableDataset):
    """Yields 0, 1, 2, then waits until ``release`` exists."""

    def __init__(self, release: Path) -> None:
        self.release = release

    def __iter__(self):
        yield from range(3)
        while not self.release.exists():
            time.sleep(0.02)


def _indices(batch):
    return batch.tolist()


def _loader(dataset, **options):
    return build_loader(dataset, torch.tensor, batch_size=2, train=False, device="cpu", num_workers=2, **options)


def test_a_timeout_names_the_samples_in_flight_and_shows_the_silent_workers_stack(tmp_path):
    release = tmp_path / "release"
    batches = iter(_loader(Stuck(8, hang=5, release=release), timeout=1.5))
    assert _indices(next(batches)) == [0, 1] and _indices(next(batches)) == [2, 3]
    start = time.monotonic()
    with pytest.raises(LoaderTimeoutError) as caught:
        next(batches)
    assert time.monotonic() - start < 6
    report = str(caught.value)
    del caught  # its traceback holds this frame, which holds the loader: a cycle would keep the workers
    assert report.startswith("DataLoader timed out after 1.5 seconds: no batch for 1.5 s")
    assert "has been loading 2 samples for" in report
    assert "dataset index 4 (item-4.bin); dataset index 5 (item-5.bin)" in report  # the silent worker's batch
    assert "Most recent call first" in report or "most recent call first" in report  # faulthandler's stack
    assert f'File "{__file__}"' in report and "in wait_for_release" in report and "in __getitem__" in report
    release.touch()
    assert [_indices(batch) for batch in batches] == [[4, 5], [6, 7]]  # the loader goes on, as torch's does


def test_without_timeout_a_stall_warns_once_and_keeps_waiting():
    loader = _loader(Stuck(8, hang=5, sleep_s=1.3), stall_warning_s=0.4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        seen = [_indices(batch) for batch in loader]
    assert seen == [[0, 1], [2, 3], [4, 5], [6, 7]]  # nothing was killed
    stalls = [w for w in caught if issubclass(w.category, LoaderStallWarning)]
    assert len(stalls) == 1 and len(caught) == 1, [str(w.message) for w in caught]  # once, though 3 thresholds passed
    message = str(stalls[0].message)
    assert "produced nothing for 0.4 s and keeps waiting (stall_warning_s=0.4; None turns this off)" in message
    assert "dataset index 5 (item-5.bin)" in message and "in wait_for_release" in message
    assert stalls[0].filename == __file__  # blamed on the loop that waits


def test_a_stalled_stream_shows_every_workers_stack(tmp_path):
    release = tmp_path / "release"
    loader = build_loader(StuckStream(release), torch.tensor, batch_size=3, train=False, device="cpu", num_workers=1,
                          timeout=1.0)
    batches = iter(loader)
    assert _indices(next(batches)) == [0, 1, 2]
    with pytest.raises(LoaderTimeoutError, match="no worker is loading a sample") as caught:
        next(batches)
    report = str(caught.value)
    del caught  # its traceback holds this frame, which holds the loader: a cycle would keep the workers
    assert "worker 0's stack" in report and "in __iter__" in report
    release.touch()
    assert list(batches) == []


def test_the_stall_threshold_is_an_option_none_turns_it_off_and_bad_values_are_named():
    assert 60 <= STALL_WARNING_S <= 900  # a few minutes
    watched = _loader(Stuck(4, hang=-1))
    assert watched.watch.stall_warning_s == STALL_WARNING_S and watched.timeout == STALL_WARNING_S
    off = _loader(Stuck(4, hang=-1), stall_warning_s=None)
    assert off.watch is None and off.timeout == 0
    assert build_loader(Stuck(4, hang=-1), torch.tensor, batch_size=2, train=False, num_workers=0).watch is None
    assert _loader(Stuck(4, hang=-1), timeout=7).watch.timeout == 7
    for bad in (math.nan, 0, -1.0, "300"):
        with pytest.raises(ValueError, match="stall_warning_s must be a finite number > 0"):
            _loader(Stuck(4, hang=-1), stall_warning_s=bad)


def test_the_worker_start_up_pickles_for_spawned_workers():
    loader = _loader(Stuck(4, hang=-1), stateful=True)
    init = pickle.loads(pickle.dumps(loader.worker_init_fn))
    assert isinstance(init, WatchedWorkerInit) and init.table == loader.watch.table
