"""The error policy every dataset shares: ``on_error="raise" | "skip"``.

Real data is messy: a truncated JPEG in a million, a caption line that is not UTF-8. A loader
must never paper over that by returning some other sample, and it must never die in a worker
with a bare ``OSError`` that does not say which file. So every problem with one sample is a
:class:`DataError` whose message names the file (and line or annotation id) and the problem:

    raise  -> the DataError propagates; DataLoader re-raises it in the main process with the
              same message, so the file name survives the trip out of a worker.
    skip   -> a :class:`SkippedSampleWarning` with the same message, and the dataset returns
              ``None`` for that index; every collate function in this package drops ``None``
              entries, so the batch is simply one sample shorter.

    try:
        image = read_image(path)
    except DataError as error:
        return skip_or_raise(error, self.on_error)

A bug in the user's own code (a transform, a ``collate_fn``) is not bad data: it is a
:class:`SampleError` naming the sample it failed on, whatever ``on_error`` says:

    with UserCode(lambda: describe_sample(self, index)):
        image = self.transform(image)
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from recipes.core.contracts.protocols import Described

ON_ERROR_CHOICES = ("raise", "skip")
# A failing batch's message names at most this many of its samples' files (and every index).
DESCRIBED_PER_BATCH = 8


class DataError(ValueError):
    """One sample, file or annotation cannot be used; the message says which and why.

    It subclasses ValueError and takes a single message argument, so DataLoader's worker
    exception wrapper can rebuild it in the main process without losing the text.
    ``skip_hint`` ("or pass on_error='skip' to drop the line") ends the message when it is
    raised; a skip-mode warning, where that advice was taken, says only ``reason``.
    """

    def __init__(self, message: str, *, skip_hint: str | None = None) -> None:
        super().__init__(f"{message}, {skip_hint}" if skip_hint else message)
        self.reason = message


class SkippedSampleWarning(UserWarning):
    """A sample was dropped under ``on_error="skip"``; the message names the file and reason."""


def check_on_error(on_error: str) -> str:
    """Validate an ``on_error`` argument and return it."""
    if on_error not in ON_ERROR_CHOICES:
        raise ValueError(f"on_error must be one of {ON_ERROR_CHOICES}, got {on_error!r}")
    return on_error


def skip_or_raise(error: DataError, on_error: str) -> None:
    """Apply the policy: raise ``error``, or warn with its message and return None (and count it
    in the :class:`SkippedRows` block around, if any)."""
    tally = _SKIPPED.get()
    if tally is not None and on_error != "raise":
        tally.count += 1
        tally.first = tally.first or str(getattr(error, "reason", error))
    collected = _COLLECTED.get()
    if collected is not None and on_error != "raise":
        collected.append(error)  # collect_skips' caller counts and warns of it
        return None
    if on_error == "raise":
        try:
            raise error
        finally:
            # The traceback keeps this frame; holding the error too, it would be a reference cycle
            # that keeps a caller's frames (and a DataLoader iterator among them) until a collection.
            del error
    warnings.warn(f"skipped: {getattr(error, 'reason', error)}", SkippedSampleWarning, stacklevel=3)
    return None


class SkippedRows:
    """``with SkippedRows(name) as skipped: ...; skipped.check(kept)``: the rows skipped in the block
    (by :func:`skip_or_raise`, however deep) are counted, and a build that kept none of the rows it
    read is a DataError saying how many and why the first was skipped, not an empty dataset whose
    loader yields nothing."""

    def __init__(self, name: str, unit: str = "row") -> None:
        self.name, self.unit, self.count, self.first, self._token = name, unit, 0, "", None

    def __enter__(self) -> SkippedRows:
        self._token = _SKIPPED.set(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _SKIPPED.reset(self._token)

    def check(self, kept: int) -> None:
        """Raise if rows were read, all skipped, and none kept."""
        if kept == 0 and self.count:
            raise DataError(f"{self.name}: every {self.unit} was skipped ({self.count:,} read, on_error='skip'); "
                            f"the first: {self.first}")


_SKIPPED: ContextVar[SkippedRows | None] = ContextVar("recipes_skipped_rows", default=None)
_COLLECTED: ContextVar[list[DataError] | None] = ContextVar("recipes_collected_skips", default=None)


@contextmanager
def collect_skips() -> Iterator[list[DataError]]:
    """``with collect_skips() as skipped: ...``: each error :func:`skip_or_raise` skips in the block
    (however deep, ``on_error="skip"``) goes in ``skipped`` instead of a warning, for the caller to
    count and report (``prepare``'s summary and manifest name what its source listing dropped)."""
    collected: list[DataError] = []
    token = _COLLECTED.set(collected)
    try:
        yield collected
    finally:
        _COLLECTED.reset(token)


def drop_skipped(batch: Sequence[Any]) -> list[Any]:
    """Remove the ``None`` entries that skipped samples leave in a batch."""
    return [sample for sample in batch if sample is not None]


class SampleError(RuntimeError):
    """User code (a transform, a ``collate_fn``) raised on a sample; the message names the sample
    (dataset index, and file, line or image id) and the original exception's type and message.

    Not a DataError: the data may be fine and the code wrong, so ``on_error="skip"`` never drops
    it. The original is its ``__cause__`` in the process that raised it; from a worker, DataLoader
    rebuilds this class in the main process from one message argument (the worker's traceback,
    the original's included), which is why the message itself carries the original's type.
    """


def describe_sample(dataset: Any, index: int) -> str:
    """``"dataset index 17 (root/cat/3.jpg)"``: the index, and ``dataset.describe(index)`` where the
    dataset has that method (a file, ``"labeled.jsonl line 18"``, ``"instances.json image id 42"``)."""
    try:
        return f"dataset index {index}" + (f" ({dataset.describe(index)})" if isinstance(dataset, Described) else "")
    except Exception:  # the description must not replace the error it describes
        return f"dataset index {index}"


class BatchSamples(list):
    """One batch's samples as a dataset returned them, with ``indices`` and the ``dataset`` they
    came from, so that :class:`NamedCollate` can name them. It pickles as a plain list, and
    ``type(batch)(items)`` builds one without indices, as code walking a nested batch does."""

    def __init__(self, samples: Iterable[Any] = (), indices: list[int] | None = None, dataset: Any = None) -> None:
        super().__init__(samples)
        self.indices, self.dataset = indices, dataset

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return list, (list(self),)  # never the dataset: a collate may return its input


def describe_batch(samples: Sequence[Any]) -> str:
    """The dataset indices of a batch and the first files (or lines, ids) they name; for a batch
    without indices (a stream's), its size and the ``"key"``/``"index"`` its dict items carry."""
    indices = getattr(samples, "indices", None)
    if indices is None:
        for field in ("key", "index"):  # what a stream's items carry to name themselves
            ids = [item.get(field) for item in samples if isinstance(item, dict)]
            if ids and len(ids) == len(samples) and None not in ids:
                return f"a batch of {len(samples)} samples ({field}: {', '.join(map(str, ids))})"
        return f"a batch of {len(samples)} samples"
    where = ""
    if isinstance(samples.dataset, Described):
        try:
            places = [str(samples.dataset.describe(index)) for index in indices[:DESCRIBED_PER_BATCH]]
            more = len(indices) - len(places)
            where = f" ({', '.join(places)}{f' and {more} more' if more > 0 else ''})"
        except Exception:  # the description must not replace the error it describes
            where = ""
    return f"the batch of dataset indices {list(indices)}{where}"


class UserCode:
    """Run user code (``what``: ``"transform"``, ``"collate_fn"``) for a sample: an exception it
    raises becomes a :class:`SampleError` whose message starts with ``where`` (a string, or a
    callable that builds it only on error), with the original as ``__cause__``. A DataError
    (bad data, already named) and a SampleError pass unchanged. A class, not a generator
    context manager: it runs once per sample, and a generator's set-up costs several times more."""

    __slots__ = ("what", "where")

    def __init__(self, where: str | Callable[[], str], *, what: str = "transform") -> None:
        self.where, self.what = where, what

    @classmethod
    def for_sample(cls, dataset: Any, index: int, *, what: str = "transform") -> UserCode:
        """User code run for sample ``index`` of ``dataset``, its errors naming it as
        :func:`describe_sample` does: ``with UserCode.for_sample(self, index): image = self.transform(image)``."""
        return cls(functools.partial(describe_sample, dataset, index), what=what)

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, traceback: Any) -> bool:
        if error is None or not isinstance(error, Exception) or isinstance(error, (DataError, SampleError)):
            return False
        place = self.where() if callable(self.where) else self.where
        raise SampleError(f"{place}: the {self.what} raised {type(error).__name__}: {error}") from error


class NamedCollate:
    """``collate_fn`` whose errors name the batch's samples (see :func:`describe_batch`).

    ``build_loader`` wraps every collate in it. A plain DataLoader gets the indices too when its
    dataset is a :class:`recipes.core.sampling.seeding.SeededDataset`, whose batches are :class:`BatchSamples`:

        DataLoader(SeededDataset(dataset), batch_size=8, collate_fn=NamedCollate(my_collate))
    """

    def __init__(self, collate_fn: Callable[[list[Any]], Any]) -> None:
        self.collate_fn = collate_fn

    def __call__(self, samples: list[Any]) -> Any:
        with UserCode(lambda: describe_batch(samples), what="collate_fn"):
            return self.collate_fn(samples)

    def __repr__(self) -> str:
        return f"NamedCollate({self.collate_fn!r})"
