"""vision_loader(stateful=True) resumes exactly at every stop, with 0 or 2 workers.

torchdata's own recipe (test_state_dict.py), via tests.harness.check_resume: interrupt after 0, 1
or k batches, at the end of an epoch or inside the next one, or twice; a fresh loader given the
state yields exactly the batches the interrupted one still had, random crops and flips included.
"""

import pytest

from recipes.vision import ImageFolderDataset, train_transform, vision_loader
from tests.harness import resume_suite

# 14 fixture images, batch 4, the last partial batch dropped: 3 batches an epoch
resume_reference, test_resumed_loader_yields_exactly_the_batches_still_to_come = resume_suite(3)


@pytest.fixture(scope="module")
def make_loader(fixtures):
    dataset = ImageFolderDataset(fixtures / "vision", train_transform(32))
    return lambda workers: vision_loader(dataset, 4, device="cpu", seed=7, stateful=True, num_workers=workers)
