"""A stalled loader says what it waits for: the samples its silent worker is loading, and that worker's stack.

    loader = build_loader(dataset, collate, batch_size=32, train=True, timeout=60)   # error after 60 s
    loader = build_loader(dataset, collate, batch_size=32, train=True)               # warns once after 300 s

A worker that hangs (a read that never returns, a lock, a C library spinning) leaves torch's
``DataLoader`` with ``DataLoader timed out after 60 seconds`` under ``timeout=``, and silent forever
without it. Here each worker notes, in a row of a small table the loader shares with it (a memory-
mapped file), the dataset indices it is loading and since when; ``faulthandler`` in the worker writes
its Python stack, every thread's, when asked (``SIGUSR1``). When the wait for a batch passes the
threshold, the loader reads the table, asks the worker busy longest for its stack and reports both:
under ``timeout=`` as a :class:`LoaderTimeoutError` (a RuntimeError, as torch's), otherwise as one
:class:`LoaderStallWarning` after ``stall_warning_s`` (default :data:`STALL_WARNING_S`; None: off),
and it keeps waiting: a slow job is not killed. A stream's workers note no indices; their stacks say
where they are. The wait wakes through torch's own ``timeout``, so nothing runs between batches;
the workers' notes cost a few microseconds a batch (benchmarks/README.md, watchdog).
"""

from __future__ import annotations

import faulthandler
import os
import shutil
import signal
import tempfile
import time
import warnings
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from recipes.core.contracts.errors import DESCRIBED_PER_BATCH, describe_sample
from recipes.core.workers.loader_errors import ReleasingIterator, release_loader_frames
from recipes.core.contracts.parameters import check_positive

STALL_WARNING_S = 300.0  # no batch for five minutes: far past a slow read, well before a job's hours are lost
ROW = 512  # int64 slots a worker's row holds (one 4 KiB page: workers never share a cache line)
PID, SINCE, COUNT, FIRST = 0, 1, 2, 3  # a row: the worker's pid, when its batch started (0: idle), how many, indices
STACK_WAIT_S = 2.0  # how long a report waits for a worker's stack to be written
STACK_SIGNAL = getattr(signal, "SIGUSR1", None)  # Windows has none: reports go without stacks there
TIMED_OUT = "DataLoader timed out after"  # torch's message for a wait past its timeout

_ROW: np.ndarray | None = None  # in a watched worker: its row of the table
_STACK_FILE: Any = None  # in a watched worker: where faulthandler writes its stack (kept open)


class LoaderTimeoutError(RuntimeError):
    """A batch did not come within the loader's ``timeout``; the message names the samples in flight."""


class LoaderStallWarning(UserWarning):
    """A loader has produced no batch for ``stall_warning_s`` and keeps waiting; the message names the samples."""


def loading(indices: list[int]) -> None:
    """In a watched worker: note that it starts loading ``indices`` (a no-op anywhere else)."""
    row = _ROW
    if row is not None:
        count = min(len(indices), ROW - FIRST)
        row[FIRST : FIRST + count] = indices[:count]
        row[COUNT] = len(indices)
        row[SINCE] = time.monotonic_ns()


def loaded() -> None:
    """In a watched worker: note that its batch is loaded."""
    row = _ROW
    if row is not None:
        row[SINCE] = 0


class WatchedWorkerInit:
    """A ``worker_init_fn`` that opens the worker's row and its stack file, then runs ``then``. Picklable."""

    def __init__(self, table: str, then: Callable[[int], Any] | None) -> None:
        self.table, self.then = table, then

    def __call__(self, worker_id: int) -> None:
        global _ROW, _STACK_FILE
        try:
            table = np.memmap(self.table, dtype=np.int64, mode="r+")
            _ROW = table[worker_id * ROW : (worker_id + 1) * ROW]
            _ROW[PID], _ROW[SINCE] = os.getpid(), 0
            if STACK_SIGNAL is not None:
                _STACK_FILE = open(_stack_path(self.table, worker_id), "w", encoding="utf-8")  # noqa: SIM115 (kept open)
                faulthandler.register(STACK_SIGNAL, file=_STACK_FILE, all_threads=True, chain=False)
        except (OSError, ValueError):  # the loader is gone already: nothing to report to
            _ROW = None
        if self.then is not None:
            self.then(worker_id)


