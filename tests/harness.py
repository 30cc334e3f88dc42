"""Shared machinery for the reliability tests of every domain (not a test module itself).

    reports = torchrun("tests.vision.ranks", 3, tmp_path, config)  # real processes, gloo on CPU
    check_train_ranks([r["train"] for r in reports], ranks.report(config)["train"])
    check_resume(make, "mid", epoch_batches=9, reference=three_epochs)

- ``torchrun`` launches ``python -m torch.distributed.run --standalone`` on a module whose
  ``__main__`` calls :func:`rank_main`; every rank writes a JSON report, returned in rank order.
- ``digest`` fingerprints a batch (dtypes, shapes, bytes, tv_tensor metadata), so batches made in
  different processes can be compared bit for bit.
- ``check_resume`` is torchdata's own ``test_state_dict.py`` recipe, applied to a loader factory:
  take ``k`` batches, ``state_dict()``, keep iterating, then a fresh loader given that state must
  yield exactly what the interrupted one still had to give (and the epoch after it).
- ``check_train_ranks`` / ``check_eval_ranks`` / ``check_stream_ranks`` state the rank contracts
  once, for all domains; ``rank_fixtures`` and ``resume_suite`` give each domain's test module
  its fixtures and tests from a ``ranks`` module or a ``make_loader`` fixture.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from recipes.domains import DOMAINS, REGISTRY

ROOT = Path(__file__).resolve().parents[1]

# -- torchrun --------------------------------------------------------------------------------------


def torchrun(module: str, world_size: int, out: Path, config: dict[str, Any], timeout: int = 300) -> list[dict]:
    """Run ``python -m module OUT CONFIG`` on ``world_size`` gloo ranks; return each rank's report."""
    out.mkdir(parents=True, exist_ok=True)
    config_file = out / "config.json"
    config_file.write_text(json.dumps(config))
    command = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={world_size}",
        "-m", module, str(out), str(config_file),
    ]
    # one thread each: the ranks and their loader workers share a few cores
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    return [json.loads((out / f"rank{rank}.json").read_text()) for rank in range(world_size)]


