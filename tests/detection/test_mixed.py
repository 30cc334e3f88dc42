"""A MixedDataset of two CocoDatasets through detection_loader: aspect-ratio groups hold over the
mixture, targets are the sources' own, shares are exact, and a resume with 2 workers is exact."""

import pytest
from torchvision.transforms import v2

from recipes.core import MixedDataset
from recipes.detection import CocoDataset, detection_loader
from tests.harness import check_resume_mid_epoch


@pytest.fixture(scope="module")
def mixed(fixtures):
    images, annotations = fixtures / "detection/images", fixtures / "detection/instances.json"
    plain = CocoDataset(images, annotations)
    flipped = CocoDataset(images, annotations, transforms=v2.RandomHorizontalFlip(p=1.0))
    return MixedDataset([plain, flipped], [1, 2], samples_per_epoch=24)


def test_batches_keep_one_orientation_and_the_sources_targets(mixed):
    assert mixed.label_to_category == mixed.datasets[0].label_to_category
    plain, flipped = mixed.datasets
    position = {int(image_id): k for k, image_id in enumerate(plain.image_ids)}
    portrait, count = mixed.aspect_ratios < 1, 0
    for images, targets in detection_loader(mixed, 2, device="cpu", seed=0, num_workers=0, drop_last=False):
        rows = [position[target["image_id"]] for target in targets]
        assert len({bool(portrait[row]) for row in rows}) == 1  # one aspect group per batch
        for image, target, row in zip(images, targets, rows):
            candidates = [plain[row], flipped[row]]  # which source drew it: the boxes say
            assert any(image.equal(c[0]) and target["boxes"].equal(c[1]["boxes"]) for c in candidates)
        count += len(rows)
    assert count == 24


def test_a_mixture_resumes_exactly(mixed):
    check_resume_mid_epoch(lambda: detection_loader(mixed, 2, device="cpu", seed=2, stateful=True, num_workers=2))
