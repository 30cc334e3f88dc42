"""The audio demo builds the fixture folder's training loader: duration-grouped padded batches of 4."""

import torch

from recipes.audio.demo import build


def test_the_demo_loader_gives_padded_batches_of_four_from_the_fixture_clips(fixtures):
    dataset, loader = build(fixtures)
    batches = list(loader)
    assert len(dataset) == 11 and len(batches) == 2
    for batch in batches:
        assert batch["audio"].shape[0] == 4 and batch["audio"].shape[1] <= 8000
        assert batch["audio"].dtype == torch.float32 and batch["labels"].dtype == torch.int64