def rank_main(report: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    """The ``__main__`` of a module run by :func:`torchrun`: ``report(config)`` -> OUT/rank<r>.json."""
    import torch.distributed as dist

    out, config = Path(sys.argv[1]), json.loads(Path(sys.argv[2]).read_text())
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    try:
        result = report(config)
        result["rank"], result["world_size"] = dist.get_rank(), dist.get_world_size()
        (out / f"rank{dist.get_rank()}.json").write_text(json.dumps(result))
        dist.barrier()
    finally:
        dist.destroy_process_group()


# -- comparing batches -----------------------------------------------------------------------------


def _feed(value: Any, sha: Any) -> None:
    if isinstance(value, torch.Tensor):
        meta = {k: v for k, v in vars(value).items() if not k.startswith("_")}  # canvas_size, format
        sha.update(f"T{type(value).__name__}{value.dtype}{tuple(value.shape)}{sorted(meta.items())!r}".encode())
        sha.update(value.detach().contiguous().view(-1).view(torch.uint8).numpy().tobytes() if value.numel() else b"")
    elif isinstance(value, dict):
        sha.update(f"D{len(value)}".encode())
        for key, item in value.items():
            sha.update(repr(key).encode())
            _feed(item, sha)
    elif isinstance(value, (list, tuple)):
        sha.update(f"L{type(value).__name__}{len(value)}".encode())
        for item in value:
            _feed(item, sha)
    else:
        sha.update(f"V{value!r}".encode())


def digest(value: Any) -> str:
    """A fingerprint of nested tensors / dicts / lists: equal iff bit-identical (same dtypes too)."""
    sha = hashlib.sha1()
    _feed(value, sha)
    return sha.hexdigest()


def assert_same_batches(got: list[Any], expected: list[Any]) -> None:
    """Batch for batch, tensor for tensor: same structure, classes, dtypes, metadata and bits."""
    assert len(got) == len(expected), f"{len(got)} batches instead of {len(expected)}"
    for position, (a, b) in enumerate(zip(got, expected)):
        assert digest(a) == digest(b), f"batch {position} differs"


# -- exact resume (torchdata's test_state_dict.py, on a loader factory) ------------------------------

STOPS = ("before-iter", "0", "1", "mid", "last", "finished", "next-epoch+1", "resumed-twice")


def check_resume(make: Callable[[], Any], stop: str, epoch_batches: int, reference: list[list[Any]]) -> None:
    """Interrupt a fresh ``make()`` loader at ``stop``, resume another from its state, compare.

    ``reference`` holds three uninterrupted epochs. Stops: ``before-iter`` (state of a loader
    never iterated), ``0`` (iterator made, nothing taken), ``1``, ``mid``, ``last`` (after the
    last batch, before the pass ends: the rest of that pass is empty), ``finished`` (after the
    pass ended: the resumed loader starts the next epoch), ``next-epoch+1`` (one batch into the
    second epoch) and ``resumed-twice`` (stopped after 1, resumed, stopped again after 1 more).
    The state goes through JSON, as a checkpoint would. The resumed loader must yield what the
    interrupted iterator still held, then the next epoch; and what was taken plus that must be
    the uninterrupted run.
    """
    loader = make()
    taken: list[Any] = []
    if stop == "before-iter":
        state, continuation = loader.state_dict(), list(loader)
    elif stop == "finished":
        taken = list(loader)
        state = loader.state_dict()
        continuation = list(loader)  # a finished pass resumes at the next epoch
    else:
        if stop == "next-epoch+1":
            taken = list(loader)
        count = {"0": 0, "1": 1, "mid": epoch_batches // 2, "last": epoch_batches}.get(stop, 1)
        iterator = iter(loader)
        taken += [next(iterator) for _ in range(count)]
        state = loader.state_dict()
        if stop == "resumed-twice":  # a job preempted again one batch after it resumed
            loader = make()
            loader.load_state_dict(json.loads(json.dumps(state)))
            iterator = iter(loader)
            taken.append(next(iterator))
            state = loader.state_dict()
        continuation = list(iterator)
    state = json.loads(json.dumps(state))  # a checkpoint on disk
    resumed = make()
    resumed.load_state_dict(state)
    rest = list(resumed)
    assert_same_batches(rest, continuation)
    following = list(resumed)  # the pass after the resumed one: a whole new epoch
    ends = list(itertools.accumulate(map(len, reference), initial=0))  # a mixture's epochs can differ in length
    assert len(taken) + len(rest) in ends, "the resumed pass did not end where an epoch ends"
    assert len(following) == len(reference[ends.index(len(taken) + len(rest))])
    flat = [batch for epoch in reference for batch in epoch]
    assert_same_batches(taken + rest + following, flat[: len(taken) + len(rest) + len(following)])


def check_resume_mid_epoch(make: Callable[[], Any]) -> None:
    """:func:`check_resume` at ``"mid"``, against three epochs of an uninterrupted ``make()`` loader."""
    loader = make()
    reference = [list(loader) for _ in range(3)]
    check_resume(make, "mid", len(reference[0]), reference)


def resume_suite(epoch_batches: int) -> tuple[Any, Any]:
    """``(reference fixture, test)`` for a test module that defines a ``make_loader`` fixture,
    ``make_loader(workers)`` -> a fresh stateful loader: the reference is three epochs without
    workers; the test runs :func:`check_resume` at every stop with 0 and 2 workers.

        resume_reference, test_resumed_loader_yields_exactly_the_batches_still_to_come = resume_suite(5)
    """
    import pytest  # here, not at the top: the torchrun ranks import this module too

    @pytest.fixture(scope="module")
    def resume_reference(make_loader: Callable[[int], Any]) -> list[list[Any]]:
        loader = make_loader(0)
        return [list(loader) for _ in range(3)]

    @pytest.mark.parametrize("workers", [0, 2], ids=["workers0", "workers2"])
    @pytest.mark.parametrize("stop", STOPS)
    def test(make_loader: Callable[[int], Any], resume_reference: list[list[Any]], workers: int, stop: str) -> None:
        check_resume(lambda: make_loader(workers), stop, epoch_batches, resume_reference)

    return resume_reference, test


# -- what a rank reports -----------------------------------------------------------------------------


def train_passes(loader: Any, ids: Callable[[Any], list]) -> list[list[dict]]:
    """Epochs 0 and 1 as the loader advances by itself, then epoch 0 again after ``set_epoch(0)``
    (the DistributedSampler idiom); each batch as ``{"ids": ids(batch), "digest": ...}``."""
    passes = [[{"ids": ids(batch), "digest": digest(batch)} for batch in loader] for _ in range(2)]
    loader.batch_sampler.set_epoch(0)
    passes.append([{"ids": ids(batch), "digest": digest(batch)} for batch in loader])
    return passes


def sample_passes(loader: Any, samples: Callable[[Any], list[tuple[Any, Any]]], epochs: int = 1) -> list[list[list[dict]]]:
    """``epochs`` passes; each batch as its samples ``{"id", "digest"}`` from ``samples(batch)``,
    ``(id, content)`` pairs. Datasets with ``set_epoch`` get it before each pass."""
    passes = []
    for epoch in range(epochs):
        if hasattr(loader.dataset, "set_epoch"):
            loader.dataset.set_epoch(epoch)
        passes.append([[{"id": i, "digest": digest(content)} for i, content in samples(batch)] for batch in loader])
    return passes


def rank_fixtures(ranks: Any) -> tuple[Any, Any, Any]:
    """``config``, ``single`` and ``launched`` fixtures for a domain's ``ranks`` module (which has
    ``build(fixtures, folder) -> config`` and ``report(config) -> dict``): the data built once,
    the single-process report, and the reports of 2 and 3 torchrun ranks (one launch each).

        config, single, launched = rank_fixtures(ranks)
    """
    import pytest

    @pytest.fixture(scope="module")
    def config(fixtures: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
        return ranks.build(fixtures, tmp_path_factory.mktemp("data"))

    @pytest.fixture(scope="module")
    def single(config: dict[str, Any]) -> dict[str, Any]:
        return ranks.report(config)

    @pytest.fixture(scope="module", params=[2, 3], ids=["two-ranks", "three-ranks"])
    def launched(request: pytest.FixtureRequest, config: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
        return torchrun(ranks.__name__, request.param, tmp_path_factory.mktemp("out"), config)

    return config, single, launched


# -- rank contracts ----------------------------------------------------------------------------------


def check_train_ranks(ranks: list[list[list[dict]]], single: list[list[dict]]) -> None:
    """Training: each rank runs exactly its round-robin share of the single-process plan.

    ``ranks[r][e]`` and ``single[e]`` are epoch ``e``'s batches as ``{"ids": [...], "digest": str}``,
    from :func:`train_passes` (the third pass replays epoch 0 after ``set_epoch(0)``).
    Rank ``r`` must get batches ``r, r + W, r + 2W, ...`` of the single-process epoch, the tail
    that does not fill a round dropped; hence equal step counts, bit-identical batches and
    augmentations whatever the rank. No sample may go to two ranks in one epoch.
    """
    world = len(ranks)
    for epoch, plan in enumerate(single):
        per_rank = len(plan) // world
        assert per_rank > 0
        for rank, epochs in enumerate(ranks):
            assert epochs[epoch] == plan[rank : per_rank * world : world], f"rank {rank}, epoch {epoch}"
        samples = [i for epochs in ranks for batch in epochs[epoch] for i in batch["ids"]]
        assert len(samples) == len(set(samples)), f"a sample went to two ranks in epoch {epoch}"
    for rank, epochs in enumerate(ranks):
        assert epochs[0] != epochs[1], f"rank {rank} repeated its epoch-0 order in epoch 1"
        assert epochs[2] == epochs[0], f"rank {rank}: set_epoch(0) did not replay epoch 0"


def check_eval_ranks(ranks: list[list[list[dict]]], single: list[list[dict]]) -> None:
    """Evaluation: the ranks' samples, in rank order, are the single-process samples (each once).

    ``ranks[r]`` and ``single`` are one pass of :func:`sample_passes`: batches of per-sample
    ``{"id", "digest"}``. Ranks may differ by one batch, never more (contiguous blocks, no
    padding duplicates).
    """
    flat = [sample for batches in ranks for batch in batches for sample in batch]
    assert flat == [sample for batch in single for sample in batch]
    assert max(map(len, ranks)) - min(map(len, ranks)) <= 1


def check_stream_ranks(ranks: list[list[list[dict]]], single: list[list[dict]]) -> None:
    """Self-sharding streams: per epoch, every sample read once across (rank, worker), content
    equal to a single-process read, every rank busy, and a new order every epoch.

    ``ranks[r]`` and ``single`` come from :func:`sample_passes` (batches of samples per epoch).
    """
    ranks = [[[s for batch in epoch for s in batch] for epoch in passes] for passes in ranks]
    single = [[s for batch in epoch for s in batch] for epoch in single]
    for epoch, alone in enumerate(single):
        content = {sample["id"]: sample["digest"] for sample in alone}
        assert len(content) == len(alone)
        read = [sample for epochs in ranks for sample in epochs[epoch]]
        assert Counter(sample["id"] for sample in read) == Counter(list(content)), f"epoch {epoch}: lost or repeated samples"
        assert all(content[sample["id"]] == sample["digest"] for sample in read)
        assert all(epochs[epoch] for epochs in ranks), "a rank read nothing"
    for rank, epochs in enumerate(ranks):
        assert [s["id"] for s in epochs[0]] != [s["id"] for s in epochs[1]], f"rank {rank}: same order twice"


def check_stream_train_ranks(ranks: list[list[list[list[dict]]]], samples: int | None = None,
                             fewer_than: int | None = None) -> None:
    """Training on a self-sharding stream: every epoch, every rank runs the same number of steps
    (EqualSteps) and no sample reaches two ranks; with ``samples``, fewer than ``fewer_than`` of
    them are left out of an epoch.

    ``ranks[r]`` comes from :func:`sample_passes` over rank r's training loader.
    """
    for epoch in range(len(ranks[0])):
        steps = [len(passes[epoch]) for passes in ranks]
        assert len(set(steps)) == 1 and steps[0] > 0, f"epoch {epoch}: steps per rank {steps}"
        ids = [sample["id"] for passes in ranks for batch in passes[epoch] for sample in batch]
        assert len(ids) == len(set(ids)), f"epoch {epoch}: a sample reached two ranks"
        if samples is not None:
            assert samples - len(ids) < fewer_than, f"epoch {epoch}: {samples - len(ids)} of {samples} samples left out"


def check_seeds_agree(reports: list[dict]) -> None:
    """Every rank ran in a group of the launched size and drew the same seeds where none was given
    (rank 0's, broadcast: otherwise the ranks' shuffles would overlap)."""
    assert {report["world_size"] for report in reports} == {len(reports)}
    assert len({json.dumps(report["drawn_seed"]) for report in reports}) == 1


# -- kept batches stay as they were ------------------------------------------------------------------

KEEPERS = ("generator", "list", "numpy")


def clone_batch(batch: Any) -> Any:
    """A deep copy of a nested batch, taken when it was yielded."""
    if isinstance(batch, torch.Tensor):
        return batch.clone()
    if isinstance(batch, dict):
        return {key: clone_batch(value) for key, value in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(clone_batch(value) for value in batch)
    return batch


def check_kept_batches_intact(loader: Any, keep: str, images: Callable[[Any], torch.Tensor], epochs: int = 3) -> None:
    """Run ``DevicePrefetcher(loader, "cpu")`` for ``epochs`` while the caller keeps what it saw;
    at the end every kept raw batch, numpy view and output is bit-identical to its clone.

    ``keep``: "generator" (a wrapper keeps every raw batch it passes on), "list" (each epoch's raw
    batches collected in a plain list, then prefetched from it) or "numpy" (the wrapper keeps only
    a numpy view of each batch's images). ``images(batch)`` picks a raw batch's image tensor.
    """
    from recipes.core import DevicePrefetcher

    kept: list[tuple[Any, Any]] = []  # (what the caller holds, its clone when yielded)

    def keeping(batches):
        for batch in batches:
            held = images(batch).numpy() if keep == "numpy" else batch
            kept.append((held, held.copy() if keep == "numpy" else clone_batch(batch)))
            yield batch

    outputs = []
    for _ in range(epochs):
        source = list(keeping(loader)) if keep == "list" else keeping(loader)
        for out in DevicePrefetcher(source, "cpu"):
            outputs.append((out, clone_batch(out)))
    assert len(kept) >= 3 * epochs, f"only {len(kept)} batches: the check needs several per epoch"
    changed = [i for i, (held, clone) in enumerate(kept) if digest(held if keep != "numpy" else torch.from_numpy(held))
               != digest(clone if keep != "numpy" else torch.from_numpy(clone))]
    assert not changed, f"{len(changed)} of {len(kept)} kept raw batches were written over: {changed}"
    changed = [i for i, (out, clone) in enumerate(outputs) if digest(out) != digest(clone)]
    assert not changed, f"{len(changed)} of {len(outputs)} kept output batches were written over: {changed}"


# -- a domain folder is the unit to copy ------------------------------------------------------------

COMPOSES = {entry.name: entry.composes for entry in REGISTRY}  # what each may import besides itself: its composition


def assert_domain_imports(path: Path) -> None:
    """A file of ``recipes/<domain>/`` imports only the standard library, third-party packages,
    ``recipes.core`` and its own domain (multimodal also vision and text; a fixture writer also the
    root's ``recipes.fixtures_files``), with absolute imports,
    and imports its own domain in a form ``recipes copy`` can point at the copy (no bare
    ``import recipes.<domain>.x``, no ``from recipes import <domain>``)."""
    import ast

    domain = path.parent.name
    allowed = ("core", domain, *COMPOSES.get(domain, ()), *(("fixtures_files",) if path.name.startswith("fixtures") else ()))
    where = f"recipes/{domain}/{path.name}"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{where}, line {node.lineno}: relative import"
            names = [(node.module, None)]
        elif isinstance(node, ast.Import):
            names = [(alias.name, alias.asname) for alias in node.names]
        else:
            continue
        for module, asname in names:
            parts = module.split(".")
            if parts[0] != "recipes":
                continue
            assert len(parts) > 1 and parts[1] in allowed, f"{where}, line {node.lineno} imports {module}"
            own = parts[1] == domain
            assert not (own and isinstance(node, ast.Import) and asname is None), (
                f"{where}, line {node.lineno}: `import {module}` binds recipes; "
                "`recipes copy` needs a from-import or `as`")


def copy_and_run(domain: str, dest: Path, script: str, timeout: int = 240) -> dict[str, Any]:
    """``recipes copy DOMAIN DEST``, then ``script`` in a fresh interpreter (warnings are errors)
    whose working directory is DEST, with the package importable as when installed.

    After ``script``, the interpreter imports every file of the copy, checks that each module of
    the copy came from DEST and that no ``recipes.<domain>`` of the package was imported (but the
    domains multimodal composes), and reports, as the returned dict: ``printed`` (the command's
    output), ``files`` and ``lines`` of the copy, and ``core_modules`` / ``core_lines``: the
    ``recipes.core`` modules loaded by the time ``script`` ended (``composed_modules`` /
    ``composed_lines`` for vision and text under multimodal).
    """
    import contextlib
    import io

    from recipes.__main__ import main

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["copy", domain, str(dest)]) == 0
    copied = sorted((dest / domain).rglob("*.py"))
    forbidden = [f"recipes.{d}" for d in DOMAINS if d not in COMPOSES.get(domain, ())]
    composed = [f"recipes.{d}" for d in COMPOSES.get(domain, ())]
    trailer = f"""
import importlib as _importlib, json as _json, os as _os, pathlib as _pathlib, sys as _sys

def _loaded(prefixes):
    found = {{name: module.__file__ for name, module in list(_sys.modules.items())
             if any(name == p or name.startswith(p + ".") for p in prefixes)}}
    return len(found), sum(_pathlib.Path(f).read_text(encoding="utf-8").count("\\n") for f in found.values())

_core = _loaded(["recipes.core"])
_composed = _loaded({composed!r})
for _name in {[".".join(p.relative_to(dest).with_suffix("").parts).removesuffix(".__init__") for p in copied]!r}:
    _importlib.import_module(_name)
_own = {{n: m.__file__ for n, m in _sys.modules.items() if n == {domain!r} or n.startswith({domain + "."!r})}}
_here = _os.path.realpath(_os.getcwd()) + _os.sep
_outside = [n for n, f in _own.items() if not _os.path.realpath(f).startswith(_here)]
assert not _outside, f"modules of the copy imported from elsewhere: {{_outside}}"
_package = sorted(n for n in _sys.modules if any(n == p or n.startswith(p + ".") for p in {forbidden!r}))
assert not _package, f"the copy imported the package's own modules: {{_package}}"
print(_json.dumps({{"own": len(_own), "core_modules": _core[0], "core_lines": _core[1],
                   "composed_modules": _composed[0], "composed_lines": _composed[1]}}))
"""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TOKENIZERS_PARALLELISM": "false"}
    result = subprocess.run([sys.executable, "-W", "error", "-c", script + trailer], cwd=dest, env=env,
                            capture_output=True, text=True, timeout=timeout, check=False)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["own"] == len(copied), report
    return {**report, "printed": printed.getvalue(), "files": len(copied),
            "lines": sum(p.read_text(encoding="utf-8").count("\n") for p in copied)}


# -- skipped samples -------------------------------------------------------------------------------


def with_skip_warnings(make: Callable[[], Any]) -> tuple[Any, list[str]]:
    """``(make(), messages of the SkippedSampleWarnings it raised)``, every one recorded."""
    import warnings

    from recipes.core.contracts.errors import SkippedSampleWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = make()
    return result, [str(w.message) for w in caught if w.category is SkippedSampleWarning]


# How a field of a loaded state is broken: a value out of range either way, another type, the
# field taken out, and a key (or list item) next to it that no state has.
MUTATIONS = ("negative", "too-large", "wrong-type", "missing", "extra")


def mutated_state(state: dict[str, Any], field: str, kind: str) -> dict[str, Any]:
    """A copy of ``state`` whose ``field`` (a dotted path: ``"position.1.0"``) is broken as ``kind``."""
    state = copy.deepcopy(state)
    *parents, last = [int(part) if part.isdigit() else part for part in field.split(".")]
    holder = state
    for part in parents:
        holder = holder[part]
    if kind == "missing":
        del holder[last]
    elif kind == "extra":
        holder.append(0) if isinstance(holder, list) else holder.update(unexpected=0)
    else:
        holder[last] = {"negative": -1, "too-large": 10**12, "wrong-type": "x"}[kind]
    return state


def mutation_cases(fields: list[str], accepted: set[tuple[str, str]] = frozenset()) -> list[Any]:
    """``pytest.param(field, kind)`` for every field and mutation, but those ``accepted`` as valid
    values (a seed may be any integer, an epoch any large one)."""
    return [pytest.param(f, k, id=f"{f}-{k}") for f in fields for k in MUTATIONS if (f, k) not in accepted]
