"""The one walk over nested batches: structure, classes and order kept; paths; sample counts."""

from collections import namedtuple

import torch
from torchvision import tv_tensors

from recipes.core.contracts.nested import leaves, map_tensors, samples_in, tensors_in

Pair = namedtuple("Pair", "image label")


def _batch():
    boxes = tv_tensors.BoundingBoxes(torch.zeros(2, 4), format="XYXY", canvas_size=(8, 9))
    pair = Pair(torch.ones(1), "cat")
    return {"images": torch.zeros(3, 2), "targets": [{"boxes": boxes, "image_id": 7}], "pair": pair}


def test_map_tensors_rebuilds_the_structure_and_keeps_other_leaves():
    batch = _batch()
    out = map_tensors(batch, lambda tensor: tensor.clone())  # clone keeps tv_tensors' class
    assert isinstance(out["pair"], Pair) and out["pair"].label == "cat" and out["targets"][0]["image_id"] == 7
    assert isinstance(out["targets"][0]["boxes"], tv_tensors.BoundingBoxes)
    assert out["targets"][0]["boxes"].canvas_size == (8, 9)
    assert out["images"] is not batch["images"] and torch.equal(out["images"], batch["images"])


def test_tensors_and_leaves_come_in_order_with_their_paths():
    batch = _batch()
    assert [path for path, _ in leaves(batch)] == [
        "['images']", "['targets'][0]['boxes']", "['targets'][0]['image_id']", "['pair'][0]", "['pair'][1]",
    ]
    assert [t.shape for t in tensors_in(batch)] == [(3, 2), (2, 4), (1,)]


def test_samples_in_counts_the_first_field():
    assert samples_in((torch.zeros(5, 3), torch.zeros(5))) == 5
    assert samples_in({"input_ids": torch.zeros(4, 9)}) == 4
    assert samples_in(([torch.zeros(3, 2, 2)] * 6, [{}] * 6)) == 6
