"""CocoDataset's documented seams (CONVENTIONS rule 16): ``load_image`` and ``load_target``, as
torchvision's ``CocoDetection._load_image`` / ``_load_target``, change the items a subclass gives."""

import pytest
import torch
from torchvision.transforms import v2

from recipes.core.contracts.errors import DataError, SkippedSampleWarning
from recipes.detection import CocoDataset


def _coco(cls, fixtures, **options):
    return cls(fixtures / "detection/images", fixtures / "detection/instances.json", **options)


class Inverted(CocoDataset):
    """Every image read, then inverted."""

    def load_image(self, index):
        return 255 - super().load_image(index)


class WithBoxCount(CocoDataset):
    """The target gains a key; the boxes still move with a flip."""

    def load_target(self, index):
        return {**super().load_target(index), "boxes_before": int(len(self.index.item_rows_of(index)))}


class MissingEveryThird(CocoDataset):
    def load_image(self, index):
        if index % 3 == 0:
            raise DataError(f"image {index}: not in the archive")
        return super().load_image(index)


def test_an_overridden_load_image_changes_the_items_images(fixtures):
    plain, inverted = _coco(CocoDataset, fixtures), _coco(Inverted, fixtures)
    for index in range(len(plain)):
        (image, target), (expected, expected_target) = inverted[index], plain[index]
        assert torch.equal(image, 255 - expected)
        assert torch.equal(target["boxes"], expected_target["boxes"])


def test_an_overridden_load_target_goes_through_the_transforms(fixtures):
    flip = v2.RandomHorizontalFlip(p=1.0)
    plain, extended = _coco(CocoDataset, fixtures, transforms=flip), _coco(WithBoxCount, fixtures, transforms=flip)
    for index in range(len(plain)):
        (_, target), (_, expected) = extended[index], plain[index]
        assert target["boxes_before"] == len(expected["boxes"])
        assert torch.equal(target["boxes"], expected["boxes"])  # flipped as the plain dataset's are


def test_a_data_error_from_an_override_follows_on_error(fixtures):
    with pytest.raises(DataError, match="image 0: not in the archive"):
        _coco(MissingEveryThird, fixtures)[0]
    skipping = _coco(MissingEveryThird, fixtures, on_error="skip")
    with pytest.warns(SkippedSampleWarning, match="not in the archive"):
        assert skipping[3] is None
    assert skipping[1] is not None
