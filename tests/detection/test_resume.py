"""detection_loader(stateful=True): exact resume at every stop with 0 or 2 workers, and seeded batches.

torchdata's own recipe (test_state_dict.py), via tests.harness.check_resume: interrupt after 0, 1
or k batches, at the end of an epoch or inside the next one, or twice; a fresh loader given the
state yields exactly the aspect-grouped batches the interrupted one still had, random flips and
colour jitter (pixels, boxes and masks) included.
"""

import pytest
from torchvision.transforms import v2

from recipes.detection import CocoDataset, detection_loader
from tests.harness import digest, resume_suite

# 6 landscape images -> 3 batches of 2, 4 portrait -> 2: 5 batches an epoch
resume_reference, test_resumed_loader_yields_exactly_the_batches_still_to_come = resume_suite(5)


@pytest.fixture(scope="module")
def jittered(fixtures):
    transforms = v2.Compose([v2.RandomHorizontalFlip(), v2.ColorJitter(brightness=0.5, contrast=0.5)])
    return CocoDataset(fixtures / "detection/images", fixtures / "detection/instances.json", transforms, masks=True)


def _make(dataset, workers, seed=11):
    return detection_loader(dataset, 2, train=True, device="cpu", seed=seed, stateful=True, num_workers=workers)


@pytest.fixture(scope="module")
def make_loader(jittered):
    return lambda workers: _make(jittered, workers)


def test_another_seed_gives_other_batches_and_other_augmentations(jittered, resume_reference):
    mine, other = resume_reference[0], list(_make(jittered, 0, seed=12))
    assert [[t["image_id"] for t in b[1]] for b in other] != [[t["image_id"] for t in b[1]] for b in mine]
    by_id = {t["image_id"]: digest((image, t)) for images, targets in mine for image, t in zip(images, targets)}
    again = {t["image_id"]: digest((image, t)) for images, targets in other for image, t in zip(images, targets)}
    assert all(by_id[i] != again[i] for i in by_id.keys() & again.keys())
