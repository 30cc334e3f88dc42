"""A failing ``transforms`` names the dataset index, image id and file, in the main process or a worker."""

import json

import pytest

from recipes.core.contracts.errors import SampleError
from recipes.detection import CocoDataset, detection_loader
from tests.loader_errors import loader_error

IMAGE_ID = 42


class FailOnImage:
    """Passes ``(image, target)`` through, except for one image id: what a user's bug looks like."""

    def __call__(self, image, target):
        if target["image_id"] == IMAGE_ID:
            raise KeyError("keypoints")
        return image, target


def oracle(fixtures) -> tuple[int, str]:
    """The index of IMAGE_ID (images in id order) and its file_name, read from the JSON itself."""
    data = json.loads((fixtures / "detection" / "instances.json").read_text())
    images = sorted(data["images"], key=lambda image: image["id"])
    index = [image["id"] for image in images].index(IMAGE_ID)
    return index, images[index]["file_name"]


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("on_error", ["raise", "skip"])
def test_failing_transforms_name_the_index_image_id_and_file_even_when_skipping(fixtures, workers, on_error):
    root = fixtures / "detection"
    dataset = CocoDataset(root / "images", root / "instances.json", FailOnImage(), on_error=on_error)
    loader = detection_loader(dataset, 3, train=False, device="cpu", num_workers=workers)
    error = loader_error(loader, SampleError)
    index, file_name = oracle(fixtures)
    where = f"dataset index {index} ({root / 'instances.json'} image id {IMAGE_ID} ({file_name}))"
    expected = f"{where}: the transforms raised KeyError: 'keypoints'"
    assert expected in str(error)
    if workers == 0:
        assert isinstance(error.__cause__, KeyError)
