"""multimodal_loader(stateful=True): exact resume at every stop with 0 or 2 workers, and seeded batches.

torchdata's own recipe (test_state_dict.py), via tests.harness.check_resume: interrupt after 0, 1
or k batches, at the end of an epoch or inside the next one, or twice; a fresh loader given the
state yields exactly the batches the interrupted one still had, random crops and the random
choice among each image's captions included.
"""

import pytest
from tokenizers import Tokenizer
from torchvision.transforms import v2

from recipes.multimodal import ImageTextDataset, multimodal_loader
from tests.harness import resume_suite

AUGMENT = v2.Compose([v2.RandomResizedCrop(16, scale=(0.3, 1.0), antialias=True), v2.RandomHorizontalFlip()])
# 8 images (28 captions), batch 2: 4 batches an epoch
resume_reference, test_resumed_loader_yields_exactly_the_batches_still_to_come = resume_suite(4)


@pytest.fixture(scope="module")
def pairs(fixtures):
    tokenizer = Tokenizer.from_file(str(fixtures / "text" / "tokenizer.json"))
    return ImageTextDataset(fixtures / "multimodal" / "captions.json", tokenizer, transform=AUGMENT, captions="random")


def _make(dataset, workers, seed=5):
    return multimodal_loader(dataset, 2, device="cpu", seed=seed, stateful=True, num_workers=workers)


@pytest.fixture(scope="module")
def make_loader(pairs):
    return lambda workers: _make(pairs, workers)


def _by_row(batches):
    return {
        int(row): (pixels, tuple(ids[:length].tolist()))
        for batch in batches
        for row, pixels, ids, length in zip(batch["index"], batch["pixel_values"], batch["input_ids"], batch["lengths"])
    }


def test_another_seed_gives_another_order_other_crops_and_other_caption_draws(pairs, resume_reference):
    other = list(_make(pairs, 0, seed=6))
    assert [b["index"].tolist() for b in other] != [b["index"].tolist() for b in resume_reference[0]]
    mine, theirs = _by_row(resume_reference[0]), _by_row(other)
    assert all(not mine[row][0].equal(theirs[row][0]) for row in mine)
    assert any(mine[row][1] != theirs[row][1] for row in mine)  # 7 of the 8 images have several captions
