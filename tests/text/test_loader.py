"""text_loader: length-grouped yet reshuffled epochs, token budgets, eval order, spawn (resume: test_resume.py)."""

import json
import re

import numpy as np
import pytest
import torch

from recipes.text import TokenizedTextDataset, pack_collate, text_loader


@pytest.fixture(scope="module")
def prose(tmp_path_factory, fixtures):
    """CPython's pydoc topics split into paragraphs: real prose with a long-tailed length."""
    from pydoc_data.topics import topics

    paragraphs = [p.strip() for topic in topics.values() for p in re.split(r"\n\s*\n", topic) if p.strip()]
    path = tmp_path_factory.mktemp("prose") / "paragraphs.jsonl"
    path.write_text("\n".join(json.dumps({"text": p}) for p in paragraphs), encoding="utf-8")
    return TokenizedTextDataset(path, fixtures / "text" / "tokenizer.json")


@pytest.fixture(scope="module")
def corpus(fixtures):
    return TokenizedTextDataset(fixtures / "text" / "labeled.jsonl", fixtures / "text" / "tokenizer.json", label_field="label")


def _waste(batches):
    return 1 - sum(int(b["attention_mask"].sum()) for b in batches) / sum(b["attention_mask"].numel() for b in batches)


def _sorted_floor(lengths, batch_size):
    ordered = np.sort(lengths)[::-1]
    cut = [ordered[i : i + batch_size] for i in range(0, len(ordered) - len(ordered) % batch_size, batch_size)]
    return 1 - sum(c.sum() for c in cut) / sum(len(c) * c.max() for c in cut)


def test_training_batches_pad_near_the_sorted_floor_yet_change_every_epoch(prose):
    loader = text_loader(prose, 16, device="cpu", seed=0, num_workers=0)
    epochs = [list(loader), list(loader)]
    floor = _sorted_floor(prose.lengths, 16)
    for batches in epochs:
        seen = [i for b in batches for i in b["index"].tolist()]
        assert len(seen) == len(set(seen)) == len(prose) - len(prose) % 16  # no repeats, only the remainder dropped
        assert _waste(batches) <= 1.5 * floor
    compositions = [{frozenset(b["index"].tolist()) for b in batches} for batches in epochs]
    assert len(compositions[0] & compositions[1]) < 0.2 * len(compositions[0])  # new batchmates, not just a new order
    random_batches = [torch.randperm(len(prose))[i : i + 16] for i in range(0, len(prose) - 15, 16)]
    random_waste = 1 - sum(prose.lengths[b].sum() for b in random_batches) / sum(16 * prose.lengths[b].max() for b in random_batches)
    assert _waste(epochs[0]) < random_waste / 4


def test_a_token_budget_of_2048_wastes_at_most_6_percent_and_keeps_every_sample(prose):
    loader = text_loader(prose, max_tokens=2048, device="cpu", seed=0, num_workers=0)
    batches = list(loader)
    assert all(b["input_ids"].numel() <= 2048 or len(b["index"]) == 1 for b in batches)
    assert sorted(i for b in batches for i in b["index"].tolist()) == list(range(len(prose)))
    assert _waste(batches) <= 0.06


def test_packed_batches_respect_the_token_budget(prose):
    loader = text_loader(prose, max_tokens=4096, collate_fn=pack_collate, device="cpu", seed=0, num_workers=0)
    for batch in loader:
        assert batch["input_ids"].shape[1] == int(batch["cu_seqlens"][-1]) <= 4096 or len(batch["index"]) == 1


def test_evaluation_keeps_dataset_order_and_every_sample(corpus):
    batches = list(text_loader(corpus, 16, train=False, device="cpu", num_workers=0))
    assert [i for b in batches for i in b["index"].tolist()] == list(range(len(corpus)))
    assert [i for b in batches for i in b["labels"].tolist()] == corpus.labels.tolist()


@pytest.mark.slow
def test_spawned_workers_get_the_same_batches_from_a_cached_dataset(fixtures, tmp_path, corpus):
    cached = TokenizedTextDataset(
        fixtures / "text" / "labeled.jsonl", fixtures / "text" / "tokenizer.json", label_field="label", cache_dir=tmp_path
    )
    spawned = text_loader(cached, 8, device="cpu", seed=1, num_workers=2, multiprocessing_context="spawn")
    inline = text_loader(corpus, 8, device="cpu", seed=1, num_workers=0)
    for a, b in zip(spawned, inline, strict=True):
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
