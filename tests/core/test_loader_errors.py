"""A caught loader error leaves no reference cycle: dropped, the iterator and its workers go at once."""

import gc
import multiprocessing
import time
import traceback
import weakref

import pytest
from torch.utils.data import DataLoader
from torchdata.stateful_dataloader import StatefulDataLoader

from recipes.core.contracts.errors import DataError, skip_or_raise
from recipes.core.loading.loader import SET_VITAL_WARNING
from recipes.core.workers.loader_errors import ReleasingIterator
from tests.core.toy import NoisyRange, collate

# Workers stop within ~0.1 s of the last reference going; torch's own fallback, once the garbage
# collector frees the iterator, is 5 s per worker. Far above the one, below the other.
STOP_BOUND_S = 5.0


@pytest.fixture
def refcounting_only():
    """No automatic cyclic collection while the test runs: only dropped references free objects."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _children() -> set:
    return set(multiprocessing.active_children())


def _running_after(workers: set, bound_s: float) -> list:
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline and any(worker.is_alive() for worker in workers):
        time.sleep(0.02)
    return [worker for worker in workers if worker.is_alive()]


@pytest.mark.filterwarnings(f"ignore:{SET_VITAL_WARNING}:UserWarning")
@pytest.mark.parametrize("persistent", [False, True], ids=["fresh_workers", "persistent_workers"])
@pytest.mark.parametrize("loader_class", [DataLoader, StatefulDataLoader])
def test_workers_stop_once_a_caught_worker_error_is_dropped(refcounting_only, loader_class, persistent):
    before = _children()
    loader = loader_class(NoisyRange(8, bad=(0,)), batch_size=2, num_workers=2, persistent_workers=persistent,
                          collate_fn=collate)
    batches = ReleasingIterator(iter(loader))
    workers = _children() - before
    assert len(workers) == 2
    try:
        next(batches)
    except DataError as error:
        assert "item-0.bin: broken on purpose" in str(error)
    else:
        pytest.fail("the broken item raised nothing")
    del batches, loader  # a persistent-workers loader keeps its iterator: both go
    assert _running_after(workers, STOP_BOUND_S) == []


def test_a_kept_error_does_not_keep_the_workers(refcounting_only):
    before = _children()
    batches = ReleasingIterator(iter(DataLoader(NoisyRange(8, bad=(0,)), batch_size=2, num_workers=2,
                                                collate_fn=collate)))
    workers = _children() - before
    kept = []
    try:
        next(batches)
    except DataError as error:
        kept.append(error)  # a retry loop's log, a notebook's last exception
    del batches
    assert _running_after(workers, STOP_BOUND_S) == []
    assert "item-0.bin: broken on purpose" in str(kept[0])


def test_the_iterator_goes_on_after_an_error_as_the_dataloader_does():
    def run(wrap):
        loader = DataLoader(NoisyRange(8, bad=(2,)), batch_size=2, num_workers=2, collate_fn=collate)
        batches = wrap(iter(loader))
        seen = [len(batches)]
        while True:
            try:
                seen.append(next(batches)["index"].tolist())
            except StopIteration:
                return seen
            except DataError as error:
                seen.append(type(error).__name__)

    assert run(ReleasingIterator) == run(lambda batches: batches) == [4, [0, 1], "DataError", [4, 5], [6, 7]]


def test_the_traceback_keeps_its_lines_and_the_dataset_frame_its_locals():
    batches = ReleasingIterator(iter(DataLoader(NoisyRange(4, bad=(1,)), batch_size=2, collate_fn=collate)))
    with pytest.raises(DataError) as caught:
        next(batches)
    frames = [(frame, frame.f_code.co_name) for frame, _ in traceback.walk_tb(caught.value.__traceback__)]
    names = [name for _, name in frames]
    assert names[:3] == ["test_the_traceback_keeps_its_lines_and_the_dataset_frame_its_locals", "__next__",
                         "__next__"], names  # this test, ReleasingIterator, then the DataLoader's iterator
    assert "__getitem__" in names
    dataset_frame = next(frame for frame, name in frames if name == "__getitem__")
    assert dataset_frame.f_locals["index"] == 1  # a user's frame keeps its locals for a debugger
    loader_frame = frames[2][0]
    assert "self" not in loader_frame.f_locals  # torch's frame no longer holds the iterator
    assert "in __next__" in "".join(traceback.format_exception(caught.value))


def test_a_raised_data_error_does_not_keep_its_callers_frames(refcounting_only):
    class Owner:
        """What a caller's frame holds (a DataLoader iterator, in a loader)."""

    def read(owner):
        skip_or_raise(DataError("item-3.bin: broken on purpose"), "raise")

    owner = Owner()
    freed = weakref.ref(owner)
    with pytest.raises(DataError, match="item-3.bin"):
        read(owner)
    del owner
    assert freed() is None


@pytest.mark.parametrize("stateful", [False, True], ids=["plain", "stateful"])
def test_the_presets_loaders_release_their_workers_after_a_caught_error(refcounting_only, stateful):
    from recipes.core.loading.loader import build_loader

    before = _children()
    loader = build_loader(NoisyRange(8, bad=(0,)), collate, batch_size=2, train=False, device="cpu", num_workers=2,
                          stateful=stateful)
    with pytest.raises(DataError, match="broken on purpose"):
        for _ in loader:  # a training loop that catches the error around its loop
            pass
    workers = _children() - before
    assert len(workers) == 2
    del loader  # persistent workers: the loader keeps its iterator, and both go now
    assert _running_after(workers, STOP_BOUND_S) == []
