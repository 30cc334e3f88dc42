"""MixedStream over two StreamingTextDatasets: exact shares per reader, items equal to the
sources' own, determinism, a small source cycling, and an exact resume with 0 and 2 workers."""

import json
from collections import Counter

import pytest
from torch.utils.data import DataLoader

from recipes.core import MixedStream
from recipes.text import StreamingTextDataset, streaming_loader
from recipes.core.sampling.stream_order import StreamOrder
from tests.harness import check_resume, mutated_state, mutation_cases
from tests.loader_errors import loader_error

EPOCH = 96  # samples an epoch: 3 parts of the small source to 1 of the big one


@pytest.fixture(scope="module")
def files(tmp_path_factory, fixtures):
    """``small.txt``: 20 lines that all start "This"; ``big.jsonl``: 200 lines that start "The"."""
    folder = tmp_path_factory.mktemp("mixed")
    corpus = [line for line in (fixtures / "text" / "corpus.txt").read_text(encoding="utf-8").split("\n") if line]
    (folder / "small.txt").write_text("".join(f"This {line}\n" for line in corpus[:20]), encoding="utf-8")
    rows = [json.dumps({"text": f"The {line}"}) + "\n" for line in (corpus * 9)[:200]]
    (folder / "big.jsonl").write_text("".join(rows), encoding="utf-8")
    return folder


def _mixture(files, tokenizer, **options):
    small = StreamingTextDataset(files / "small.txt", tokenizer, order=StreamOrder(shuffle_buffer=8, seed=1), **options)
    big = StreamingTextDataset(files / "big.jsonl", tokenizer, order=StreamOrder(shuffle_buffer=8, seed=2), **options)
    return MixedStream([small, big], [3, 1], samples_per_epoch=EPOCH, seed=5)


def test_each_epoch_draws_the_exact_shares_and_the_small_source_cycles(files, tokenizer):
    mixture = _mixture(files, tokenizer)
    this = tokenizer.encode("This").ids[1]  # after [CLS]
    small_lines = []
    for _ in range(3):
        items = list(mixture)
        sources = Counter("small" if item["input_ids"][1] == this else "big" for item in items)
        assert sources == {"small": 72, "big": 24}
        small_lines += [item["index"] for item in items if item["input_ids"][1] == this]
    counts = Counter(small_lines)  # 216 draws of 20 lines: the small source starts a new pass as it runs out
    assert len(counts) == 20 and max(counts.values()) - min(counts.values()) <= 1


def test_items_are_the_sources_own_and_the_order_is_deterministic(files, tokenizer):
    first, again = list(_mixture(files, tokenizer)), list(_mixture(files, tokenizer))
    assert [item["index"] for item in first] == [item["index"] for item in again]
    lines = (files / "small.txt").read_bytes()
    this = tokenizer.encode("This").ids[1]  # after [CLS]
    for item in first:
        if item["input_ids"][1] == this:
            text = lines[item["index"] :].split(b"\n", 1)[0].decode()
            assert item["input_ids"].tolist() == tokenizer.encode(text).ids


def test_streams_of_other_ranks_or_without_state_are_refused(files, tokenizer):
    small = StreamingTextDataset(files / "small.txt", tokenizer, order=StreamOrder(rank=0, world_size=2))
    big = StreamingTextDataset(files / "big.jsonl", tokenizer, order=StreamOrder(rank=1, world_size=2))
    with pytest.raises(ValueError, match="different ranks"):
        MixedStream([small, big], [1, 1], samples_per_epoch=10)


def _make(files, tokenizer, workers):
    return streaming_loader(_mixture(files, tokenizer), 8, device="cpu", seed=3, stateful=True, num_workers=workers)


@pytest.fixture(scope="module")
def references(files, tokenizer):
    loaders = {workers: _make(files, tokenizer, workers) for workers in (0, 2)}
    return {workers: [list(loader) for _ in range(3)] for workers, loader in loaders.items()}


