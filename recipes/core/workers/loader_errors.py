"""An error caught from a DataLoader must not keep the loader's workers alive.

    for batch in ReleasingIterator(iter(loader)): ...      # what a DataLoader's __iter__ returns

torch (2.14) re-raises a worker's exception from a frame that holds it in a local variable, so
the exception, its traceback and that frame form a reference cycle, and the traceback's frames
of the DataLoader iterator hold the iterator. Caught and dropped (a notebook cell, a retry loop,
``pytest.raises``), the iterator is then freed only by the cyclic garbage collector, and that
collection closes the iterator's index queues before the iterator's own shutdown runs: the
workers never get the message to stop, and the shutdown waits 5 s per worker, then kills them.

:class:`ReleasingIterator` clears, as an error leaves ``next()``, the finished frames of torch's
and torchdata's loader code in its traceback (:func:`release_loader_frames`), and its own frame
there lets go of the iterator. The cycle is gone and no frame holds the iterator: dropping the
last reference to it (or to a persistent-workers loader, which keeps it) shuts its workers down
at once, as without an error, even while the error itself is kept. The traceback still prints
every line; only those library frames' local variables are gone from a post-mortem debugger.
The user's own frames keep theirs, and the iterator goes on after an error as torch's does.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import TracebackType
from typing import Any

# The packages whose frames hold the iterator and the re-raised exception: torch's DataLoader and
# ExceptionWrapper, and torchdata's StatefulDataLoader, which uses them.
LOADER_PACKAGES = ("torch", "torchdata")


def release_loader_frames(error: BaseException) -> None:
    """Clear the local variables of the finished torch and torchdata frames in ``error``'s traceback.

    A frame still running (the caller's) is left alone, as are frames of any other package, so a
    user's dataset or sampler frame keeps its locals for a post-mortem debugger.
    """
    tb: TracebackType | None = error.__traceback__
    while tb is not None:
        package = str(tb.tb_frame.f_globals.get("__name__", "")).partition(".")[0]
        if package in LOADER_PACKAGES:
            try:
                tb.tb_frame.clear()
            except RuntimeError:  # still running: torch code that called this iterator
                pass
        tb = tb.tb_next


class ReleasingIterator:
    """``iter(loader)`` whose errors leave no reference cycle behind (see the module docstring).

    Batches, ``StopIteration`` and every error pass through unchanged; ``len()`` and every other
    attribute are the wrapped iterator's. ``iterator`` is the DataLoader's own iterator.
    """

    __slots__ = ("iterator",)

    def __init__(self, iterator: Iterator[Any]) -> None:
        self.iterator = iterator

    def __iter__(self) -> ReleasingIterator:
        return self

    def __next__(self) -> Any:
        iterator = self.iterator
        try:
            return next(iterator)
        except StopIteration:
            raise
        except BaseException as error:
            release_loader_frames(error)
            del self, iterator  # this frame stays in the traceback: without the iterator
            raise

    def __len__(self) -> int:
        return len(self.iterator)  # type: ignore[arg-type]

    def __getattr__(self, name: str) -> Any:
        """Anything else is the DataLoader iterator's (code that looks at its workers keeps working)."""
        if name == "iterator":  # not set yet: do not recurse
            raise AttributeError(name)
        return getattr(self.iterator, name)
