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
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

ON_ERROR_CHOICES = ("raise", "skip")


class DataError(ValueError):
    """One sample, file or annotation cannot be used; the message says which and why.

    It subclasses ValueError and takes a single message argument, so DataLoader's worker
    exception wrapper can rebuild it in the main process without losing the text.
    """


class SkippedSampleWarning(UserWarning):
    """A sample was dropped under ``on_error="skip"``; the message names the file and reason."""


def check_on_error(on_error: str) -> str:
    """Validate an ``on_error`` argument and return it."""
    if on_error not in ON_ERROR_CHOICES:
        raise ValueError(f"on_error must be one of {ON_ERROR_CHOICES}, got {on_error!r}")
    return on_error


def skip_or_raise(error: DataError, on_error: str) -> None:
    """Apply the policy: raise ``error``, or warn with its message and return None."""
    if on_error == "raise":
        raise error
    warnings.warn(f"skipped: {error}", SkippedSampleWarning, stacklevel=3)
    return None


def drop_skipped(batch: Sequence[Any]) -> list[Any]:
    """Remove the ``None`` entries that skipped samples leave in a batch."""
    return [sample for sample in batch if sample is not None]
