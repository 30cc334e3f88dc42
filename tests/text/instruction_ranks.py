"""One rank's view of text_loader over an InstructionDataset, run by torchrun or alone.

    python -m torch.distributed.run --standalone --nproc_per_node=2 -m tests.text.instruction_ranks OUT CONFIG

Run alone (no process group) the same ``report`` is the single-process reference
(tests/text/test_instruction_ranks.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from recipes.text import InstructionDataset, text_loader
from tests.harness import rank_main, sample_passes, train_passes


def build(fixtures: Path, folder: Path) -> dict[str, Any]:
    chat = fixtures / "text" / "chat"
    return {"data": str(chat / "chat.jsonl"), "tokenizer": str(chat / "tokenizer.json"),
            "template": str(chat / "llama3" / "tokenizer_config.json")}


def _samples(batch: dict) -> list[tuple[int, Any]]:
    rows = zip(batch["index"].tolist(), batch["input_ids"], batch["labels"], batch["lengths"].tolist())
    return [(index, (ids[:length], labels[:length])) for index, ids, labels, length in rows]


def report(config: dict[str, Any]) -> dict[str, Any]:
    dataset = InstructionDataset(config["data"], config["tokenizer"], template=config["template"])

    def ids(batch: dict) -> list[int]:
        return batch["index"].tolist()

    return {
        "train": train_passes(text_loader(dataset, 3, device="cpu", seed=3, num_workers=2), ids),
        "eval": sample_passes(text_loader(dataset, 4, train=False, device="cpu", num_workers=0), _samples)[0],
    }


if __name__ == "__main__":
    rank_main(report)
