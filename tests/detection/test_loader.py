"""detection_collate, padded_detection_collate and detection_loader: batch forms, aspect-ratio
groups, ranks, order, worker transfer, and one Faster R-CNN training step (resume: test_resume.py)."""

import bisect
import pickle

import numpy as np
import pytest
import torch
from torch.utils.data import Subset
from torchvision import tv_tensors
from torchvision.models.detection import fasterrcnn_mobilenet_v3_large_320_fpn
from torchvision.transforms import v2

from recipes.core.loading.device import DevicePrefetcher
from recipes.detection import (
    CocoDataset,
    PaddedDetectionCollate,
    aspect_ratio_groups,
    detection_collate,
    detection_loader,
    padded_detection_collate,
)

PORTRAIT_IDS, EMPTY_IMAGE_ID = {7, 42, 101, 999}, 42


@pytest.fixture(scope="module")
def dataset(fixtures):
    return CocoDataset(fixtures / "detection/images", fixtures / "detection/instances.json", masks=True)


@pytest.fixture(scope="module")
def flipping(fixtures):
    return CocoDataset(
        fixtures / "detection/images", fixtures / "detection/instances.json", transforms=v2.RandomHorizontalFlip(p=0.5)
    )


def _ids(batch):
    return [target["image_id"] for target in batch[1]]


def _assert_same_batches(a, b):
    assert [_ids(x) for x in a] == [_ids(y) for y in b]
    for (images_a, targets_a), (images_b, targets_b) in zip(a, b):
        for x, y in zip(images_a, images_b):
            assert type(x) is type(y) and torch.equal(x, y) and x.stride() == y.stride()  # layout kept
        for x, y in zip(targets_a, targets_b):
            assert list(x) == list(y)
            for key in x:
                if isinstance(x[key], torch.Tensor):
                    assert type(x[key]) is type(y[key]) and torch.equal(x[key], y[key]), key
                else:
                    assert x[key] == y[key]
            assert x["boxes"].canvas_size == y["boxes"].canvas_size and x["boxes"].format == y["boxes"].format


# -- collate functions -----------------------------------------------------------------------------


def test_list_collate_keeps_each_sample_and_drops_skipped_ones(dataset):
    images, targets = detection_collate([dataset[0], None, dataset[4]])
    assert len(images) == len(targets) == 2
    assert torch.equal(images[1], dataset[4][0]) and targets[1]["image_id"] == EMPTY_IMAGE_ID


def test_padded_collate_pads_images_to_the_divisor_and_boxes_to_the_largest_count(dataset):
    samples = [dataset[i] for i in (0, 1, 4)]  # 96x64 with 3 boxes, 64x96 with 3, 64x96 empty
    batch = padded_detection_collate(samples, size_divisibility=32)
    assert batch["images"].shape == (3, 3, 96, 96) and batch["images"].dtype == torch.uint8
    assert batch["image_sizes"].tolist() == [[64, 96], [96, 64], [96, 64]]
    assert batch["image_id"].tolist() == [3, 7, 42]
    assert batch["boxes"].shape == (3, 3, 4) and batch["masks"].shape == (3, 3, 96, 96)
    for i, (image, target) in enumerate(samples):
        n, (h, w) = len(target["boxes"]), image.shape[-2:]
        assert torch.equal(batch["images"][i, :, :h, :w], image)
        assert batch["images"][i, :, h:, :].eq(0).all() and batch["images"][i, :, :, w:].eq(0).all()
        assert batch["box_mask"][i].tolist() == [True] * n + [False] * (3 - n)
        assert torch.equal(batch["boxes"][i, :n], target["boxes"].as_subclass(torch.Tensor))
        assert torch.equal(batch["labels"][i, :n], target["labels"]) and batch["labels"][i, n:].eq(-1).all()
        assert torch.equal(batch["masks"][i, :n, :h, :w], target["masks"])
    assert padded_detection_collate(samples, size_divisibility=1)["images"].shape == (3, 3, 96, 96)
    assert padded_detection_collate([samples[0]], size_divisibility=100)["images"].shape == (1, 3, 100, 100)
    configured = PaddedDetectionCollate(size_divisibility=32)  # the collate_fn form: pickles, shows its options
    assert repr(configured) == "PaddedDetectionCollate(size_divisibility=32, pad_value=0)"
    assert all(torch.equal(a, b) for a, b in zip(configured(samples).values(), batch.values()))


def test_batches_cross_worker_processes_unchanged(flipping):
    def make(workers):
        return detection_loader(flipping, 3, train=True, device="cpu", seed=5, num_workers=workers)

    _assert_same_batches(list(make(0)), list(make(2)))


def test_spawned_workers_give_the_same_batches(flipping):
    def make(workers, **kwargs):
        return detection_loader(flipping, 2, train=True, device="cpu", seed=3, num_workers=workers, **kwargs)

    _assert_same_batches(list(make(0)), list(make(2, multiprocessing_context="spawn")))
    pickle.dumps(make(0).dataset)


# -- aspect-ratio groups, ranks, order --------------------------------------------------------------


