"""One composition (recipes.core.loading.loader.build_loader): a preset written as docs/adding-a-domain.md
shows, a few lines that pick a plan and a collate, gets every piece of a loader without naming it:
errors that name the sample, seeded augmentation, a mixture's draws, batches split across ranks,
batches packed in workers. The domain presets are written that way and name none of the pieces."""

from __future__ import annotations

import ast
import json
import os
import socket
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.multiprocessing as mp
from torch.utils.data import Dataset, IterableDataset, Subset

import recipes
from recipes.domains import REGISTRY
from recipes.core import ByLength, MixedDataset, build_loader, loader_kwargs
from recipes.core.contracts.errors import SampleError
from recipes.core.contracts.protocols import UsualCollate, chosen_collate, collate_of
from recipes.core.sampling.seeding import sample_seeds, seeded

PACKAGE = Path(recipes.__file__).resolve().parent


class Rows(Dataset):
    """Row i of ``rows.csv`` (a made-up file): its index, its length and a random augmentation;
    a ``broken`` row has no length."""

    def __init__(self, size: int, start: int = 0, broken: tuple[int, ...] = ()) -> None:
        self.lengths = np.array([(start + i) % 7 + 1 for i in range(size)])
        self.broken = broken

    def __len__(self) -> int:
        return len(self.lengths)

    def __getitem__(self, index: int) -> dict:
        length = None if index in self.broken else int(self.lengths[index])
        return {"index": index, "length": length, "noise": torch.rand(2)}

    def describe(self, index: int) -> str:
        return f"rows.csv line {index + 2}"  # a header line, then one row a sample

    def batch_contract(self) -> dict:
        return {"collate": "rows_collate", "per_sample": ("lengths",)}


@dataclass(frozen=True)
class RowsCollate:
    """A configured collate, a small object (CONVENTIONS rule 17)."""

    noise: bool = True

    def __call__(self, batch: list[dict]) -> dict:
        out = {
            "index": torch.tensor([item["index"] for item in batch]),
            "lengths": torch.tensor([item["length"] for item in batch]),
        }
        return out | ({"noise": torch.stack([item["noise"] for item in batch])} if self.noise else {})


def rows_loader(dataset, batch_size, *, train=True, device=None, seed=None, stateful=False, **overrides):
    """The preset, as a new domain writes it: pick the plan and the collate, call the composition."""
    plan = ByLength(dataset.lengths)
    return build_loader(dataset, RowsCollate(), batch_size=batch_size, plan=plan, train=train, device=device,
                        seed=seed, stateful=stateful, **overrides)


def test_a_failing_collate_names_the_rows_of_its_batch():
    loader = rows_loader(Rows(12, broken=(5,)), 4, train=False, device="cpu", num_workers=0)
    with pytest.raises(SampleError, match=r"indices \[4, 5, 6, 7\] \(rows\.csv line 6, rows\.csv line 7, .*collate_fn"):
        list(loader)


@pytest.mark.parametrize("workers", [0, 2])
def test_each_sample_is_augmented_under_its_own_seed_whatever_the_workers(workers):
    loader = rows_loader(Rows(24), 4, device="cpu", seed=3, num_workers=workers)
    for epoch in range(2):
        loader.batch_sampler.set_epoch(epoch)
        batches = list(loader)
        assert sorted(index for batch in batches for index in batch["index"].tolist()) == list(range(24))
        for batch in batches:
            seeds = sample_seeds(3, epoch, batch["index"].numpy())  # a plain dataset: a sample's place is its index
            for seed, noise in zip(seeds.tolist(), batch["noise"]):
                with seeded(seed):
                    assert torch.equal(noise, torch.rand(2))


def test_a_mixture_is_drawn_at_its_weights_and_batched_by_its_lengths():
    mixed = MixedDataset([Rows(6), Rows(10, start=3)], weights=[3, 1], samples_per_epoch=16)
    loader = rows_loader(mixed, 4, device="cpu", seed=0, num_workers=0)
    batches = list(loader)
    indices = [index for batch in batches for index in batch["index"].tolist()]
    assert Counter(mixed.locate(index)[0] for index in indices) == {0: 12, 1: 4}  # 16 * 3/4 and 16 * 1/4
    for batch in batches:
        assert torch.equal(batch["lengths"], torch.from_numpy(mixed.lengths[batch["index"].numpy()]))


def test_a_batch_crosses_from_a_worker_in_one_buffer_a_dtype():
    loader = rows_loader(Rows(8), 4, train=False, device="cpu", num_workers=1)
    batches = list(loader)
    assert [batch["index"].tolist() for batch in batches] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    for batch in batches:  # index and lengths (int64) share one shared-memory buffer
        assert batch["index"].untyped_storage().data_ptr() == batch["lengths"].untyped_storage().data_ptr()
    assert "RowsCollate(noise=True)" in repr(loader.collate_fn)


