"""A loader's error, caught in a test without keeping its workers alive (not a test module itself).

    error = loader_error(loader, SampleError)       # instead of: with pytest.raises(...) as caught
    assert "dataset index 11" in str(error)

An exception a test keeps in a local variable (``caught`` of ``pytest.raises``) holds its
traceback, whose frames hold the test's frame (the frame itself, or as their caller): a reference
cycle that keeps the test's locals, its loaders among them, until a garbage collection. torch's
re-raise of a worker's error makes another (recipes/core/workers/loader_errors.py). A DataLoader iterator
freed by a collection stops its workers only after 5 s each: over a minute of idle waiting in the
suite's error tests. The error returned here, and every error it chains to, has no traceback: the
loader and its workers go when the test drops them, and the test still checks the error's type,
message and cause.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any


def loader_error(loader: Iterable[Any], kind: type[BaseException], match: str | None = None) -> BaseException:
    """Iterate ``loader`` (as ``list(loader)`` does) to the error it must raise, an instance of
    ``kind`` whose message ``re.search``-es ``match`` (as ``pytest.raises`` checks), and return it,
    its traceback and those of its ``__cause__`` and ``__context__`` chain dropped."""
    try:
        for _ in loader:
            pass
    except kind as error:
        assert match is None or re.search(match, str(error)), f"{match!r} does not match {str(error)!r}"
        chained: BaseException | None = error
        while chained is not None:
            chained.__traceback__ = None
            chained = chained.__cause__ or chained.__context__
        return error
    raise AssertionError(f"the loader ran to its end without raising {kind.__name__}")
