"""A training process whose loader workers block in a read: ``python -m tests.core.hanging_loader URL``.

It prints its workers' process ids as a JSON line, then waits for a batch that never comes
(``URL`` is a server that never answers); tests/core/test_storage_timeouts.py kills it there.
"""

from __future__ import annotations

import json
import sys

import psutil
from torch.utils.data import IterableDataset

from recipes.core.loading.loader import build_loader
from recipes.core.sources.storage import open_stream


class HangingReads(IterableDataset):
    """Each worker reads ``url`` (with the default timeouts: minutes against a silent server)."""

    def __init__(self, url: str) -> None:
        self.url = url

    def __iter__(self):
        with open_stream(self.url) as file:
            yield file.read(1)


def main(url: str) -> None:
    loader = build_loader(HangingReads(url), list, batch_size=1, train=False, device="cpu", num_workers=2)
    iterator = iter(loader)
    print(json.dumps([child.pid for child in psutil.Process().children()]), flush=True)
    next(iterator)


if __name__ == "__main__":
    main(sys.argv[1])