class AsksForItsCollate(Rows):
    """Rows whose items need a collate of their own: the contract's "collate" is the collate itself."""

    def __init__(self, size: int, noise: bool = False) -> None:
        super().__init__(size)
        self.noise = noise

    def batch_contract(self) -> dict:
        return {"collate": RowsCollate(noise=self.noise), "per_sample": ("lengths",)}


def test_a_dataset_asks_for_its_collate_through_a_subset_and_a_mixture():
    assert collate_of(AsksForItsCollate(4)) == RowsCollate(noise=False)
    assert collate_of(Subset(AsksForItsCollate(4), [0, 1])) == RowsCollate(noise=False)
    assert collate_of(Rows(4)) is None
    assert collate_of(MixedDataset([AsksForItsCollate(4), AsksForItsCollate(6)], [1, 1])) == RowsCollate(noise=False)
    assert collate_of(MixedDataset([Rows(4), Rows(6)], [1, 1])) is None
    with pytest.raises(ValueError, match=r"different collate functions \(RowsCollate\(noise=False\), Rows"):
        collate_of(MixedDataset([AsksForItsCollate(4), AsksForItsCollate(6, noise=True)], [1, 1]))


def test_the_collate_given_is_used_as_given_and_the_one_asked_for_is_the_default():
    usual = UsualCollate(lambda dataset: RowsCollate(noise=len(dataset) > 5))
    asks = build_loader(AsksForItsCollate(4), usual, batch_size=2, train=False, device="cpu", num_workers=0)
    assert asks.collate_fn.collate_fn.collate_fn == RowsCollate(noise=False)  # NamedCollate(packed(...))
    plain = build_loader(Rows(6), usual, batch_size=2, train=False, device="cpu", num_workers=0)
    assert plain.collate_fn.collate_fn.collate_fn == RowsCollate(noise=True)  # the usual one, built for the rows
    given = build_loader(AsksForItsCollate(4), RowsCollate(), batch_size=2, train=False, device="cpu", num_workers=0)
    assert given.collate_fn.collate_fn.collate_fn == RowsCollate(noise=True)  # as given, over the asked one
    assert chosen_collate(Rows(2), None) is torch.utils.data.default_collate


class CountsItsChecks(Rows):
    """Rows whose ``read_paths`` hook counts its reads: only check_hooks reads it while a loader is built."""

    checks = 0

    @property
    def read_paths(self):
        type(self).checks += 1
        return lambda: ["rows.csv"]


def test_a_loader_build_checks_the_hooks_once():
    mixed = MixedDataset([AsksForItsCollate(4), AsksForItsCollate(6)], [1, 1])
    CountsItsChecks.checks = 0
    build_loader(CountsItsChecks(6), RowsCollate(), batch_size=2, train=True, device="cpu", num_workers=0)
    assert CountsItsChecks.checks == 1
    for collate in (None, UsualCollate.of(RowsCollate())):  # the asked-for collate is read after the one check
        CountsItsChecks.checks = 0
        build_loader(CountsItsChecks(6), collate, batch_size=2, plan=ByLength(np.arange(6)), train=True, device="cpu",
                     num_workers=0)
        assert CountsItsChecks.checks == 1
    assert build_loader(mixed, None, batch_size=2, train=True, device="cpu", num_workers=0) is not None


def test_a_mixture_given_a_plan_that_draws_its_own_epochs_is_refused_naming_both():
    mixed = MixedDataset([Rows(6), Rows(10, start=3)], weights=[3, 1], samples_per_epoch=16)
    plan = ByLength(mixed.lengths, draws=lambda seed, epoch: np.arange(16))
    with pytest.raises(ValueError, match=r"MixedDataset draws its own epochs .* plan ByLength\(.*drawn\) was given draws="):
        build_loader(mixed, RowsCollate(), batch_size=4, plan=plan, train=True, device="cpu", num_workers=0)
    build_loader(Rows(16), RowsCollate(), batch_size=4, plan=ByLength(np.arange(16) % 7, draws=plan.draws),
                 train=True, device="cpu", num_workers=0)  # a plain dataset: the plan's draws are the only ones


@dataclass(frozen=True)
class Counted:
    """A collate a test can recognise: how many items, and which marks it."""

    mark: str

    def __call__(self, batch: list) -> dict:
        return {"mark": self.mark, "items": len(batch)}


class Asking(Dataset):
    """A domain's dataset that asks for a collate of its own (its contract's "collate"); anything else is the dataset's."""

    def __init__(self, dataset) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index):
        return self.dataset[index]

    def __getattr__(self, name):
        return getattr(self.__dict__["dataset"], name)

    def batch_contract(self) -> dict:
        contract = self.dataset.batch_contract() if hasattr(self.dataset, "batch_contract") else {}
        return {**contract, "collate": Counted("asked")}