@pytest.mark.parametrize("workers", [0, 2], ids=["workers0", "workers2"])
@pytest.mark.parametrize("stop", ["1", "mid", "finished", "next-epoch+1", "resumed-twice"])
def test_a_resumed_mixture_yields_exactly_the_batches_still_to_come(files, tokenizer, references, workers, stop):
    reference = references[workers]
    assert len(reference[0]) == EPOCH // 8
    check_resume(lambda: _make(files, tokenizer, workers), stop, len(reference[0]), reference)


def test_a_mixture_read_here_still_goes_to_spawned_workers(files, tokenizer):
    mixture = _mixture(files, tokenizer)
    next(iter(mixture))  # a running pass of a source: a generator, which does not pickle
    loader = streaming_loader(mixture, 8, device="cpu", seed=3, num_workers=2, multiprocessing_context="spawn")
    assert sum(len(batch["input_ids"]) for batch in loader) == EPOCH


def test_a_mixture_refuses_other_workers_with_the_reason(files, tokenizer):
    loader = _make(files, tokenizer, 2)
    list(loader)  # a whole pass: the sources' own passes go on into the next epoch
    resumed = _make(files, tokenizer, 0)
    resumed.load_state_dict(loader.state_dict())
    with pytest.raises(ValueError, match="middle of a pass read by 2 readers .* resumed with 1"):
        for _ in range(2):
            list(resumed)


def test_workers_carry_the_sources_across_epochs_and_fresh_ones_are_refused(files, tokenizer):
    this = tokenizer.encode("This").ids[1]  # after [CLS]
    loader = streaming_loader(_mixture(files, tokenizer), 8, device="cpu", seed=3, num_workers=2)
    big = [int(i) for _ in range(3) for batch in loader for row, i in zip(batch["input_ids"], batch["index"])
           if row[1] != this]
    assert len(big) == 72 and len(set(big)) == 72  # 200 lines: each epoch reads on, none twice
    with pytest.raises(ValueError, match="needs persistent_workers=True"):
        streaming_loader(_mixture(files, tokenizer), 8, device="cpu", num_workers=2, persistent_workers=False)
    mixture = _mixture(files, tokenizer)
    plain = DataLoader(mixture, batch_size=None, num_workers=2)  # fresh workers every epoch
    assert len(list(plain)) == EPOCH
    mixture.set_epoch(1)  # would start every source over: the big one would repeat its first lines
    loader_error(plain, ValueError, match="starts epoch 1, but its sources stand at the start of epoch 0")
    with pytest.raises(ValueError, match="persistent_workers=True"):
        iter(mixture)  # in this process too: nothing ran here


MIXTURE_FIELDS = ["seed", "epoch", "slots", "position", "position.0", "position.1", "position.2", "sources",
                  "sources.0", "sources.1.epoch", "sources.1.position.1", "sources.1.source"]


@pytest.fixture(scope="module")
def mixture_mid_pass(files, tokenizer):
    mixture = _mixture(files, tokenizer)
    items = iter(mixture)
    for _ in range(10):
        next(items)
    return mixture.state_dict(), [item["input_ids"].tolist() for item in items]


def test_a_checked_mixture_state_still_resumes_exactly(files, tokenizer, mixture_mid_pass):
    state, rest = mixture_mid_pass
    resumed = _mixture(files, tokenizer)
    resumed.load_state_dict(json.loads(json.dumps(state)))
    assert [item["input_ids"].tolist() for item in resumed] == rest


@pytest.mark.parametrize(
    ("field", "kind"),
    mutation_cases(MIXTURE_FIELDS, {("seed", "negative"), ("seed", "too-large"), ("epoch", "too-large"),
                                    ("sources.1.epoch", "too-large"), ("sources.1.source", "missing")}),
)
def test_every_field_of_a_loaded_mixture_state_is_checked_and_a_refusal_changes_nothing(
    files, tokenizer, mixture_mid_pass, field, kind
):
    mixture = _mixture(files, tokenizer)
    before = mixture.state_dict()
    with pytest.raises(ValueError, match="MixedStream state"):
        mixture.load_state_dict(mutated_state(mixture_mid_pass[0], field, kind))
        next(iter(mixture))
    assert mixture.state_dict() == before
