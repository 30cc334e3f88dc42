"""The text presets handed to the trainers by tests/trainer_runs.py (see tests/text/test_trainers.py)."""

from __future__ import annotations

from typing import Any

from recipes.text import StreamingTextDataset, TokenizedTextDataset, streaming_loader, text_loader

DATA, TOKENIZER = "fixtures/text/labeled.jsonl", "fixtures/text/tokenizer.json"


def lines(config: dict[str, Any], *, train: bool) -> Any:
    dataset = TokenizedTextDataset(DATA, TOKENIZER, label_field="label")
    return text_loader(dataset, 8, train=train, device="cpu", seed=0, stateful=True,
                       num_workers=config.get("workers", 0))


def stream(config: dict[str, Any], *, train: bool) -> Any:
    dataset = StreamingTextDataset(DATA, TOKENIZER, label_field="label", shuffle_buffer=16, seed=0)
    return streaming_loader(dataset, 8, train=train, device="cpu", seed=0, stateful=True,
                            num_workers=config.get("workers", 0))