def test_aspect_groups_split_portrait_from_landscape_and_match_the_reference_bins():
    ratios = np.array([0.3, 0.5, 0.9, 1.0, 1.2, 2.0, 3.5])
    assert aspect_ratio_groups(ratios).tolist() == [0, 0, 0, 1, 1, 1, 1]
    bins = (2 ** np.linspace(-1, 1, 2 * 3 + 1)).tolist()  # references/detection/group_by_aspect_ratio.py
    assert aspect_ratio_groups(ratios, 3).tolist() == [bisect.bisect_right(bins, r) for r in ratios]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_training_batches_never_mix_orientations_or_repeat_an_image(dataset, seed):
    loader = detection_loader(dataset, 2, train=True, device="cpu", seed=seed, num_workers=0)
    for _ in range(3):  # epochs
        batches = [_ids(batch) for batch in loader]
        assert len(batches) == 5  # 6 landscape -> 3 batches, 4 portrait -> 2
        seen = [image_id for batch in batches for image_id in batch]
        assert len(seen) == len(set(seen)) == 10
        for batch in batches:
            assert len({image_id in PORTRAIT_IDS for image_id in batch}) == 1


@pytest.mark.parametrize("world_size", [2, 3])
def test_ranks_get_equal_batch_counts_and_disjoint_images(dataset, monkeypatch, world_size):
    per_rank = []
    for rank in range(world_size):
        monkeypatch.setattr("recipes.core.sampling.distributed.distributed_rank_and_size", lambda rank=rank: (rank, world_size))
        loader = detection_loader(dataset, 1, train=True, device="cpu", seed=7, num_workers=0)
        per_rank.append([image_id for batch in loader for image_id in _ids(batch)])
    assert len({len(ids) for ids in per_rank}) == 1 and len(per_rank[0]) == 10 // world_size
    everyone = [image_id for ids in per_rank for image_id in ids]
    assert len(everyone) == len(set(everyone))


def test_evaluation_is_in_dataset_order_and_keeps_every_image(dataset):
    loader = detection_loader(dataset, 4, train=False, device="cpu", num_workers=0)
    batches = [_ids(batch) for batch in loader]
    assert [len(b) for b in batches] == [4, 4, 2]
    assert [image_id for batch in batches for image_id in batch] == dataset.image_ids.tolist()


def test_a_subset_is_grouped_by_its_own_images(dataset):
    portrait = [i for i, image_id in enumerate(dataset.image_ids.tolist()) if image_id in PORTRAIT_IDS]
    loader = detection_loader(Subset(dataset, portrait), 2, train=True, device="cpu", seed=0, num_workers=0)
    assert sorted(i for batch in loader for i in _ids(batch)) == sorted(PORTRAIT_IDS)
    with pytest.raises(TypeError, match="aspect_ratios"):
        detection_loader(list(range(3)), 2, train=True, device="cpu")


# -- a detector trains on a batch ----------------------------------------------------------------------


def _train_step(images, targets, num_classes, device):
    torch.manual_seed(0)
    model = fasterrcnn_mobilenet_v3_large_320_fpn(weights=None, weights_backbone=None, num_classes=num_classes)
    model.to(device).train()
    losses = model(list(images), targets)
    loss = sum(losses.values())
    assert torch.isfinite(loss)
    loss.backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)


def test_one_batch_trains_a_faster_rcnn_including_an_image_without_boxes(fixtures):
    dataset = CocoDataset(fixtures / "detection/images", fixtures / "detection/instances.json", contiguous_labels=True)
    pair = [dataset.image_ids.tolist().index(i) for i in (EMPTY_IMAGE_ID, 7)]  # both portrait
    loader = detection_loader(Subset(dataset, pair), 2, train=True, device="cpu", seed=0, num_workers=0)
    # torchvision detectors normalise inside the model: they want floats in [0, 1]
    images, targets = next(iter(DevicePrefetcher(loader, "cpu", mean=(0, 0, 0), std=(1, 1, 1))))
    assert sorted(_ids((images, targets))) == [7, EMPTY_IMAGE_ID]
    assert images[0].dtype == torch.float32 and 0 <= images[0].min() and images[0].max() <= 1
    assert isinstance(targets[0]["boxes"], tv_tensors.BoundingBoxes)
    _train_step(images, targets, len(dataset.categories) + 1, "cpu")


@pytest.mark.gpu
def test_cuda_batches_arrive_pinned_and_train_a_detector_on_the_gpu(fixtures):
    dataset = CocoDataset(fixtures / "detection/images", fixtures / "detection/instances.json", contiguous_labels=True)
    loader = detection_loader(dataset, 2, train=True, device="cuda", seed=0, num_workers=2)
    images, targets = next(iter(loader))
    assert all(image.is_pinned() for image in images) and all(t["boxes"].is_pinned() for t in targets)
    assert isinstance(images[0], tv_tensors.Image) and isinstance(targets[0]["boxes"], tv_tensors.BoundingBoxes)
    images, targets = next(iter(DevicePrefetcher(loader, "cuda", mean=(0, 0, 0), std=(1, 1, 1))))
    assert images[0].is_cuda and images[0].dtype == torch.float32 and images[0].max() <= 1
    boxes = targets[0]["boxes"]
    assert boxes.is_cuda and isinstance(boxes, tv_tensors.BoundingBoxes) and boxes.canvas_size == images[0].shape[-2:]
    _train_step(images, targets, len(dataset.categories) + 1, "cuda")
