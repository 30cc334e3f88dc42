"""Property tests: the detection collates keep or unpad to exactly the samples (empty targets,
masks, skipped samples, the packed transfer out of a worker); CocoDataset on mutated annotation
files loads or raises a DataError naming the file."""

import pickle

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torchvision import tv_tensors

from recipes.core.workers.packing import PackedBatch
from recipes.detection import CocoDataset, detection_collate, padded_detection_collate
from tests.core.mutations import fuzz_settings, load_or_data_error, mutated_file, quiet


@st.composite
def samples(draw, masks=None):
    """1..4 ``(image, target)`` pairs of random sizes and box counts (0 included), some None."""
    with_masks = draw(st.booleans()) if masks is None else masks
    generator = torch.Generator().manual_seed(draw(st.integers(0, 2**31)))
    batch = []
    for image_id in range(draw(st.integers(1, 4))):
        if draw(st.integers(0, 4)) == 0:
            batch.append(None)
            continue
        height, width, count = draw(st.integers(1, 20)), draw(st.integers(1, 20)), draw(st.integers(0, 4))
        image = tv_tensors.Image(torch.randint(0, 256, (3, height, width), dtype=torch.uint8, generator=generator))
        corners = torch.rand((count, 2, 2), generator=generator).sort(dim=1).values * torch.tensor([width, height])
        target = {
            "image_id": image_id,
            "boxes": tv_tensors.BoundingBoxes(corners.reshape(count, 4), format="XYXY", canvas_size=(height, width)),
            "labels": torch.randint(1, 91, (count,), generator=generator),
            "area": torch.rand(count, generator=generator) * 100,
            "iscrowd": torch.randint(0, 2, (count,), generator=generator),
        }
        if with_masks:
            target["masks"] = tv_tensors.Mask(torch.randint(0, 2, (count, height, width), dtype=torch.uint8,
                                                            generator=generator))
        batch.append((image, target))
    return batch


def assert_same_target(got, expected):
    assert got.keys() == expected.keys() and got["image_id"] == expected["image_id"]
    for key in expected.keys() - {"image_id"}:
        assert type(got[key]) is type(expected[key]) and torch.equal(got[key], expected[key]), key
    assert got["boxes"].canvas_size == expected["boxes"].canvas_size and got["boxes"].format == expected["boxes"].format


@fuzz_settings(100)
@given(batch=samples())
def test_detection_collate_and_its_worker_packing_keep_exactly_the_samples(batch):
    kept = [sample for sample in batch if sample is not None]
    images, targets = detection_collate(batch)
    # in a worker the pair crosses the process boundary packed into one buffer per dtype
    unpacked_images, unpacked_targets = pickle.loads(pickle.dumps(PackedBatch((images, targets))))
    for got_images, got_targets in ((images, targets), (unpacked_images, unpacked_targets)):
        assert len(got_images) == len(got_targets) == len(kept)
        for image, target, (expected_image, expected_target) in zip(got_images, got_targets, kept):
            assert type(image) is tv_tensors.Image and torch.equal(image, expected_image)
            assert_same_target(target, expected_target)


@fuzz_settings(100)
@given(batch=samples(), divisibility=st.sampled_from([1, 4, 7, 32]), pad_value=st.integers(0, 255))
def test_padded_detection_collate_unpads_to_exactly_the_samples(batch, divisibility, pad_value):
    kept = [sample for sample in batch if sample is not None]
    out = padded_detection_collate(batch, size_divisibility=divisibility, pad_value=pad_value)
    count = max((len(target["boxes"]) for _, target in kept), default=0)
    assert out["images"].shape[0] == len(kept) and out["boxes"].shape == (len(kept), count, 4)
    height, width = out["images"].shape[-2:]
    assert height % divisibility == 0 and width % divisibility == 0
    for i, (image, target) in enumerate(kept):
        h, w = out["image_sizes"][i].tolist()
        assert (h, w) == tuple(image.shape[-2:]) and h <= height and w <= width
        assert torch.equal(out["images"][i, :, :h, :w], image)  # unpad(pad(x)) == x
        outside = torch.ones((height, width), dtype=torch.bool)
        outside[:h, :w] = False
        assert (out["images"][i][:, outside] == pad_value).all()
        real = out["box_mask"][i]
        assert real.tolist() == [k < len(target["boxes"]) for k in range(count)]
        for key in ("boxes", "labels", "area", "iscrowd"):
            assert torch.equal(out[key][i][real], target[key].as_subclass(torch.Tensor)), key
        assert (out["labels"][i][~real] == -1).all()
        if "masks" in target:
            assert torch.equal(out["masks"][i][real][:, :h, :w], target["masks"].as_subclass(torch.Tensor))
    assert out["image_id"].tolist() == [target["image_id"] for _, target in kept]


# -- CocoDataset on mutated annotation files ------------------------------------------------------


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


@fuzz_settings(60)
@given(data=st.data(), on_error=st.sampled_from(["raise", "skip"]), masks=st.booleans())
def test_coco_dataset_on_a_mutated_file_loads_or_names_the_file(fixtures, scratch, data, on_error, masks):
    path = scratch / "instances.json"
    path.write_bytes(mutated_file(data, fixtures / "detection" / "instances.json"))
    root = fixtures / "detection" / "images"
    with quiet():
        dataset = load_or_data_error(lambda: CocoDataset(root, path, masks=masks, on_error=on_error), path)
        if dataset is None:
            return
        for index in range(len(dataset)):  # every item: a sample, None (skipped), or a DataError
            item = load_or_data_error(lambda index=index: dataset[index], path)
            if item is not None:
                image, target = item
                assert target["boxes"].shape == (len(target["labels"]), 4)
                assert tuple(image.shape[-2:]) == target["boxes"].canvas_size
