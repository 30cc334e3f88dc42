"""The text presets handed to the trainers by tests/trainer_runs.py (see tests/text/test_trainers.py)."""

from __future__ import annotations

from typing import Any

from recipes.text import StreamingTextDataset, TokenizedTextDataset, streaming_loader, text_collate, text_loader
from recipes.core.sampling.stream_order import StreamOrder

DATA, TOKENIZER = "fixtures/text/labeled.jsonl", "fixtures/text/tokenizer.json"


def lines(config: dict[str, Any], *, train: bool) -> Any:
    dataset = TokenizedTextDataset(DATA, TOKENIZER, label_field="label", max_length=config.get("max_length"))
    return text_loader(dataset, 8, train=train, device="cpu", seed=0, stateful=True,
                       num_workers=config.get("workers", 0))


class NextTokenCollate:
    """``text_collate`` plus the labels a causal LM takes: the ids, padding masked with -100."""

    def __init__(self, pad_id: int) -> None:
        self.pad_id = pad_id

    def __call__(self, items: list[dict[str, Any]]) -> dict[str, Any]:
        batch = text_collate(items, pad_id=self.pad_id)
        return batch | {"labels": batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)}


def next_tokens(config: dict[str, Any], *, train: bool) -> Any:
    dataset = TokenizedTextDataset(DATA, TOKENIZER, max_length=config.get("max_length"))
    return text_loader(dataset, 8, train=train, device="cpu", seed=0, num_workers=config.get("workers", 0),
                       collate_fn=NextTokenCollate(dataset.pad_id))


def stream(config: dict[str, Any], *, train: bool) -> Any:
    dataset = StreamingTextDataset(DATA, TOKENIZER, label_field="label", max_length=config.get("max_length"),
                                   order=StreamOrder(shuffle_buffer=16, seed=0))
    return streaming_loader(dataset, 8, train=train, device="cpu", seed=0, stateful=True,
                            num_workers=config.get("workers", 0))