class LoaderWatch:
    """The main process's side: the table its workers write, and the report of a stall.

    Args:
        num_workers: the loader's worker count (one row each).
        timeout: the user's ``timeout`` in seconds (a stall past it is an error), or None.
        stall_warning_s: warn once past this many seconds without a batch, or None.
    """

    def __init__(self, num_workers: int, *, timeout: float | None, stall_warning_s: float | None) -> None:
        self.num_workers, self.timeout, self.stall_warning_s = num_workers, timeout, stall_warning_s
        self.wake_s = timeout if timeout else stall_warning_s  # torch's timeout: how often a wait comes back here
        self.warned = False
        self.folder = tempfile.mkdtemp(prefix="recipes-watch-")
        self.table = os.path.join(self.folder, "table")
        np.zeros(num_workers * ROW, dtype=np.int64).tofile(self.table)
        weakref.finalize(self, shutil.rmtree, self.folder, ignore_errors=True)

    def worker_init(self, then: Callable[[int], Any] | None) -> WatchedWorkerInit:
        """The ``worker_init_fn`` to give the DataLoader: the watch's start-up, then ``then``."""
        return WatchedWorkerInit(self.table, then)

    def report(self, dataset: Any, waited_s: float) -> str:
        """What the loader waits for: each loading worker's samples and stack, busy longest first."""
        rows = np.fromfile(self.table, dtype=np.int64).reshape(-1, ROW)
        now = time.monotonic_ns()
        started = [(worker, row) for worker, row in enumerate(rows) if row[PID]]
        busy = sorted(((worker, row) for worker, row in started if row[SINCE]), key=lambda pair: pair[1][SINCE])
        parts = [f"no batch for {waited_s:g} s"]
        if not busy:
            parts[0] += ("; no worker is loading a sample of the dataset (a stream's workers note none; else the wait "
                         "is in a collate_fn or the hand-over), so every worker's stack follows")
            parts += [_worker_stack(self.table, worker, int(row[PID])) for worker, row in started]
        for worker, row in busy:
            count = int(row[COUNT])
            indices = [int(index) for index in row[FIRST : FIRST + min(count, ROW - FIRST)]]
            places = [describe_sample(dataset, index) for index in indices[:DESCRIBED_PER_BATCH]]
            more = f" and {count - len(places)} more" if count > len(places) else ""
            parts.append(f"worker {worker} (pid {row[PID]}) has been loading {count} samples for "
                         f"{(now - row[SINCE]) / 1e9:.1f} s: {'; '.join(places)}{more}")
            parts.append(_worker_stack(self.table, worker, int(row[PID])))
        return "\n".join(parts)


def _stack_path(table: str, worker: int) -> str:
    return os.path.join(os.path.dirname(table), f"stack-{worker}.txt")


def _worker_stack(table: str, worker: int, pid: int) -> str:
    """Worker ``worker``'s Python stack, as its faulthandler writes it when signalled."""
    if STACK_SIGNAL is None:
        return f"worker {worker}'s stack: not available on this platform (no SIGUSR1)"
    path = Path(_stack_path(table, worker))
    try:
        start = path.stat().st_size
        os.kill(pid, STACK_SIGNAL)
    except OSError as error:
        return f"worker {worker}'s stack: not available ({error.strerror or error})"
    deadline, size = time.monotonic() + STACK_WAIT_S, start
    while time.monotonic() < deadline:  # faulthandler writes at once; wait for the file to stop growing
        time.sleep(0.02)
        grown = path.stat().st_size
        if grown > start and grown == size:
            break
        size = grown
    with open(path, encoding="utf-8", errors="replace") as file:
        file.seek(start)
        threads = [block for block in file.read().strip().split("\n\n") if block]
    if not threads:
        return f"worker {worker}'s stack: it did not answer"
    threads.sort(key=lambda block: not block.startswith("Current thread"))  # the loading thread first, then its helpers
    return f"worker {worker}'s stack (pid {pid}):\n" + "\n\n".join(threads)


def watch_loader(kwargs: dict[str, Any]) -> tuple[dict[str, Any], LoaderWatch | None]:
    """The DataLoader keyword arguments with the watch in them (its ``worker_init_fn``, torch's
    ``timeout`` as the wake-up), and the watch; ``stall_warning_s`` is taken out. No watch without
    workers (the main process is where a hang is then) or with neither a timeout nor a threshold."""
    kwargs = dict(kwargs)
    stall = check_positive("stall_warning_s", kwargs.pop("stall_warning_s", STALL_WARNING_S), owner="the loader")
    timeout = kwargs.get("timeout") or None
    if not kwargs.get("num_workers") or (timeout is None and stall is None):
        return kwargs, None
    watch = LoaderWatch(kwargs["num_workers"], timeout=timeout, stall_warning_s=stall)
    kwargs["timeout"] = watch.wake_s
    kwargs["worker_init_fn"] = watch.worker_init(kwargs.get("worker_init_fn"))
    return kwargs, watch


class WatchedIterator(ReleasingIterator):
    """``iter(loader)`` that reports a stall (see the module docstring); errors leave no reference
    cycle, as :class:`ReleasingIterator`'s do."""

    __slots__ = ("watch", "dataset")

    def __init__(self, iterator: Iterator[Any], watch: LoaderWatch, dataset: Any) -> None:
        super().__init__(iterator)
        self.watch, self.dataset = watch, dataset

    def __next__(self) -> Any:
        iterator, waited = self.iterator, 0.0
        while True:
            try:
                return next(iterator)
            except StopIteration:
                raise
            except BaseException as error:
                release_loader_frames(error)
                if not (isinstance(error, RuntimeError) and str(error).startswith(TIMED_OUT)):
                    del self, iterator  # this frame stays in the traceback: without the iterator
                    raise
            waited += self.watch.wake_s
            if self.watch.timeout is not None:
                message = f"{TIMED_OUT} {self.watch.timeout:g} seconds: {self.watch.report(self.dataset, waited)}"
                del self, iterator  # as above; the error is not held here either (it would hold this frame)
                raise LoaderTimeoutError(message)
            if not self.watch.warned:
                self.watch.warned = True
                warnings.warn(f"the loader has produced nothing for {waited:g} s and keeps waiting (stall_warning_s="
                              f"{self.watch.stall_warning_s:g}; None turns this off): "
                              f"{self.watch.report(self.dataset, waited)}", LoaderStallWarning, stacklevel=2)
