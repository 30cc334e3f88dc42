"""``python -m recipes demo text``: the labelled JSONL fixture, tokenised, in length-grouped batches.

    from recipes.text.demo import build
    dataset, loader = build(fixtures_dir())
"""

from __future__ import annotations

from pathlib import Path

from torch.utils.data import DataLoader

from recipes.text.tokenized import TokenizedTextDataset, text_loader


def build(fixtures: Path) -> tuple[TokenizedTextDataset, DataLoader]:
    """A TokenizedTextDataset over ``text/labeled.jsonl`` (ids cut to 128) and a seeded CPU
    training loader of length-grouped batches of 16."""
    dataset = TokenizedTextDataset(
        fixtures / "text" / "labeled.jsonl", fixtures / "text" / "tokenizer.json", label_field="label", max_length=128
    )
    return dataset, text_loader(dataset, 16, device="cpu", seed=0, num_workers=0)
