"""One rank of an elastic resume, run by torchrun (tests/core/test_elastic.py) or alone.

    python -m torch.distributed.run --standalone --nproc_per_node=2 -m tests.core.elastic OUT CONFIG

A mixture of two tokenised .jsonl files (one small, up-weighted) through ``text_loader`` with
length grouping, two ways: ``num_workers`` 0 and 2. ``config["phase"]``:

- ``"save"``: take ``steps`` batches of epoch 0, report them and the loader state;
- ``"load"``: load the state saved on another world size, with the same worker count and with
  the other one (0 <-> 2), and report the rest of the epoch and the whole next one.

Run alone (no process group) the same code is the single-process reference of both epochs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from recipes.core import MixedDataset
from recipes.text import TokenizedTextDataset, text_loader
from tests.harness import rank_main

WORKERS = (0, 2)


def build(fixtures: Path, folder: Path) -> dict[str, Any]:
    """``small.jsonl`` (13 lines) and ``big.jsonl`` (97 lines), labelled by source."""
    lines = [line for line in (fixtures / "text" / "corpus.txt").read_text(encoding="utf-8").splitlines() if line]
    for name, size in (("small", 13), ("big", 97)):
        rows = [json.dumps({"text": lines[(i * 7) % len(lines)], "label": i}) + "\n" for i in range(size)]
        (folder / f"{name}.jsonl").write_text("".join(rows), encoding="utf-8")
    return {"folder": str(folder), "tokenizer": str(fixtures / "text" / "tokenizer.json"), "steps": 3}


def mixture(config: dict[str, Any]) -> MixedDataset:
    folder = Path(config["folder"])
    sources = [TokenizedTextDataset(folder / f"{name}.jsonl", config["tokenizer"]) for name in ("small", "big")]
    return MixedDataset(sources, [2, 1], samples_per_epoch=148)  # 99 draws of 13 lines, 49 of 97: 37 batches


def loader(config: dict[str, Any], workers: int) -> Any:
    return text_loader(mixture(config), 4, device="cpu", seed=11, stateful=True, num_workers=workers)


def indices(batch: dict) -> list[int]:
    return batch["index"].tolist()


def report(config: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for workers in WORKERS:
        if config["phase"] == "single":
            run = loader(config, workers)
            out[f"workers{workers}"] = {"epochs": [[indices(b) for b in run] for _ in range(2)]}
        elif config["phase"] == "save":
            run = loader(config, workers)
            batches = iter(run)
            taken = [indices(next(batches)) for _ in range(config["steps"])]
            out[f"workers{workers}"] = {"taken": taken, "state": run.state_dict()}
            del batches
        else:
            out[f"workers{workers}"] = {}
            for resumed_workers in (workers, 2 - workers):  # the same worker count, and the other one
                run = loader(config, resumed_workers)
                run.load_state_dict(config["states"][f"workers{workers}"])
                rest, following = [indices(b) for b in run], [indices(b) for b in run]
                out[f"workers{workers}"][f"to{resumed_workers}"] = {"rest": rest, "next": following}
    return out


if __name__ == "__main__":
    rank_main(report)
