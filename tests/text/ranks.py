"""One rank's view of the text loaders, run by torchrun (tests/text/test_ranks.py) or alone.

    python -m torch.distributed.run --standalone --nproc_per_node=3 -m tests.text.ranks OUT CONFIG

Run alone (no process group) the same ``report`` is the single-process reference.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from recipes.core import MixedStream
from recipes.text import StreamingTextDataset, TokenizedTextDataset, streaming_loader, text_loader
from recipes.core.sampling.stream_order import StreamOrder
from tests.harness import rank_main, sample_passes, train_passes

MIXED_PER_EPOCH, MIXED_EPOCHS = 50, 6  # 25 draws of each source an epoch: its 60 or 43 lines take 2 or 3 epochs


def build(fixtures: Path, folder: Path, size: int = 103) -> dict[str, Any]:
    """``size`` labelled corpus lines as one .jsonl (map-style) and as two .jsonl shards (streaming)."""
    lines = [line for line in (fixtures / "text" / "corpus.txt").read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = [json.dumps({"text": lines[i % len(lines)], "label": i % 3}) + "\n" for i in range(size)]
    (folder / "all.jsonl").write_text("".join(rows), encoding="utf-8")
    (folder / "a.jsonl").write_text("".join(rows[:60]), encoding="utf-8")
    (folder / "b.jsonl").write_text("".join(rows[60:]), encoding="utf-8")
    for label, (name, part) in enumerate([("mix_a.jsonl", rows[:60]), ("mix_b.jsonl", rows[60:])]):
        # a mixture's sources: the label says which source a line came from, the offset which line
        part = [json.dumps({**json.loads(row), "label": label}) + "\n" for row in part]
        (folder / name).write_text("".join(part), encoding="utf-8")
    return {
        "data": str(folder / "all.jsonl"),
        "shards": [str(folder / "a.jsonl"), str(folder / "b.jsonl")],
        "mixed": [str(folder / "mix_a.jsonl"), str(folder / "mix_b.jsonl")],
        "tokenizer": str(fixtures / "text" / "tokenizer.json"),
    }


def _samples(batch: dict) -> list[tuple[int, Any]]:
    """Each row's unpadded ids and label: batches cut differently still compare sample by sample."""
    rows = zip(batch["index"].tolist(), batch["input_ids"], batch["lengths"].tolist(), batch["labels"].tolist())
    return [(index, (ids[:length], label)) for index, ids, length, label in rows]


def _sourced(batch: dict) -> list[tuple[list[int], Any]]:
    """A mixture's rows as ``[source (the label), byte offset]`` and unpadded ids."""
    rows = zip(batch["labels"].tolist(), batch["index"].tolist(), batch["input_ids"], batch["lengths"].tolist())
    return [([label, index], ids[:length]) for label, index, ids, length in rows]


def report(config: dict[str, Any]) -> dict[str, Any]:
    dataset = TokenizedTextDataset(config["data"], config["tokenizer"], label_field="label")

    def ids(batch: dict) -> list[int]:
        return batch["index"].tolist()

    def stream(seed: int | None) -> StreamingTextDataset:
        return StreamingTextDataset(config["shards"], config["tokenizer"], label_field="label",
                                    order=StreamOrder(shuffle_buffer=8, seed=seed))

    def mixed() -> MixedStream:
        sources = [StreamingTextDataset(path, config["tokenizer"], label_field="label",
                                        order=StreamOrder(shuffle_buffer=8, seed=k))
                   for k, path in enumerate(config["mixed"])]
        return MixedStream(sources, [1, 1], samples_per_epoch=MIXED_PER_EPOCH, seed=6)

    return {
        "train": train_passes(text_loader(dataset, 4, device="cpu", seed=3, num_workers=2), ids),
        "budget": train_passes(text_loader(dataset, max_tokens=96, device="cpu", seed=3, num_workers=0), ids),
        "eval": sample_passes(text_loader(dataset, 8, train=False, device="cpu", num_workers=0), _samples)[0],
        "stream": sample_passes(streaming_loader(stream(1), 4, train=False, device="cpu", num_workers=2), _samples, 2),
        "stream_train": sample_passes(streaming_loader(stream(1), 4, device="cpu", num_workers=2), _samples, 2),
        "mixed_train": sample_passes(streaming_loader(mixed(), 4, device="cpu", num_workers=2), _sourced, MIXED_EPOCHS),
        "drawn_seed": [text_loader(dataset, 4, device="cpu", num_workers=0).batch_sampler.seed, stream(None).seed],
    }


if __name__ == "__main__":
    rank_main(report)
