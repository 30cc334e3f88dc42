"""What a copy of the vision recipe must keep doing, checked against torchvision and PIL.

    python -m pytest vision/tests          # in the folder you copied the recipe into

Each test builds the fixture folder from the recipe's own ``fixtures.py`` (14 images: JPEG, PNG,
gray, 16-bit, palette, CMYK, EXIF-turned, a nested folder and a text file to ignore), so they run
wherever the recipe does, with or without ``dataloader-recipes`` installed.
"""

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image, ImageOps
from torchvision import tv_tensors
from torchvision.datasets import ImageFolder

from recipes.core import DataError, SkippedSampleWarning
from recipes.vision import ImageFolderDataset, eval_transform, image_collate, train_transform, vision_loader
from recipes.vision.fixtures import write_vision


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("fixtures") / "vision"
    write_vision(folder)
    return folder


def pil_pixels(path: str) -> np.ndarray:
    """The image as PIL shows it upright in RGB. 16-bit gray (mode "I;16", or "I" in Pillow 10.1),
    whose ``convert("RGB")`` clips to white, keeps its top byte, as the recipe does."""
    with Image.open(path) as opened:
        image = ImageOps.exif_transpose(opened)
        if image.mode.startswith("I"):
            gray = (np.asarray(image).astype(np.int64) >> 8).astype(np.uint8)
            return np.repeat(gray[:, :, None], 3, axis=2)
        return np.asarray(image.convert("RGB"))


def test_the_index_is_torchvisions_image_folder(root):
    ours, theirs = ImageFolderDataset(root), ImageFolder(root)
    assert (ours.classes, ours.class_to_idx) == (theirs.classes, theirs.class_to_idx)
    assert ours.samples == theirs.samples and ours.targets == theirs.targets and len(ours) == len(theirs) == 14


def test_every_image_is_uint8_rgb_and_equals_pil_pixel_for_pixel(root):
    dataset = ImageFolderDataset(root)
    for index, (path, label) in enumerate(ImageFolder(root).samples):
        image, target = dataset[index]
        assert isinstance(image, tv_tensors.Image) and image.dtype == torch.uint8 and image.shape[0] == 3
        assert target == label and type(target) is int
        np.testing.assert_array_equal(image.permute(1, 2, 0).numpy(), pil_pixels(path), err_msg=path)


def test_collate_stacks_uint8_images_and_int64_labels(root):
    dataset = ImageFolderDataset(root, eval_transform(32, resize_size=40))
    images, labels = image_collate([dataset[0], None, dataset[5]])  # None: a sample skipped
    assert images.shape == (2, 3, 32, 32) and images.dtype == torch.uint8
    assert labels.tolist() == [dataset.targets[0], dataset.targets[5]] and labels.dtype == torch.int64


def test_a_seed_gives_the_same_augmented_batches_with_or_without_workers(root):
    def batches(workers: int, seed: int = 0) -> list:
        dataset = ImageFolderDataset(root, train_transform(32))
        return list(vision_loader(dataset, 4, device="cpu", seed=seed, num_workers=workers))

    first = batches(0)
    assert [tuple(images.shape) for images, _ in first] == [(4, 3, 32, 32)] * 3  # 14 images, the last 2 dropped
    for other in (batches(0), batches(2)):
        assert all(torch.equal(a, c) and torch.equal(b, d) for (a, b), (c, d) in zip(first, other))
    assert not all(torch.equal(a, c) for (a, _), (c, _) in zip(first, batches(0, seed=1)))


def test_a_stateful_loader_resumes_mid_epoch_with_exactly_the_batches_still_to_come(root):
    def loader():
        return vision_loader(ImageFolderDataset(root, train_transform(16)), 2, device="cpu", seed=3,
                             stateful=True, num_workers=0)

    uninterrupted = loader()
    expected = [list(uninterrupted) for _ in range(2)]
    interrupted = loader()
    batches = iter(interrupted)
    seen = [next(batches) for _ in range(3)]
    resumed = loader()
    resumed.load_state_dict(interrupted.state_dict())
    rest = list(resumed) + list(resumed)  # the epoch's rest, then the next epoch
    for (a, b), (c, d) in zip(seen + rest, expected[0] + expected[1]):
        assert torch.equal(a, c) and torch.equal(b, d)
    assert len(seen + rest) == 2 * len(expected[0])


def test_a_bad_file_is_named_or_skipped_with_a_warning(root, tmp_path):
    (tmp_path / "cat").mkdir()
    (tmp_path / "cat" / "good.png").write_bytes((root / "dog" / "rgb.png").read_bytes())
    (tmp_path / "cat" / "broken.jpg").write_bytes((root / "dog" / "rgb.jpg").read_bytes()[:200])
    with pytest.raises(DataError, match=r"broken\.jpg"):
        ImageFolderDataset(tmp_path)[0]
    dataset = ImageFolderDataset(tmp_path, eval_transform(16, resize_size=16), on_error="skip")
    with pytest.warns(SkippedSampleWarning, match=r"broken\.jpg"):
        images, labels = next(iter(vision_loader(dataset, 2, train=False, device="cpu", num_workers=0)))
    assert images.shape == (1, 3, 16, 16) and labels.tolist() == [0]
