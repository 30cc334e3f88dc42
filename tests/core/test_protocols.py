"""The hooks between the core and a dataset (recipes/core/contracts/protocols.py, CONVENTIONS rule 20).

- Every hook the core reads goes through its protocol: no read of a hook by its name as a string.
- Each protocol says who calls it and what breaks without it.
- A hook declared with the wrong shape is a TypeError naming it, where the loader or mixture is built.
"""

import inspect
import re
from pathlib import Path

import pytest
import torch
from torch.utils.data import Dataset, IterableDataset

import recipes
from recipes.core import MixedDataset, MixedStream, build_loader, stream_loader
from recipes.core.contracts.errors import describe_sample
from recipes.core.contracts.protocols import HOOKS, LIBRARY_HOOKS, SHAPES, check_hooks

PACKAGE = Path(recipes.__file__).resolve().parent
HOOK_NAMES = sorted(SHAPES)


def test_the_hook_names_are_the_ones_the_reviewers_grep_for():
    assert HOOK_NAMES == sorted([
        "adopt_seed", "batch_contract", "check_state", "describe", "detached",
        "epoch_indices", "load_state_dict", "max_workers", "needs_persistent_workers",
        "rank", "read_paths", "state_dict", "state_source", "world_size",
    ])


def test_no_hook_is_read_by_its_name_as_a_string():
    # the state hooks are also a loader's and a sampler's, a rank a process group's: only the
    # dataset's own hooks are grepped for
    names = "|".join(name for name in HOOK_NAMES if "state_dict" not in name and name not in ("rank", "world_size"))
    bare = re.compile(rf"""(getattr|hasattr)\([^,()]+, *["']({names})["']""")
    found = [
        f"{path.relative_to(PACKAGE)}:{number}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if bare.search(line)
    ]
    assert not found, f"a hook read by its name as a string; use recipes.core.contracts.protocols: {found}"
    assert bare.search('getattr(dataset, "epoch_indices", None)')  # the check itself finds one


def test_no_library_hook_is_read_by_its_name_as_a_string_outside_the_command_line():
    # the command line may duck-type what it draws; the library reads its own hooks through their protocols
    names = "|".join(["belongs_to", "world_size", *(name for protocol in LIBRARY_HOOKS for name in _members(protocol))])
    bare = re.compile(rf"""(getattr|hasattr)\([^,()]+, *["']({names})["']""")
    found = [
        f"{path.relative_to(PACKAGE)}:{number}"
        for path in sorted(PACKAGE.rglob("*.py")) if "cli" not in path.relative_to(PACKAGE).parts
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if bare.search(line)
    ]
    assert not found, f"a hook read by its name as a string; use recipes.core.contracts.protocols: {found}"
    assert {"pad_id", "aspect_ratios", "draft_size", "draw_box"} <= set(names.split("|"))


def _members(protocol) -> list[str]:
    return [name for name in (*vars(protocol), *vars(protocol).get("__annotations__", {}))
            if not name.startswith("_") and name not in ("_is_protocol",)]


@pytest.mark.parametrize("protocol", HOOKS + LIBRARY_HOOKS, ids=lambda p: p.__name__)
def test_each_protocol_says_who_calls_it_and_what_breaks_without_it(protocol):
    doc = inspect.getdoc(protocol)
    assert re.search(r"\b(Called|Read) by\b|calls them", doc), protocol.__name__
    assert "Without" in doc, protocol.__name__
    assert getattr(recipes.core.hooks, protocol.__name__) is protocol  # public: recipes.core.hooks


class Lines(Dataset):
    """Six samples that describe themselves as lines of a file."""

    def __len__(self):
        return 6

    def __getitem__(self, index):
        return index

    def describe(self, index):
        return f"lines.txt line {index + 1}"


class NoIndex(Lines):
    def describe(self):  # forgot the index
        return "lines.txt"


class ConstantDraws(Lines):
    epoch_indices = [0, 1, 2]  # a list where a method (seed, epoch) -> indices is expected


class Fields(Lines):
    def batch_contract(self):
        return {"per_sample": "lengths"}  # a string, where a tuple of names is expected


class Contract(Lines):
    def batch_contract(self, pad_id):
        return {"pad_id": pad_id}


def _collate(batch):
    return torch.tensor(batch)


@pytest.mark.parametrize(
    ("dataset", "hook"),
    [(NoIndex(), "describe"), (ConstantDraws(), "epoch_indices"), (Fields(), "batch_contract"),
     (Contract(), "batch_contract")],
    ids=["describe without index", "epoch_indices not callable", "fields as a string", "contract with an argument"],
)
def test_a_hook_of_the_wrong_shape_is_refused_by_the_loader_and_the_mixture(dataset, hook):
    with pytest.raises(TypeError, match=rf"{type(dataset).__name__}\.{hook}"):
        build_loader(dataset, _collate, batch_size=2, train=True, device="cpu", num_workers=0)
    with pytest.raises(TypeError, match=rf"{type(dataset).__name__}\.{hook}"):
        MixedDataset([Lines(), dataset], [1, 1])


def test_a_wrong_hook_message_shows_the_shape_to_write():
    with pytest.raises(TypeError) as error:
        check_hooks(NoIndex())
    assert "NoIndex.describe() does not take the arguments the core passes" in str(error.value)
    assert "define it as describe(index) (recipes.core.contracts.protocols.Described)" in str(error.value)


def test_hooks_of_the_right_shape_pass_and_are_used():
    assert check_hooks(Lines()) is not None
    assert describe_sample(Lines(), 2) == "dataset index 2 (lines.txt line 3)"
    loader = build_loader(Lines(), _collate, batch_size=3, train=False, device="cpu", num_workers=0)
    assert [batch.tolist() for batch in loader] == [[0, 1, 2], [3, 4, 5]]


class Stream(IterableDataset):
    needs_persistent_workers = 1  # a flag where the protocol wants the reason, a string

    def __iter__(self):
        return iter(range(4))

    def state_dict(self):
        return {}

    def load_state_dict(self):  # no state argument
        pass


class QuietStream(Stream):
    needs_persistent_workers = None  # no reason: workers may restart


def test_a_stream_hook_of_the_wrong_shape_is_refused():
    with pytest.raises(TypeError, match=r"Stream\.needs_persistent_workers must be a string"):
        stream_loader(Stream(), _collate, 2, train=True, device="cpu", num_workers=0)
    with pytest.raises(TypeError, match=r"QuietStream\.load_state_dict\(\) does not take"):
        MixedStream([QuietStream()], [1], samples_per_epoch=4)


class Elsewhere(IterableDataset):
    rank, world_size = "0", 1  # a string, where the rank is an int

    def __iter__(self):
        return iter(range(4))

    def state_dict(self):
        return {}

    def load_state_dict(self, state):
        pass


def test_a_stream_placed_on_a_rank_that_is_not_an_int_is_refused():
    with pytest.raises(TypeError, match=r"Elsewhere\.rank must be an int \(RankPlaced\), got '0'"):
        MixedStream([Elsewhere()], [1], samples_per_epoch=4)
