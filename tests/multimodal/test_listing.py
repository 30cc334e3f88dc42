"""A job lists its shards once: 2 torchrun ranks x 2 workers read tar shards over HTTP.

The shard pattern is a ``{00000..00047}`` range (nothing to list) or a glob (one listing, by rank
0, whose list reaches the other rank through the process group and the workers with the
dataset, spawned workers included), then indexes them (one GET a shard, on rank 0). No shard's
size is asked for: a shard is one ranged GET in each epoch; the server's log (tests/servers.py)
counts each phase's requests.
"""

import pytest

from tests.harness import torchrun
from tests.multimodal import listing_ranks
from tests.servers import FaultyHTTPServer, phase

pytestmark = pytest.mark.slow
SHARDS = 48


@pytest.fixture(scope="module")
def job(fixtures, tmp_path_factory):
    folder = tmp_path_factory.mktemp("served")
    listing_ranks.build(folder / "shards", SHARDS)
    with FaultyHTTPServer(folder, listing=True) as server:
        url = server.url("shards")
        config = {
            "server": server.url(""),
            "tokenizer": str(fixtures / "text" / "tokenizer.json"),
            "cases": {
                "range": [f"{url}/shard-{{00000..{SHARDS - 1:05d}}}.tar", None],
                "glob": [f"{url}/shard-*.tar", "spawn"],  # spawned workers: the list reaches them pickled
            },
        }
        reports = torchrun(listing_ranks.__name__, 2, tmp_path_factory.mktemp("out"), config)
        return reports, list(server.log)


@pytest.mark.parametrize("case, listings", [("range", 0), ("glob", 1)])
def test_a_pattern_is_listed_at_most_once_per_job_and_no_shard_size_is_asked(job, case, listings):
    _, log = job
    built, epochs = phase(log, f"{case}/build"), [phase(log, f"{case}/epoch-{e}") for e in range(2)]
    shards = sorted(f"/shards/shard-{n:05d}.tar" for n in range(SHARDS))
    assert built[:listings] == [("LIST", "/shards")] * listings  # rank 0 alone lists; rank 1 and the workers do not
    # then rank 0 alone indexes the samples (recipes.core.sources.shard_index): one GET a shard, not one a rank
    assert sorted(built[listings:]) == [("GET", path) for path in shards]
    for requests in epochs:
        assert sorted(path for _, path in requests) == shards  # one GET a shard, no HEAD, no listing
        assert {method for method, _ in requests} == {"GET"}


@pytest.mark.parametrize("case", ["range", "glob"])
def test_every_sample_is_read_once_per_epoch_across_ranks_and_workers(job, case):
    reports, _ = job
    expected = sorted(f"shard-{n:05d}.tar/{n:05d}" for n in range(SHARDS))
    for epoch in range(2):
        assert sorted(key for report in reports for key in report[case][epoch]) == expected
