"""A MixedDataset of two ImageFolderDatasets through vision_loader: one label space, exact
shares per epoch, different label spaces refused, and an exact resume with 2 workers."""

import shutil

import pytest
import torch

from recipes.core import MixedDataset
from recipes.vision import ImageFolderDataset, eval_transform, train_transform, vision_loader
from tests.harness import check_resume_mid_epoch


@pytest.fixture(scope="module")
def mixed(fixtures):
    cropped = ImageFolderDataset(fixtures / "vision", train_transform(32), on_error="skip")
    resized = ImageFolderDataset(fixtures / "vision", eval_transform(32, resize_size=36), on_error="skip")
    return MixedDataset([cropped, resized], [3, 1], samples_per_epoch=40)


def test_labels_agree_with_the_folder_and_shares_are_exact(mixed):
    assert mixed.classes == mixed.datasets[0].classes
    images = labels = 0
    for batch_images, batch_labels in vision_loader(mixed, 4, device="cpu", seed=0, num_workers=0):
        assert batch_images.dtype == torch.uint8 and batch_images.shape[1:] == (3, 32, 32)
        images, labels = images + len(batch_images), labels + len(batch_labels)
    assert images == labels == 40
    draws = mixed.epoch_indices(0, 0)
    assert sum(int(i) < len(mixed.datasets[0]) for i in draws) == 30


def test_folders_with_other_classes_are_refused(fixtures, tmp_path):
    shutil.copytree(fixtures / "vision" / "cat", tmp_path / "cat")
    shutil.copytree(fixtures / "vision" / "dog", tmp_path / "wolf")
    with pytest.raises(ValueError, match="different classes .*labels would mean different things"):
        MixedDataset([ImageFolderDataset(fixtures / "vision"), ImageFolderDataset(tmp_path)], [1, 1])


def test_a_mixture_resumes_exactly(mixed):
    check_resume_mid_epoch(lambda: vision_loader(mixed, 4, device="cpu", seed=2, stateful=True, num_workers=2))


def test_a_mixture_goes_to_spawned_workers(mixed):
    loader = vision_loader(mixed, 4, device="cpu", seed=0, num_workers=1, multiprocessing_context="spawn")
    assert sum(len(labels) for _, labels in loader) == 40
