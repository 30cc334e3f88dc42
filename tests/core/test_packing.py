"""packed_in_workers / PackedBatch: a worker's batch crosses as one shared buffer per dtype and
arrives as the same structure, tensors, strides, classes and tv_tensors metadata."""

import io
import pickle
from collections import namedtuple
from multiprocessing.reduction import ForkingPickler

import torch
from torch.utils.data import DataLoader
from torchvision import tv_tensors

from recipes.core.workers.packing import PackedBatch, packed_in_workers

Pair = namedtuple("Pair", "left right")


def _cross(batch):
    """What a DataLoader worker's queue does to a batch: ForkingPickler out, pickle in."""
    buffer = io.BytesIO()
    ForkingPickler(buffer, pickle.HIGHEST_PROTOCOL).dump(PackedBatch(batch))
    return pickle.loads(buffer.getvalue())


def _sample_batch():
    hwc = torch.arange(4 * 5 * 3, dtype=torch.uint8).reshape(4, 5, 3)
    image = tv_tensors.Image(hwc.permute(2, 0, 1))  # a [3,H,W] view of [H,W,3] memory, as decoded
    boxes = tv_tensors.BoundingBoxes([[0.0, 0.0, 2.0, 3.0]], format="XYWH", canvas_size=(4, 5))
    target = {"boxes": boxes, "labels": torch.tensor([7]), "empty": torch.zeros((0, 4)), "id": 3, "name": "x"}
    return [image, torch.ones(2, 6)[:, ::2]], [target, Pair(torch.tensor(1.5), None)]


def test_the_batch_arrives_with_its_values_strides_classes_and_metadata():
    sent = _sample_batch()
    got = _cross(sent)
    assert type(got) is tuple and type(got[0]) is list and type(got[1][1]) is Pair
    for a, b in zip([*sent[0], *sent[1][0].values(), sent[1][1].left], [*got[0], *got[1][0].values(), got[1][1].left]):
        if isinstance(a, torch.Tensor):
            assert type(a) is type(b) and a.dtype == b.dtype and torch.equal(a, b)
        else:
            assert a == b
    assert got[0][0].stride() == sent[0][0].stride()  # the decoder's layout is kept, not transposed
    assert got[1][0]["boxes"].format == tv_tensors.BoundingBoxFormat.XYWH and got[1][0]["boxes"].canvas_size == (4, 5)


def test_tensors_of_one_dtype_share_one_shared_memory_buffer():
    got = _cross(_sample_batch())
    floats = [got[0][1], got[1][0]["boxes"], got[1][1].left]
    storages = {t.untyped_storage().data_ptr() for t in floats}
    assert len(storages) == 1 and floats[0].is_shared()


def test_a_dtypes_only_tensor_moves_to_shared_memory_itself_and_a_slice_crosses_alone():
    audio, whole = torch.randn(4, 1000), torch.arange(100, dtype=torch.int32)
    # two int64 tensors: the batch is packed (one with a tensor per dtype crosses as torch sends it)
    sent = {"audio": audio, "mask": whole[10:20], "lengths": torch.tensor([3, 4]), "index": torch.tensor([7, 8])}
    got = _cross(sent)
    assert audio.is_shared() and not whole.is_shared()  # moved as it is (one copy); the slice copied out
    assert got["audio"].untyped_storage().nbytes() == audio.numel() * 4 and torch.equal(got["audio"], audio)
    assert got["mask"].untyped_storage().nbytes() == 10 * 4 and torch.equal(got["mask"], whole[10:20])
    assert torch.equal(got["lengths"], sent["lengths"]) and torch.equal(got["index"], sent["index"])


def test_a_batch_with_a_tensor_that_requires_grad_is_sent_as_it_is():
    weights = torch.ones(3, requires_grad=True)
    got = _cross({"w": weights, "x": torch.zeros(2)})
    assert got["w"].requires_grad and torch.equal(got["w"], weights) and torch.equal(got["x"], torch.zeros(2))


def _as_lists(samples):
    return [s[0] for s in samples], [{"boxes": s[1]} for s in samples]


def test_through_a_worker_process_the_loader_gives_the_plain_batch():
    data = [(torch.full((3, 2, 2), i, dtype=torch.uint8), torch.rand(i, 4)) for i in range(4)]
    collate = packed_in_workers(_as_lists)
    assert type(collate(data[:2])) is tuple  # no worker: nothing is packed
    for workers in (0, 1):
        batches = list(DataLoader(data, batch_size=2, num_workers=workers, collate_fn=collate))
        assert all(type(batch) is tuple for batch in batches)
        images = [image for batch in batches for image in batch[0]]
        boxes = [target["boxes"] for batch in batches for target in batch[1]]
        assert all(torch.equal(a, b[0]) for a, b in zip(images, data))
        assert all(torch.equal(a, b[1]) for a, b in zip(boxes, data))


def test_packing_twice_or_an_object_that_unpickles_to_tensors_keeps_the_batch():
    inner = PackedBatch({"x": torch.arange(3)})  # not walked: pickled by its own __reduce__
    got = _cross([torch.ones(2), inner])
    assert torch.equal(got[0], torch.ones(2)) and torch.equal(got[1]["x"], torch.arange(3))
    data = [torch.full((2,), i) for i in range(4)]
    twice = packed_in_workers(packed_in_workers(torch.stack))
    batches = list(DataLoader(data, batch_size=2, num_workers=1, collate_fn=twice))
    assert [b.tolist() for b in batches] == [[[0, 0], [1, 1]], [[2, 2], [3, 3]]]
