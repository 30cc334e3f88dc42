"""vision_loader: seeded augmentations, epochs, ranks, spawn, normalisation (resume: test_resume.py)."""

import hashlib

import pytest
import torch
from torchvision.transforms import v2

from recipes.core.loading.device import IMAGENET_MEAN, IMAGENET_STD, DevicePrefetcher
from recipes.vision import ImageFolderDataset, train_transform, vision_loader
from tests.photos import image_folder


def _train(fixtures, **overrides):
    dataset = ImageFolderDataset(fixtures / "vision", train_transform(32))
    return vision_loader(dataset, 4, device="cpu", **{"seed": 7, "num_workers": 0, **overrides})


def _assert_same_batches(a, b):
    assert len(a) == len(b)
    for (x, y), (p, q) in zip(a, b):
        assert torch.equal(x, p) and torch.equal(y, q)


def test_same_seed_gives_identical_augmented_batches_whatever_the_worker_count(fixtures):
    first = list(_train(fixtures, num_workers=0))
    _assert_same_batches(first, list(_train(fixtures, num_workers=2)))
    _assert_same_batches(first, list(_train(fixtures, num_workers=0)))
    assert [tuple(images.shape) for images, _ in first] == [(4, 3, 32, 32)] * 3  # 14 images, drop_last
    assert first[0][0].dtype == torch.uint8 and first[0][1].dtype == torch.int64
    other = list(_train(fixtures, seed=8))
    assert not all(torch.equal(x, p) for (x, _), (p, _) in zip(first, other))


def test_batches_keep_the_decoders_channels_last_memory_through_normalisation(fixtures):
    # documented: the decoder's [H,W,3] memory is kept to the batch (no transpose per image);
    # .contiguous() gives the same values in NCHW memory
    images, _ = next(iter(_train(fixtures, num_workers=2)))
    assert images.is_contiguous(memory_format=torch.channels_last) and not images.is_contiguous()
    floats, _ = next(iter(DevicePrefetcher(_train(fixtures), "cpu")))
    assert floats.is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(floats.contiguous(), floats) and floats.contiguous().is_contiguous()


def test_next_epoch_draws_new_order_and_new_crops(fixtures):
    loader = _train(fixtures)
    one, two = list(loader), list(loader)
    assert not all(torch.equal(x, p) for (x, _), (p, _) in zip(one, two))


@pytest.fixture(scope="module")
def distinct(tmp_path_factory):
    """27 distinct images and a deterministic transform: a batch image identifies its sample."""
    root = image_folder(tmp_path_factory.mktemp("distinct"), classes=3, per_class=9)
    return ImageFolderDataset(root, v2.Resize((12, 12), antialias=True))


def _digest(image: torch.Tensor) -> str:
    return hashlib.sha1(image.contiguous().numpy().tobytes()).hexdigest()


def _which(dataset):
    return {_digest(dataset[i][0]): i for i in range(len(dataset))}


def test_a_training_epoch_never_repeats_a_sample(distinct):
    lookup = _which(distinct)
    assert len(lookup) == len(distinct) == 27
    for epoch in range(2):
        seen = [lookup[_digest(image)] for images, _ in vision_loader(distinct, 5, device="cpu", seed=epoch,
                                                                       num_workers=0) for image in images]
        assert len(seen) == 25 and len(set(seen)) == 25  # 5 full batches, the 2 left over dropped
        assert seen != sorted(seen)


def test_an_eval_loader_yields_every_sample_once_in_dataset_order(distinct):
    lookup = _which(distinct)
    batches = list(vision_loader(distinct, 5, train=False, device="cpu", num_workers=2))
    assert [len(labels) for _, labels in batches] == [5, 5, 5, 5, 5, 2]
    assert [lookup[_digest(image)] for images, _ in batches for image in images] == list(range(27))
    assert torch.cat([labels for _, labels in batches]).tolist() == distinct.targets


def test_spawned_workers_give_the_batches_of_the_main_process(fixtures):
    _assert_same_batches(list(_train(fixtures, num_workers=2, multiprocessing_context="spawn")), list(_train(fixtures)))


def test_ranks_split_training_batches_and_eval_samples(distinct, monkeypatch):
    lookup = _which(distinct)

    def run(rank, train):
        monkeypatch.setattr("recipes.core.sampling.distributed.distributed_rank_and_size", lambda: (rank, 2))
        loader = vision_loader(distinct, 4, train=train, device="cpu", seed=0, num_workers=0)
        return [[lookup[_digest(image)] for image in images] for images, _ in loader]

    train = [run(rank, True) for rank in (0, 1)]
    assert len(train[0]) == len(train[1]) == 3  # 6 full batches of 4, split evenly
    flat = [i for rank in train for batch in rank for i in batch]
    assert len(flat) == len(set(flat)) == 24
    evaluation = [run(rank, False) for rank in (0, 1)]
    assert sorted(i for rank in evaluation for batch in rank for i in batch) == list(range(27))


def test_device_prefetcher_on_cpu_normalises_like_todtype_and_normalize(fixtures):
    reference = v2.Compose([v2.ToDtype(torch.float32, scale=True), v2.Normalize(IMAGENET_MEAN, IMAGENET_STD)])
    for (images, labels), (floats, same_labels) in zip(_train(fixtures), DevicePrefetcher(_train(fixtures), "cpu")):
        assert floats.dtype == torch.float32 and torch.equal(labels, same_labels)
        torch.testing.assert_close(floats, reference(images), rtol=1e-5, atol=1e-5)


def test_raw_batches_kept_by_the_caller_are_never_written_over(fixtures):
    loader, reference = _train(fixtures, num_workers=2), _train(fixtures)
    kept = [batch for _ in range(4) for batch in loader]
    _assert_same_batches(kept, [batch for _ in range(4) for batch in reference])


def _assert_close_batches(batches, expected):
    assert len(batches) == len(expected)
    for (images, labels), (want, want_labels) in zip(batches, expected):
        torch.testing.assert_close(images, want, rtol=1e-5, atol=1e-5)
        assert torch.equal(labels, want_labels)


@pytest.mark.gpu
def test_device_prefetcher_on_cuda_gives_the_cpu_result_from_pinned_batches(fixtures):
    dataset = ImageFolderDataset(fixtures / "vision", train_transform(32))
    loader = vision_loader(dataset, 4, device="cuda", seed=7, num_workers=2)
    assert loader.pin_memory
    expected = list(DevicePrefetcher(_train(fixtures), "cpu"))
    batches = list(DevicePrefetcher(loader, "cuda"))
    assert len(batches) == len(expected)
    for (images, labels), (cpu_images, cpu_labels) in zip(batches, expected):
        assert images.is_cuda and images.dtype == torch.float32
        torch.testing.assert_close(images.cpu(), cpu_images, rtol=1e-5, atol=1e-5)
        assert torch.equal(labels.cpu(), cpu_labels)