@pytest.mark.parametrize("entry", REGISTRY, ids=lambda entry: entry.nickname)
def test_every_preset_uses_the_collate_given_and_by_default_the_one_the_dataset_asks_for(entry, fixtures):
    try:
        dataset, _ = entry.load("demo")(fixtures)
    except ImportError as error:  # a library the domain needs at run time is missing (FFmpeg's)
        pytest.skip(str(error))
    preset = entry.load("loader")
    options = {"train": False, "device": "cpu", "num_workers": 0}
    assert next(iter(preset(dataset, 2, collate_fn=Counted("given"), **options))) == {"mark": "given", "items": 2}
    assert next(iter(preset(Asking(dataset), 2, **options))) == {"mark": "asked", "items": 2}
    assert next(iter(preset(Asking(dataset), 2, collate_fn=Counted("given"), **options)))["mark"] == "given"


class ShardsForOneWorker(IterableDataset):
    """A stream whose workers each read whole shards, enough for one worker (ShardLimited)."""

    def __iter__(self):
        return iter(range(4))

    def max_workers(self) -> int:
        return 1


def test_a_stream_of_whole_shards_gets_no_more_workers_than_it_can_feed(monkeypatch):
    monkeypatch.setattr("recipes.core.loading.loader.usable_cpus", lambda: 16)  # a machine where the preset starts 8
    assert loader_kwargs("cpu", train=True)["num_workers"] == 8
    assert rows_loader_for(ShardsForOneWorker()).num_workers == 1
    assert rows_loader_for(ShardsForOneWorker(), num_workers=2).num_workers == 2  # what the caller asks for wins


def rows_loader_for(stream, **overrides):
    return build_loader(stream, RowsCollate(), batch_size=2, train=True, device="cpu", **overrides)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _rank(rank: int, world_size: int, port: int, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.distributed.init_process_group("gloo", rank=rank, world_size=world_size)
    try:
        report = {}
        for train in (True, False):
            loader = rows_loader(Rows(22), 4, train=train, device="cpu", seed=1, num_workers=0)
            report[str(train)] = [batch["index"].tolist() for batch in loader]
        Path(out, f"rank{rank}.json").write_text(json.dumps(report))
    finally:
        torch.distributed.destroy_process_group()


@pytest.mark.slow
def test_the_ranks_of_a_process_group_split_the_batches(tmp_path):
    mp.start_processes(_rank, args=(2, _free_port(), str(tmp_path)), nprocs=2, start_method="spawn")
    ranks = [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in range(2)]
    alone = {str(train): [b["index"].tolist() for b in rows_loader(Rows(22), 4, train=train, device="cpu", seed=1,
                                                                    num_workers=0)] for train in (True, False)}
    # training: equal batch counts, and rank r takes every second batch of the one-process order
    assert len(ranks[0]["True"]) == len(ranks[1]["True"]) == 2
    assert ranks[0]["True"] + ranks[1]["True"] == alone["True"][0::2][:2] + alone["True"][1::2][:2]
    # evaluation: every sample exactly once across the ranks
    assert sorted(i for rank in ranks for batch in rank["False"] for i in batch) == list(range(22))


# what build_loader composes: a domain that names one of these composes its loader by hand
PIECES = {"SeededBatchSampler", "GroupedBatchSampler", "SeededDataset", "NamedCollate", "packed_in_workers",
          "preset_kwargs", "draws_of", "RecipeLoader", "ResumableLoader", "stream_loader"}


def test_every_domain_preset_calls_the_one_composition_and_names_none_of_its_pieces():
    domains = sorted(path.parent for path in PACKAGE.glob("*/__init__.py") if path.parent.name not in ("core", "cli"))
    assert len(domains) >= 5
    found, composed = [], []
    for path in sorted(p for domain in domains for p in domain.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
        names |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for alias in node.names}
        found += [f"{path.relative_to(PACKAGE)}: {name}" for name in sorted(names & PIECES)]
        for function in ast.walk(tree):
            if isinstance(function, ast.FunctionDef) and function.name.endswith("_loader"):
                calls = {node.func.id for node in ast.walk(function) if isinstance(node, ast.Call)
                         and isinstance(node.func, ast.Name)}
                composed.append((function.name, "build_loader" in calls))
    assert not found, f"compose the loader with recipes.core.loading.loader.build_loader instead: {found}"
    assert len(composed) >= 6 and all(calls for _, calls in composed), composed


if __name__ == "__main__":
    sys.exit(pytest.main([__file__]))
