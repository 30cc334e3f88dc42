"""What a job asks the storage before its first batch: 10,000 small shards on a local HTTP server,
read by 2 ranks x 2 DataLoader workers.

    python benchmarks/listing.py                  # 10,000 of each kind (a few minutes)
    python benchmarks/listing.py --files 1000     # a quicker run

The tests' HTTP server (``tests.servers.FaultyHTTPServer``, faults off, folder listings on) logs
every request in order. Two ranks (``torch.multiprocessing.spawn``, gloo) each build the
dataset, make a loader with 2 workers and read two epochs; each rank marks its first batch and
rank 0 the start of epoch 2 with a request of its own, so the log splits into "until every rank
had its first batch", "the rest of epoch 1" and "epoch 2". Counted: LIST (a GET of a folder: a
glob's listing), HEAD (a size asked for) and GET (bytes). "first batch" is the slowest rank's time
from building the dataset (after ``init_process_group``) to its first batch.

Cases: tar shards as a brace range ``shard-{00000..09999}.tar`` and as a glob ``*.tar``
(``ImageTextShards``, one 8x8 JPEG + caption each); .txt files of 300 lines as a list of URLs
(``StreamingTextDataset``: byte ranges need every file's size); Parquet files of 300 rows as a
glob (``StreamingTextDataset``: row counts from the footers). The "S3" cases put the .txt and
Parquet files into moto's S3 server (``tests.servers.s3_server``, read through s3fs; its access
log counts the requests, a LIST being a GET of the bucket with ``list-type``).
"""

from __future__ import annotations

import argparse
import io
import logging
import multiprocessing
import os
import re
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

if __package__ in (None, ""):  # run as a script from a checkout: make the repo's recipes and tests importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from recipes.fixtures import fixtures_dir
from recipes.multimodal import ImageTextShards, multimodal_loader
from recipes.text import StreamingTextDataset, streaming_loader
from tests.servers import FaultyHTTPServer, s3_server

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
RANKS, WORKERS, BATCH, LINES = 2, 2, 32, 300
KINDS = ("LIST", "HEAD", "GET")
CASES = ("tar, brace range", "tar, glob", "txt, URL list", "parquet, glob", "txt, S3 URL list", "txt, S3 glob",
         "parquet, S3 glob")


def write_data(root: Path, files: int) -> None:
    """``files`` tar shards of one sample, .txt files of ``LINES`` lines and Parquet files of ``LINES``
    rows under ``root``."""
    from PIL import Image

    image = io.BytesIO()
    Image.new("RGB", (8, 8), (200, 30, 60)).save(image, format="JPEG")
    shard = io.BytesIO()
    with tarfile.open(fileobj=shard, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, data in (("000000.jpg", image.getvalue()), ("000000.txt", b"a small red square")):
            member = tarfile.TarInfo(name)
            member.size = len(data)
            tar.addfile(member, io.BytesIO(data))
    # 300 lines or rows a file: a text stream's reader tokenises 1024 at once, from 4 files, not 342
    lines = [f"line {number} of a small file, a few words long" for number in range(LINES)]
    text = "".join(f"{line}\n" for line in lines).encode()
    for folder in ("tars", "texts", "tables"):
        (root / folder).mkdir(parents=True)
    for number in range(files):
        (root / "tars" / f"shard-{number:05d}.tar").write_bytes(shard.getvalue())
        (root / "texts" / f"part-{number:05d}.txt").write_bytes(text)
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = io.BytesIO()
    pq.write_table(pa.table({"text": lines}), table)
    for number in range(files):
        (root / "tables" / f"part-{number:05d}.parquet").write_bytes(table.getvalue())


def build(case: str, url: str, files: int, options: dict[str, Any] | None = None) -> Any:
    """The case's loader, on this rank (a process group is initialised); ``options``: S3's."""
    tokenizer = str(fixtures_dir() / "text" / "tokenizer.json")
    if case.startswith("tar"):
        last = f"{files - 1:05d}"
        pattern = f"{url}/tars/shard-{{00000..{last}}}.tar" if "brace" in case else f"{url}/tars/*.tar"
        return multimodal_loader(ImageTextShards(pattern, tokenizer), BATCH, train=False, device="cpu",
                                 num_workers=WORKERS)
    if "S3" in case:
        url = "s3://data"
    if case.startswith("txt") and "glob" in case:
        source: Any = f"{url}/texts/*.txt"
    elif case.startswith("txt"):
        source = [f"{url}/texts/part-{number:05d}.txt" for number in range(files)]
    else:
        source = f"{url}/tables/*.parquet"
    stream = StreamingTextDataset(source, tokenizer, pad_id=0, storage_options=options)
    return streaming_loader(stream, BATCH, train=False, device="cpu", num_workers=WORKERS)


def mark(url: str, name: str) -> None:
    """A request the server logs (and answers 404): where a phase ends, in the log's order."""
    try:
        urllib.request.urlopen(f"{url}/__mark__/{name}").close()
    except urllib.error.HTTPError:
        pass


def rank_main(rank: int, case: str, url: str, files: int, port: int, times: Any, options: Any = None) -> None:
    # the loader's workers forked, as under torchrun: a spawned rank would spawn them too, and
    # their start (imports, ~10 s here) would hide what the listing costs
    multiprocessing.set_start_method("fork", force=True)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=RANKS)
    try:
        dist.barrier()
        start = time.perf_counter()
        loader = build(case, url, files, options)
        built = time.perf_counter() - start
        batches = iter(loader)
        next(batches)
        times[rank] = (built, time.perf_counter() - start)
        mark(url, f"first-batch-{rank}")
        for _ in batches:
            pass
        dist.barrier()
        if rank == 0:
            mark(url, "epoch-2")
        dist.barrier()
        for _ in loader:
            pass
        dist.barrier()
    finally:
        dist.destroy_process_group()


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def counts(log: list[tuple[str, str]]) -> str:
    return " / ".join(f"{sum(method == kind for method, _ in log)}" for kind in KINDS)


