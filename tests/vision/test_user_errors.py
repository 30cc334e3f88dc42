"""A failing transform or collate names the sample's index and file, in the main process or a worker."""

import hashlib

import pytest
import torch
from torchvision.datasets import ImageFolder
from torchvision.transforms import v2

from recipes.core.contracts.errors import SampleError
from recipes.vision import ImageFolderDataset, eval_transform, vision_loader
from tests.loader_errors import loader_error

TARGET = 11  # the sample the transform fails on (unique pixels: checked below)


def digest(image: torch.Tensor) -> str:
    return hashlib.sha1(image.as_subclass(torch.Tensor).contiguous().numpy().tobytes()).hexdigest()


class FailOnPixels:
    """eval_transform(16), except on the image with the given pixels: what a user's bug looks like."""

    def __init__(self, target: str) -> None:
        self.target, self.resize = target, eval_transform(16)

    def __call__(self, image: torch.Tensor) -> torch.Tensor:
        if digest(image) == self.target:
            raise ValueError("crop box outside the image")
        return self.resize(image)


class BrokenFlip(v2.RandomHorizontalFlip):
    """A flip decode="device" accepts, whose forward (run on files the device cannot decode) fails."""

    def forward(self, *inputs):
        raise ValueError("flip failed")


@pytest.fixture(scope="module")
def failing(fixtures):
    plain = ImageFolderDataset(fixtures / "vision")
    digests = [digest(plain[index][0]) for index in range(len(plain))]
    assert digests.count(digests[TARGET]) == 1
    return FailOnPixels(digests[TARGET])


def oracle_path(fixtures, index: int) -> str:
    return ImageFolder(str(fixtures / "vision")).samples[index][0]


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("on_error", ["raise", "skip"])
def test_a_failing_transform_names_the_index_and_file_even_when_skipping(fixtures, failing, workers, on_error):
    dataset = ImageFolderDataset(fixtures / "vision", failing, on_error=on_error)
    loader = vision_loader(dataset, 4, train=False, device="cpu", num_workers=workers)
    error = loader_error(loader, SampleError)
    where = f"dataset index {TARGET} ({oracle_path(fixtures, TARGET)})"
    assert f"{where}: the transform raised ValueError: crop box outside the image" in str(error)
    if workers == 0:
        assert isinstance(error.__cause__, ValueError)
    else:  # rebuilt from the worker's traceback, which shows the user's own line
        assert 'raise ValueError("crop box outside the image")' in str(error)


def test_a_spawned_worker_names_the_file_of_a_failing_transform(fixtures, failing):
    dataset = ImageFolderDataset(fixtures / "vision", failing)
    loader = vision_loader(dataset, 14, train=False, device="cpu", num_workers=1, multiprocessing_context="spawn")
    error = loader_error(loader, SampleError, match="Caught SampleError in DataLoader worker process 0")
    where = f"dataset index {TARGET} ({oracle_path(fixtures, TARGET)})"
    assert f"{where}: the transform raised ValueError" in str(error)


@pytest.mark.parametrize("workers", [0, 1])
def test_decode_device_names_the_file_a_failing_transform_ran_on(fixtures, workers):
    # decode="device" runs the transform only on files the device cannot decode: index 0 is a PNG
    transform = v2.Compose([v2.Resize(16, antialias=True), v2.CenterCrop(16), BrokenFlip()])
    dataset = ImageFolderDataset(fixtures / "vision", transform)
    loader = vision_loader(dataset, 4, train=False, device="cpu", decode="device", num_workers=workers)
    error = loader_error(loader, SampleError)
    expected = f"dataset index 0 ({oracle_path(fixtures, 0)}): the transform raised ValueError: flip failed"
    assert expected in str(error)


@pytest.mark.parametrize("workers", [0, 2])
def test_a_failing_collate_names_the_indices_and_files_of_the_batch(fixtures, workers):
    dataset = ImageFolderDataset(fixtures / "vision")  # no resize: sizes differ, image_collate refuses
    loader = vision_loader(dataset, len(dataset), train=False, device="cpu", num_workers=workers)
    error = loader_error(loader, SampleError)
    files = ", ".join(path for path, _ in ImageFolder(str(fixtures / "vision")).samples[:8])
    expected = f"the batch of dataset indices {list(range(14))} ({files} and 6 more): the collate_fn raised ValueError"
    assert f"{expected}: image_collate:" in str(error)
