"""stack_images' shared batches: a worker reuses batch memory only once the main process handed it back."""

import numpy as np
import pytest
import torch

from recipes.core.batching import IN_USE, RELEASED, SharedBatches, batch_tag
from recipes.core.device import _release


def _as_received(storage, shape=(2, 3, 4, 4)):
    """The batch tensor the main process rebuilds from a worker's storage (one tensor, no base)."""
    size = int(np.prod(shape))
    strides = (size // shape[0], 1, shape[3] * shape[1], shape[1])  # channels-last, as the collates make
    return torch.empty(0, dtype=torch.uint8).set_(storage, 0, shape, strides)


def test_a_worker_reuses_memory_only_after_it_was_released():
    pool = SharedBatches(keep=2)
    first = pool.take(96)
    assert first.is_shared() and int(batch_tag(first, 96)) == IN_USE
    second = pool.take(96)
    assert second.data_ptr() != first.data_ptr()  # the first is still in use
    batch_tag(first, 96).fill_(RELEASED)
    again = pool.take(96)
    assert again.data_ptr() == first.data_ptr() and int(batch_tag(again, 96)) == IN_USE
    assert pool.take(95).data_ptr() not in (first.data_ptr(), second.data_ptr())  # another size: new memory
    assert len(pool.held) == 2


def test_a_worker_stops_holding_memory_nobody_hands_back():
    pool = SharedBatches(keep=3, trial=4)
    for _ in range(4):
        pool.take(64)
    assert len(pool.held) == 3
    pool.take(64)  # a fifth batch, none ever came back (a GPU run pins and drops them)
    assert pool.held == [] and pool.reused == 0


def test_release_tags_a_batch_only_when_one_tensor_alone_uses_it():
    pool = SharedBatches()
    images = _as_received(pool.take(96))
    pool.held.clear()  # the worker's own references live in another process
    view, array = images[0], images.numpy()
    _release((images, torch.arange(2)), channels=3)
    assert int(batch_tag(images.untyped_storage(), 96)) == IN_USE  # a view and an array still read it
    del view
    _release((images, torch.arange(2)), channels=3)
    assert int(batch_tag(images.untyped_storage(), 96)) == IN_USE
    del array
    _release({"pixel_values": images, "input_ids": torch.zeros(2, 5, dtype=torch.int64)}, channels=3)
    assert int(batch_tag(images.untyped_storage(), 96)) == RELEASED


@pytest.mark.parametrize("case", ["not an image", "no tag", "not shared"])
def test_release_leaves_alone_what_it_did_not_normalise_or_a_worker_did_not_tag(case):
    if case == "not an image":  # a 1-channel uint8 mask batch is handed to the caller as it is
        pool = SharedBatches()
        mask = _as_received(pool.take(32), shape=(2, 1, 4, 4))
        pool.held.clear()
        _release({"masks": mask}, channels=3)
        assert int(batch_tag(mask.untyped_storage(), 32)) == IN_USE
    elif case == "no tag":  # shared memory of exactly the batch's size (another collate's)
        storage = torch.UntypedStorage._new_shared(96)
        images = _as_received(storage)
        del storage
        before = images.clone()
        _release(images, channels=3)
        assert torch.equal(images, before)
    else:  # num_workers=0: ordinary memory, no worker to hand it to
        images = torch.zeros(2, 3, 4, 4, dtype=torch.uint8)
        _release(images, channels=3)
        assert torch.equal(images, torch.zeros_like(images))


def test_a_worker_of_a_gpu_preset_holds_nothing():
    # loader_kwargs gives only the CPU presets' workers hand_back_batches: elsewhere (a GPU run
    # pins batches and drops them) held memory would only add to the shared memory in use
    pool = SharedBatches(keep=0)
    first = pool.take(64)
    batch_tag(first, 64).fill_(RELEASED)
    assert pool.take(64).data_ptr() != first.data_ptr() and pool.held == []