def spawn(case: str, url: str, files: int, options: Any = None) -> dict[int, tuple[float, float]]:
    with mp.get_context("spawn").Manager() as manager:
        times = manager.dict()
        mp.spawn(rank_main, args=(case, url, files, free_port(), times, options), nprocs=RANKS)
        return dict(times)


class S3Log(logging.Handler):
    """moto's access log (werkzeug's, in this process) as ``(LIST / HEAD / GET, path)``."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.log: list[tuple[str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        found = re.search(r"([A-Z]+) (/\S*) HTTP/", record.getMessage())
        if found:
            self.log.append(("LIST" if "list-type=" in found[2] else found[1], found[2]))


def run_s3(case: str, root: Path, files: int) -> tuple[dict[int, tuple[float, float]], list[tuple[str, str]]]:
    """The case's files put into moto's S3 (8 at a time), then the job, its requests logged."""
    import boto3

    handler, logger = S3Log(), logging.getLogger("werkzeug")
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)  # werkzeug's own stream handler stays off: no line a request on stderr
    logger.propagate = False
    try:
        with s3_server() as (endpoint, options):
            client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="testing",
                                  aws_secret_access_key="testing", region_name="us-east-1")
            folder = "tables" if case.startswith("parquet") else "texts"
            names = sorted(path.name for path in (root / folder).iterdir())[:files]
            with ThreadPoolExecutor(8) as pool:
                list(pool.map(lambda name: client.put_object(Bucket="data", Key=f"{folder}/{name}",
                                                             Body=(root / folder / name).read_bytes()), names))
            handler.log.clear()
            times = spawn(case, endpoint, files, options)
    finally:
        logger.removeHandler(handler)
    return times, handler.log


def run(case: str, root: Path, files: int) -> dict[str, Any]:
    if "S3" in case:
        times, log = run_s3(case, root, files)
    else:
        with FaultyHTTPServer(root, listing=True) as server:
            times = spawn(case, server.url("").rstrip("/"), files)
            log = list(server.log)
    marks = [i for i, (_, path) in enumerate(log) if path.startswith("/__mark__/")]
    first = max(i for i in marks if log[i][1].startswith("/__mark__/first-batch"))
    epoch2 = next(i for i in marks if log[i][1] == "/__mark__/epoch-2")
    data = [entry for entry in log if not entry[1].startswith("/__mark__/")]
    before = [entry for entry in log[:first] if not entry[1].startswith("/__mark__/")]
    epoch1 = [entry for entry in log[:epoch2] if not entry[1].startswith("/__mark__/")]
    built, first_batch = (max(phase) for phase in zip(*times.values()))
    return {"built": built, "first": first_batch, "before": counts(before),
            "epoch1": counts(epoch1), "epoch2": counts(data[len(epoch1):])}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=10_000, help="shards / files of each kind (default 10,000)")
    parser.add_argument("--cases", nargs="*", default=list(CASES), choices=CASES, metavar="CASE",
                        help=f"which cases, of {CASES}")
    args = parser.parse_args(argv)
    print(f"{args.files} files of each kind on the tests' HTTP server or moto's S3, {RANKS} ranks x {WORKERS} workers, "
          f"{len(os.sched_getaffinity(0))} CPUs, load average {os.getloadavg()[0]:.1f}, torch {torch.__version__}")
    print(f"requests as {' / '.join(KINDS)}; 'first batch' = until every rank had its first batch")
    print("| case | dataset built | first batch | requests to first batch | epoch 1 | epoch 2 |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="recipes-bench-listing-") as tmp:
        write_data(Path(tmp), args.files)
        for case in args.cases:
            result = run(case, Path(tmp), args.files)
            print(f"| {case} | {result['built']:.2f} s | {result['first']:.2f} s | {result['before']} | "
                  f"{result['epoch1']} | {result['epoch2']} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
