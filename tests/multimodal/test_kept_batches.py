"""A batch the caller keeps is never written over: raw batches, numpy views and outputs, over epochs."""

import json

import pytest
from torchvision.transforms import v2

from recipes.multimodal import ImageTextDataset, multimodal_loader
from tests.harness import KEEPERS, check_kept_batches_intact
from tests.photos import photo


@pytest.mark.parametrize("keep", KEEPERS)
def test_kept_batches_stay_bit_identical_over_three_epochs(tmp_path, fixtures, keep):
    rows = []
    for k in range(48):
        photo(40, 30, seed=k).save(tmp_path / f"{k}.jpg", quality=90)
        rows.append({"image": f"{k}.jpg", "captions": [f"picture number {k}", f"another view of {k}"]})
    (tmp_path / "pairs.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    transform = v2.Compose([v2.RandomResizedCrop(24, antialias=True), v2.RandomHorizontalFlip()])
    dataset = ImageTextDataset(tmp_path / "pairs.jsonl", fixtures / "text" / "tokenizer.json", transform=transform)
    loader = multimodal_loader(dataset, 4, device="cpu", seed=0, num_workers=2)  # 12 batches an epoch
    check_kept_batches_intact(loader, keep, images=lambda batch: batch["pixel_values"])
