"""recipes/cli/worker_pool.py: every item's result, in item order, however the items are run."""

import pytest

from recipes.cli.worker_pool import map_in_workers


@pytest.mark.parametrize(
    ("workers", "inline_below"),
    [(1, 0), (2, 10_000), (2, 1)],
    ids=["one process", "few items stay in this process", "a pool of two"],
)
def test_every_result_comes_back_in_item_order(workers, inline_below):
    items = list(range(-200, 200))
    got = map_in_workers(abs, items, workers=workers, progress=False, desc="checking", unit="item",
                         inline_below=inline_below, max_chunksize=3)  # many chunks: order must survive them
    assert got == [abs(item) for item in items]


def test_no_items_give_no_results():
    assert map_in_workers(abs, [], workers=2, progress=False, desc="checking", unit="item", inline_below=0,
                          max_chunksize=3) == []
