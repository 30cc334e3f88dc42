"""The domain as the command line runs it: ``recipes demo text`` (the labelled JSONL fixture,
tokenised, in length-grouped batches) and the file ``recipes bench/show text PATH`` open.

    from recipes.text.demo import build
    dataset, loader = build(fixtures_dir())
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch.utils.data import DataLoader

from recipes.core import storage
from recipes.text.tokenized import TokenizedTextDataset, text_loader


def build(fixtures: Path) -> tuple[TokenizedTextDataset, DataLoader]:
    """A TokenizedTextDataset over ``text/labeled.jsonl`` (ids cut to 128) and a seeded CPU
    training loader of length-grouped batches of 16."""
    dataset = TokenizedTextDataset(
        fixtures / "text" / "labeled.jsonl", fixtures / "text" / "tokenizer.json", label_field="label", max_length=128
    )
    return dataset, text_loader(dataset, 16, device="cpu", seed=0, num_workers=0)


def open_path(options: Any, *, train: bool) -> TokenizedTextDataset:
    """The text file at ``options.path`` (the CLI's ``DataOptions``), read with its tokenizer,
    fields, ``max_length`` and ``on_error``; ``train`` changes nothing here (the loader shuffles)."""
    return TokenizedTextDataset(
        options.path, options.tokenizer_path(), text_field=options.text_field,
        label_field=options.label_field, max_length=options.max_length, on_error=options.on_error,
    )


def prepare_path(source: Path, dest: Path, *, tokenizer: Path | None = None, max_length: int | None = None,
                 text_field: str = "text", label_field: str | None = None, **run: Any) -> tuple[Any, str]:
    """``recipes prepare text CORPUS DEST --tokenizer T``: :func:`recipes.text.prepare`, and how to read what it wrote."""
    from recipes.text.prepare_ids import prepare

    if tokenizer is None:
        raise ValueError("text needs --tokenizer FILE: the tokenizer.json that makes the ids")
    summary = prepare(source, dest, tokenizer, max_length=max_length, text_field=text_field, label_field=label_field,
                      **run)
    labels = "" if label_field is None else ", label_field='label'"
    shards, tokenizer_file = str(storage.join(dest, "shard-*.parquet")), str(storage.join(dest, "tokenizer.json"))
    return summary, f"recipes.text.TokenizedTextDataset.from_ids({shards!r}, {tokenizer_file!r}{labels})"
