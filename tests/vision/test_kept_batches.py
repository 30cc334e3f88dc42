"""A batch the caller keeps is never written over: raw batches, numpy views and outputs, over epochs."""

import pytest

from recipes.vision import ImageFolderDataset, train_transform, vision_loader
from tests.harness import KEEPERS, check_kept_batches_intact
from tests.photos import image_folder


@pytest.mark.parametrize("keep", KEEPERS)
def test_kept_batches_stay_bit_identical_over_three_epochs(tmp_path, keep):
    dataset = ImageFolderDataset(image_folder(tmp_path, classes=2, per_class=24), train_transform(32))
    loader = vision_loader(dataset, 4, device="cpu", seed=0, num_workers=2)  # 12 batches an epoch
    check_kept_batches_intact(loader, keep, images=lambda batch: batch[0])
