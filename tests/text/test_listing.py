"""A job sizes and lists its files once: 2 torchrun ranks x 2 workers stream them over HTTP.

Byte ranges need every file's size and Parquet rows every footer's count (its columns, and an
id column's type, are checked from the same read): rank 0 asks each once (a HEAD a file, a glob
one listing) and the process group brings the result to the other rank, the dataset to the
workers. No epoch asks for a size or a listing again: the server's
log (tests/servers.py) counts each phase's requests.
"""

import pytest

from tests.harness import torchrun
from tests.servers import FaultyHTTPServer, phase
from tests.text import listing_ranks

pytestmark = pytest.mark.slow
FILES = 120


@pytest.fixture(scope="module")
def job(fixtures, tmp_path_factory):
    folder = tmp_path_factory.mktemp("served")
    listing_ranks.build(folder, FILES)
    with FaultyHTTPServer(folder, listing=True) as server:
        config = {
            "server": server.url(""),
            "tokenizer": str(fixtures / "text" / "tokenizer.json"),
            "cases": {
                "lines": [server.url(f"lines/part-{n:05d}.txt") for n in range(FILES)],
                "tables": server.url("tables/part-*.parquet"),
                "ids": server.url("tables/part-*.parquet"),
            },
        }
        reports = torchrun(listing_ranks.__name__, 2, tmp_path_factory.mktemp("out"), config)
        return reports, list(server.log)


CASES = [("lines", "lines", 0), ("tables", "tables", 1), ("ids", "tables", 1)]


@pytest.mark.parametrize("case, folder, listings", CASES)
def test_each_size_is_asked_once_per_job_and_no_epoch_asks_again(job, case, folder, listings):
    _, log = job
    built = phase(log, f"{case}/build")
    files = sorted(f"/{folder}/part-{n:05d}.{'txt' if folder == 'lines' else 'parquet'}" for n in range(FILES))
    assert [request for request in built if request[0] == "LIST"] == [("LIST", f"/{folder}")] * listings
    assert sorted(path for method, path in built if method == "HEAD") == files  # rank 0, once a file
    for epoch in range(2):
        requests = phase(log, f"{case}/epoch-{epoch}")
        assert {method for method, _ in requests} == {"GET"}  # no HEAD, no listing
        assert {path for _, path in requests} == set(files)


@pytest.mark.parametrize("case", ["lines", "tables", "ids"])
def test_every_line_is_read_once_per_epoch_across_ranks_and_workers(job, case):
    reports, _ = job
    assert reports[0][case]["sizes"] == reports[1][case]["sizes"]
    count = 3 * FILES
    for epoch in range(2):
        indices = sorted(index for report in reports for index in report[case]["epochs"][epoch])
        assert len(indices) == len(set(indices)) == count
