"""Image-caption streams: recipes' tar shards against webdataset, litdata and MosaicML streaming.

    python benchmarks/streams.py            # 2000 pairs, shards of 125, 2 workers, 5 rounds (~2 min)
    python benchmarks/streams.py --quick    # a smoke run: 200 pairs, shards of 25, 2 rounds

The same image-caption pairs (~100 distinct photo-like ~500 px JPEGs, q90, each reused under
several keys with its own random caption) are written in each library's own format:

- recipes and webdataset: WebDataset tar shards, ``write_shards(manifest, dir, samples_per_shard=125)``;
- litdata: ``litdata.optimize(fn=..., inputs=rows, output_dir=dir, chunk_bytes="64MB")`` chunks,
  each sample ``{"key": str, "jpg": bytes, "txt": str}``;
- Mosaic: ``streaming.MDSWriter(out=dir, columns={"key": "str", "jpg": "bytes", "txt": "str"})``
  shards (its default 64 MiB size limit).

Each is read through a DataLoader with 2 workers, two ways:

(a) raw samples, ``batch_size=None`` (key, JPEG bytes, caption; nothing decoded):
    recipes: a small IterableDataset here that reads ``shards[slot::slots]`` with
    ``recipes.multimodal.tar_shards.read_samples``; webdataset: ``wds.WebDataset(urls, shardshuffle=False)``;
    litdata: ``litdata.StreamingDataset(dir, transform=...)`` (its ``bytes`` come back as views of
    its memory map, which pickle to no other process: the transform copies them to ``bytes``);
    Mosaic: ``streaming.StreamingDataset(local=dir, shuffle=False, batch_size=32)``.
(b) the full pipeline: decode, RandomResizedCrop(224) + flip (``recipes.vision.train_transform``,
    the same transform for all), tokenise (the fixture BPE, at most 77 ids), batches of 32:
    recipes: ``multimodal_loader(ImageTextShards(shards, tokenizer, transform=...), 32, device="cpu",
    num_workers=2)`` (TorchCodec decode, ids padded to the batch's longest caption);
    webdataset as open_clip builds it: ``.decode("torchrgb8")`` (its PIL decoder) ->
    ``.to_tuple("jpg", "txt")`` -> ``.map_tuple(transform, tokenize)`` -> ``.batched(32)``, and a
    second row with ``torchvision.io.decode_jpeg`` instead of its decoder (the loader's share);
    litdata: ``StreamingDataLoader(StreamingDataset(dir, transform=...), batch_size=32)``; Mosaic:
    a ``StreamingDataset`` subclass whose ``__getitem__`` does the work, in a DataLoader. litdata
    and Mosaic decode with ``torchvision.io.decode_jpeg``, as litdata's own JPEG serializer does.
    The peers pad ids to 77, as open_clip's ``tokenize`` does. Nothing is shuffled.
(c) the raw reads of (a) in this process, no DataLoader: each reader's own cost per sample,
    without the hand-over from a worker (pickling ~80 KB through a pipe), which is alike for all.

(a) and (b) also run from a local HTTP server (the tests' ``FaultyHTTPServer``, faults off: HEAD and
byte ranges, in a child process so that its threads take no turns on the loader's interpreter
lock): recipes through fsspec (``http://127.0.0.1:PORT/tars/shard-{000000..000015}.tar``),
uncached and with ``cache_dir=`` warm; webdataset through its ``curl`` pipe. litdata and Mosaic
read object stores (S3, GCS, Azure, ...) and local folders, not plain HTTP URLs: no HTTP rows.

Each pass builds its loader anew: "first batch" runs from building the dataset (each library's
index or metadata read included) to the first batch; samples/s counts what arrives after the
first batch. CPU us/sample (psutil; the main process and everything it starts, the HTTP server
excepted, worker start-up included) is a second view, less swayed by how fast the machine runs
that minute. One warm-up pass each (page cache, imports, the disk cache), then the contenders
alternate pass by pass, the order reversed every other round; medians, ratios per round.

A peer that is not installed is skipped with a line saying so. mosaicml-streaming 0.13 pins
transformers<5 and numpy<2.2, so it does not install beside the test extras; in a venv of its own:

    python -m venv /tmp/streamsvenv
    /tmp/streamsvenv/bin/pip install -e ".[bench-streams]"
    /tmp/streamsvenv/bin/python benchmarks/streams.py
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tokenizers import Tokenizer
from torch.utils.data import DataLoader, IterableDataset
from torchvision.io import ImageReadMode, decode_jpeg

if __package__ in (None, ""):  # run as a script from a checkout: make the repo's recipes importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vision import cpu_seconds, photo  # benchmarks/vision.py (this script's folder): JPEGs, CPU time

from recipes.core.sources.disk_cache import DiskCache
from recipes.core.sources.streams import reader_slot
from recipes.fixtures import fixtures_dir
from recipes.text.fixtures import WORDS
from recipes.multimodal import ImageTextShards, expand_shards, multimodal_loader, write_shards
from recipes.multimodal.tar_shards import read_samples
from recipes.vision import train_transform
from recipes.core.sampling.stream_order import StreamOrder

# torchvision 0.29 deprecates its decoders for TorchCodec and warns on every call: it is the
# peers' decoder here (litdata's own JPEG serializer calls it), so that warning is silenced, and
# so is torch's on a tensor over read-only bytes (decode_jpeg only reads them).
warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"torchvision\.io")
warnings.filterwarnings("ignore", message="The given buffer is not writable")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

BATCH, WORKERS, SIZE, CONTEXT = 32, 2, 224, 77


# ---------------------------------------------------------------- data, in each library's format


def make_pairs(root: Path, pairs: int, distinct: int, seed: int = 0) -> Path:
    """``distinct`` photo-like JPEGs reused for ``pairs`` rows of a JSONL manifest, each with its
    own random caption (the images' cost is their decoding; the rows need not differ in pixels)."""
    rng = np.random.default_rng(seed)
    (root / "images").mkdir(parents=True)
    for index in range(distinct):
        width, height = 500, int(rng.integers(333, 501))
        if rng.random() < 0.3:
            width, height = height, width
        photo(rng, width, height).save(root / "images" / f"{index:04d}.jpg", "JPEG", quality=90)
    manifest = root / "pairs.jsonl"
    with open(manifest, "w", encoding="utf-8") as file:
        for row in range(pairs):
            caption = " ".join(rng.choice(WORDS, size=int(rng.integers(5, 25)))).capitalize() + "."
            file.write(json.dumps({"image": f"images/{row % distinct:04d}.jpg", "caption": caption}) + "\n")
    return manifest


def _rows(manifest: Path) -> list[tuple[str, str, str]]:
    """``(key, image path, caption)`` per manifest row, keyed as write_shards keys the tar members."""
    with open(manifest, encoding="utf-8") as file:
        rows = [json.loads(line) for line in file]
    return [(f"{i:09d}", str(manifest.parent / row["image"]), row["caption"]) for i, row in enumerate(rows)]


def litdata_sample(row: tuple[str, str, str]) -> dict[str, Any]:
    """One litdata sample from a manifest row: the JPEG's bytes as they are, and the caption."""
    key, path, caption = row
    return {"key": key, "jpg": Path(path).read_bytes(), "txt": caption}


def write_litdata(manifest: Path, out: Path) -> None:
    import litdata

    # optimize() sets the process-wide start method to "spawn" (force=True): every DataLoader
    # after it would start its workers by re-importing this script (~2 s each). Put it back.
    method = multiprocessing.get_start_method(allow_none=True)
    try:
        litdata.optimize(fn=litdata_sample, inputs=_rows(manifest), output_dir=str(out), chunk_bytes="64MB",
                         num_workers=WORKERS, verbose=False)
    finally:
        multiprocessing.set_start_method(method, force=True)


def write_mosaic(manifest: Path, out: Path) -> None:
    from streaming import MDSWriter

    with MDSWriter(out=str(out), columns={"key": "str", "jpg": "bytes", "txt": "str"}) as writer:
        for key, path, caption in _rows(manifest):
            writer.write({"key": key, "jpg": Path(path).read_bytes(), "txt": caption})


# ---------------------------------------------------------------- the local HTTP server


def _serve(root: Path, url: Any) -> None:
    from tests.servers import FaultyHTTPServer  # the tests' server, without faults

    with FaultyHTTPServer(root) as server:
        url.send(server.url("").rstrip("/"))
        threading.Event().wait()  # until terminated


class HTTPServer:
    """``tests.servers.FaultyHTTPServer`` (HEAD, GET, byte ranges) serving ``root`` on 127.0.0.1,
    a free port, in a child process, so that its threads take no turns on this interpreter's lock."""

    def __init__(self, root: Path) -> None:
        context = multiprocessing.get_context("fork")
        receive, send = context.Pipe(duplex=False)
        self.process = context.Process(target=_serve, args=(root, send), daemon=True)
        self.process.start()
        self.url = receive.recv()

    def close(self) -> None:
        self.process.terminate()
        self.process.join()


# ---------------------------------------------------------------- raw samples


class TarSamples(IterableDataset):
    """Raw ``(shard, key, {extension: bytes})`` samples: DataLoader worker ``w`` of ``n`` reads
    ``shards[w::n]`` with ``read_samples``, through a disk cache if ``cache_dir`` is given."""

    def __init__(self, shards: list[str], cache_dir: Path | None = None) -> None:
        self.shards, self.cache_dir = shards, cache_dir

    def __iter__(self) -> Iterator[tuple[str, str, dict[str, bytes]]]:
        slot, slots = reader_slot(0, 1)
        cache = DiskCache(self.cache_dir) if self.cache_dir is not None else None
        for _, sample in read_samples(self.shards[slot::slots], cache=cache):
            yield sample


def owned_bytes(sample: dict[str, Any]) -> dict[str, Any]:
    """litdata hands ``bytes`` fields out as views of its memory-mapped chunk, which no worker
    can pickle (and a plain DataLoader's ``default_convert`` turns into lists of ints): copy them."""
    return {name: bytes(value) if isinstance(value, memoryview) else value for name, value in sample.items()}


def raw_loader(dataset: Any) -> DataLoader:
    return DataLoader(dataset, batch_size=None, num_workers=WORKERS)


# ---------------------------------------------------------------- the full pipeline (peers)


class CaptionIds:
    """open_clip's ``tokenize``: the caption's ids, truncated and zero-padded -> int64 [77]."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer

    def __call__(self, caption: str | bytes) -> torch.Tensor:
        text = caption.decode("utf-8") if isinstance(caption, bytes) else caption
        ids = self.tokenizer.encode(text).ids[:CONTEXT]
        out = torch.zeros(CONTEXT, dtype=torch.int64)
        out[: len(ids)] = torch.tensor(ids, dtype=torch.int64)
        return out


def torchvision_decode(data: bytes | memoryview) -> torch.Tensor:
    """uint8 [3,H,W], as litdata's JPEG serializer decodes (``torchvision.io.decode_jpeg``)."""
    return decode_jpeg(torch.frombuffer(data, dtype=torch.uint8), mode=ImageReadMode.RGB)


class PairTransform:
    """A stored ``{"jpg", "txt"}`` sample -> ``(uint8 [3,224,224], int64 [77])``."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.transform, self.ids = train_transform(SIZE), CaptionIds(tokenizer)

    def __call__(self, sample: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
        return self.transform(torchvision_decode(sample["jpg"])), self.ids(sample["txt"])


def webdataset_pipeline(urls: str, tokenizer: Tokenizer, own_decoder: bool = True) -> Any:
    import webdataset as wds

    transform, ids = train_transform(SIZE), CaptionIds(tokenizer)
    dataset = wds.WebDataset(urls, shardshuffle=False, empty_check=False)
    if own_decoder:
        dataset = dataset.decode("torchrgb8").to_tuple("jpg", "txt").map_tuple(transform, ids)
    else:
        dataset = dataset.to_tuple("jpg", "txt").map_tuple(lambda data: transform(torchvision_decode(data)), ids)
    return dataset.batched(BATCH)


def mosaic_pairs(local: Path, tokenizer: Tokenizer) -> Any:
    """Mosaic's StreamingDataset with the pipeline in ``__getitem__``, as its docs subclass it."""
    from streaming import StreamingDataset

    class MosaicPairs(StreamingDataset):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.pair = PairTransform(tokenizer)

        def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
            return self.pair(super().__getitem__(index))

    return MosaicPairs(local=str(local), shuffle=False, batch_size=BATCH)


# ---------------------------------------------------------------- timing


def timed_pass(make: Callable[[], Any], server_pid: int) -> tuple[int, float, float, float | None]:
    """``(samples, samples/s after the first batch, seconds to the first batch, CPU s)`` of one
    pass through a loader built by ``make``; the loader and its workers are gone on return."""
    cpu = cpu_seconds(server_pid)
    start = time.perf_counter()
    loader = make()
    count, first, first_count, batch = 0, None, 0, None
    for batch in loader:
        if isinstance(batch, dict) and "pixel_values" in batch:
            size = len(batch["pixel_values"])
        elif isinstance(batch, (tuple, list)) and isinstance(batch[0], torch.Tensor):
            size = len(batch[0])
        else:
            size = 1  # a raw sample
        count += size
        if first is None:
            first, first_count = time.perf_counter(), size
    end = time.perf_counter()
    if first is None:
        raise RuntimeError("the loader yielded nothing")
    del loader, batch
    gc.collect()  # persistent workers (ours) exit here, and Mosaic's shared memory goes
    spent = cpu_seconds(server_pid)
    rate = (count - first_count) / (end - first) if end > first else float("nan")  # one batch: no rate
    return count, rate, first - start, None if cpu is None else spent - cpu


def alternate(runs: dict[str, Callable[[], Any]], rounds: int, server_pid: int, expect: Callable[[int], bool]) -> dict:
    """A warm-up pass each, then ``rounds`` of one pass each, the order reversed every other round."""
    for name, make in runs.items():
        count = timed_pass(make, server_pid)[0]
        if not expect(count):
            raise RuntimeError(f"{name}: {count} samples in a pass, not what was written")
    results: dict[str, dict[str, list[float]]] = {name: {"rate": [], "first": [], "cpu": []} for name in runs}
    for round_ in range(rounds):
        for name in list(runs) if round_ % 2 == 0 else list(runs)[::-1]:
            count, rate, first, cpu = timed_pass(runs[name], server_pid)
            results[name]["rate"].append(rate)
            results[name]["first"].append(first)
            if cpu is not None:
                results[name]["cpu"].append(cpu / count)
    return results


def report(title: str, results: dict, ratios: list[tuple[str, str, str, float]], peers: tuple[str, ...]) -> None:
    """A table of medians, then each ``(ours, peer, what, goal)`` ratio, per round and median;
    the peer ``"best"`` is the one of ``peers`` with the highest median rate."""
    print(f"\n{title}")
    header = f"{'samples/s':>9s} {'us/sample':>9s} {'CPU us/sample':>13s} {'first batch':>11s}"
    print(f"  {'':40s} {header}  rounds (samples/s)")
    for name, result in results.items():
        rate = statistics.median(result["rate"])
        cpu = f"{statistics.median(result['cpu']) * 1e6:13.0f}" if result["cpu"] else f"{'':13s}"
        print(f"  {name:40s} {rate:9.0f} {1e6 / rate:9.0f} {cpu} {statistics.median(result['first']) * 1e3:8.0f} ms  "
              + ", ".join(f"{v:.0f}" for v in result["rate"]))
    present = [name for name in peers if name in results]
    best = max(present, key=lambda name: statistics.median(results[name]["rate"])) if present else None
    for ours, peer, what, goal in ratios:
        if peer == "best":
            peer, what = best, f"{what} ({best})"
        if ours not in results or peer not in results:
            continue
        per_round = [a / b for a, b in zip(results[ours]["rate"], results[peer]["rate"])]
        ratio = statistics.median(per_round)
        verdict = f"goal >= {goal:.2f}x: {'met' if ratio >= goal else 'NOT met'}" if goal else "no goal"
        print(f"  {what}: {ratio:.2f}x median ({verdict}; per round: {', '.join(f'{r:.2f}' for r in per_round)})")


def read_in_process(readers: dict[str, Callable[[], Any]], rounds: int, expect: int) -> None:
    """Raw reads in this process, no DataLoader: what each reader costs a sample before the
    worker hands it over (the hand-over, pickling ~80 KB through a pipe, is the same for all)."""
    for name, reader in readers.items():
        if sum(1 for _ in reader()) != expect:
            raise RuntimeError(f"{name}: not {expect} samples")
    times: dict[str, list[float]] = {name: [] for name in readers}
    for round_ in range(rounds):
        for name in list(readers) if round_ % 2 == 0 else list(readers)[::-1]:
            start = time.perf_counter()
            count = sum(1 for _ in readers[name]())
            times[name].append((time.perf_counter() - start) / count * 1e6)
            gc.collect()  # Mosaic's shared memory goes with its dataset
    print("\n(c) the raw reads of (a) in one process, no DataLoader, one core")
    for name, values in times.items():
        rounds_text = ", ".join(f"{value:.1f}" for value in values)
        print(f"  {name:40s} {statistics.median(values):7.1f} us/sample  (rounds: {rounds_text})")


# ---------------------------------------------------------------- the contenders


@dataclass
class Data:
    """The written formats: tar shards (paths, and brace patterns on disk and over HTTP), the
    litdata and Mosaic folders, and where the warm disk caches live."""

    shards: list[str]
    local: str
    urls: str
    root: Path
    cache: Path


def import_peers() -> dict[str, Any]:
    """The peer libraries that are installed, by import name; a line for each missing one."""
    peers = {}
    for module, package in (("webdataset", "webdataset"), ("litdata", "litdata"), ("streaming", "mosaicml-streaming")):
        try:
            peers[module] = importlib.import_module(module)
        except ImportError:
            print(f"({package} is not installed: its rows are skipped; pip install {package})")
    return peers


def write_formats(manifest: Path, root: Path, shard_size: int, peers: dict[str, Any]) -> list[str]:
    """Each library's format under ``root``; prints how long each took and its size. Returns the shards."""
    writers = {"tars": ("tar shards, write_shards()", lambda: write_shards(manifest, root / "tars", shard_size))}
    if "litdata" in peers:
        writers["litdata"] = ("litdata, optimize()", lambda: write_litdata(manifest, root / "litdata"))
    if "streaming" in peers:
        writers["mds"] = ("Mosaic, MDSWriter", lambda: write_mosaic(manifest, root / "mds"))
    for folder, (name, write) in writers.items():
        start = time.perf_counter()
        write()
        files = [path for path in (root / folder).iterdir() if path.is_file()]
        megabytes = sum(path.stat().st_size for path in files) / 2**20
        print(f"  {name:28s} {time.perf_counter() - start:5.1f}s, {len(files)} files, {megabytes:.0f} MB")
    return [str(path) for path in sorted((root / "tars").glob("shard-*.tar"))]


def raw_contenders(data: Data, peers: dict[str, Any]) -> dict[str, Callable[[], Any]]:
    """Name -> a function building a loader of raw samples, local first, then over HTTP."""
    wds, litdata, streaming = (peers.get(name) for name in ("webdataset", "litdata", "streaming"))
    runs = {"recipes, tar": lambda: raw_loader(TarSamples(data.shards))}
    if wds:
        runs["webdataset, tar"] = lambda: raw_loader(wds.WebDataset(data.local, shardshuffle=False, empty_check=False))
    if litdata:
        runs["litdata, chunks"] = lambda: raw_loader(
            litdata.StreamingDataset(str(data.root / "litdata"), transform=owned_bytes))
    if streaming:
        runs["Mosaic, MDS"] = lambda: raw_loader(
            streaming.StreamingDataset(local=str(data.root / "mds"), shuffle=False, batch_size=BATCH))
    runs["recipes, tar, HTTP"] = lambda: raw_loader(TarSamples(expand_shards(data.urls)))
    runs["recipes, tar, HTTP, warm cache_dir"] = lambda: raw_loader(
        TarSamples(expand_shards(data.urls), data.cache / "raw"))
    if wds:
        runs["webdataset, tar, HTTP (curl)"] = lambda: raw_loader(
            wds.WebDataset(data.urls, shardshuffle=False, empty_check=False))
    return runs


def full_contenders(data: Data, peers: dict[str, Any], tokenizer: Tokenizer) -> dict[str, Callable[[], Any]]:
    """Name -> a function building a loader of the full pipeline, local first, then over HTTP."""
    litdata = peers.get("litdata")

    def ours(paths: str, cache_dir: Path | None = None) -> DataLoader:
        shards = ImageTextShards(paths, tokenizer, transform=train_transform(SIZE), cache_dir=cache_dir,
                                 order=StreamOrder(seed=0))
        return multimodal_loader(shards, BATCH, device="cpu", num_workers=WORKERS, seed=0)

    def plain(dataset: Any, batch_size: int | None) -> DataLoader:
        return DataLoader(dataset, batch_size=batch_size, num_workers=WORKERS)

    runs = {"recipes, tar": lambda: ours(data.local)}
    if "webdataset" in peers:
        runs["webdataset, tar"] = lambda: plain(webdataset_pipeline(data.local, tokenizer), None)
        runs["webdataset, tar, torchvision decode"] = lambda: plain(
            webdataset_pipeline(data.local, tokenizer, own_decoder=False), None)
    if litdata:
        runs["litdata, chunks"] = lambda: litdata.StreamingDataLoader(
            litdata.StreamingDataset(str(data.root / "litdata"), transform=PairTransform(tokenizer)),
            batch_size=BATCH, num_workers=WORKERS)
    if "streaming" in peers:
        runs["Mosaic, MDS"] = lambda: plain(mosaic_pairs(data.root / "mds", tokenizer), BATCH)
    runs["recipes, tar, HTTP"] = lambda: ours(data.urls)
    runs["recipes, tar, HTTP, warm cache_dir"] = lambda: ours(data.urls, data.cache / "full")
    if "webdataset" in peers:
        runs["webdataset, tar, HTTP (curl)"] = lambda: plain(webdataset_pipeline(data.urls, tokenizer), None)
    return runs


def in_process_readers(data: Data, peers: dict[str, Any]) -> dict[str, Callable[[], Any]]:
    """Name -> a function returning an iterable of the raw samples, read in this process."""
    wds, litdata, streaming = (peers.get(name) for name in ("webdataset", "litdata", "streaming"))
    readers: dict[str, Callable[[], Any]] = {"recipes, tar (read_samples)": lambda: read_samples(data.shards)}
    if wds:
        readers["webdataset, tar"] = lambda: wds.WebDataset(data.local, shardshuffle=False, empty_check=False)
    if litdata:
        readers["litdata, chunks (memoryview -> bytes)"] = lambda: litdata.StreamingDataset(
            str(data.root / "litdata"), transform=owned_bytes)
    if streaming:
        readers["Mosaic, MDS"] = lambda: streaming.StreamingDataset(
            local=str(data.root / "mds"), shuffle=False, batch_size=BATCH)
    return readers


# Each (ours, peer, what, goal) ratio of a table; "best" is the fastest peer on local disk, a goal of 0 is none.
LOCAL_PEERS = ("webdataset, tar", "litdata, chunks", "Mosaic, MDS")
HTTP_RATIOS = [
    ("recipes, tar, HTTP, warm cache_dir", "recipes, tar", "recipes HTTP warm cache / local", 0.9),
    ("recipes, tar, HTTP", "recipes, tar", "recipes HTTP uncached / local", 0.0),
    ("recipes, tar, HTTP", "webdataset, tar, HTTP (curl)", "recipes HTTP / webdataset HTTP", 0.0),
]
RAW_RATIOS = [("recipes, tar", "best", "recipes / best peer", 1.0),
              ("recipes, tar", "webdataset, tar", "recipes / webdataset", 0.0), *HTTP_RATIOS]
FULL_RATIOS = [("recipes, tar", "webdataset, tar", "recipes / webdataset", 1.5),
               ("recipes, tar", "best", "recipes / best peer", 0.0), *HTTP_RATIOS]


# ---------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="200 pairs, shards of 25, 2 rounds: a smoke run")
    parser.add_argument("--pairs", type=int, default=None, help="image-caption pairs (default 2000, quick 200)")
    parser.add_argument("--shard-size", type=int, default=None, help="pairs per tar shard (default 125, quick 25)")
    parser.add_argument("--rounds", type=int, default=None, help="alternating rounds (default 5, quick 2)")
    args = parser.parse_args(argv)
    pairs = args.pairs or (200 if args.quick else 2000)
    shard_size = args.shard_size or (25 if args.quick else 125)
    rounds = args.rounds or (2 if args.quick else 5)
    torch.set_num_threads(1)  # the main process only receives batches; leave the cores to the workers
    tokenizer = Tokenizer.from_file(str(fixtures_dir() / "text" / "tokenizer.json"))
    peers = import_peers()
    with tempfile.TemporaryDirectory(prefix="recipes-bench-streams-") as tmp:
        start = time.perf_counter()
        manifest = make_pairs(Path(tmp) / "source", pairs, distinct=min(100, max(10, pairs // 5)))
        images = sorted((Path(tmp) / "source" / "images").iterdir())
        kilobytes = np.mean([path.stat().st_size for path in images]) / 1024
        print(f"{pairs} image-caption pairs ({len(images)} distinct photo-like ~500 px JPEGs, {kilobytes:.0f} KB "
              f"average), generated in {time.perf_counter() - start:.1f}s; {WORKERS} workers, batch {BATCH}, "
              f"{rounds} rounds, {len(os.sched_getaffinity(0))} CPUs, load average {os.getloadavg()[0]:.1f}")
        versions = "".join(f", {name} {getattr(module, '__version__', '?')}" for name, module in peers.items())
        print(f"torch {torch.__version__}{versions}")
        root = Path(tmp) / "data"
        shards = write_formats(manifest, root, shard_size, peers)
        server = HTTPServer(root)
        try:
            pattern = f"shard-{{000000..{len(shards) - 1:06d}}}.tar"
            data = Data(shards, str(root / "tars" / pattern), f"{server.url}/tars/{pattern}", root, Path(tmp) / "cache")
            pid = server.process.pid
            print(f"serving {root.name}/ at {server.url}: ours through fsspec (aiohttp), webdataset through curl; "
                  "litdata and Mosaic read object stores and folders, not http:// URLs")

            results = alternate(raw_contenders(data, peers), rounds, pid, expect=lambda count: count == pairs)
            report(f"(a) raw samples (key, JPEG bytes, caption), batch_size=None, {WORKERS} workers, "
                   f"{len(shards)} tar shards", results, RAW_RATIOS, LOCAL_PEERS)

            # ours drops each worker's last partial batch (a training loader); the peers keep it
            results = alternate(full_contenders(data, peers, tokenizer), rounds, pid,
                                expect=lambda count: pairs - WORKERS * BATCH < count <= pairs)
            report(f"(b) full pipeline: decode, RandomResizedCrop(224) + flip, tokenise, batch {BATCH}, "
                   f"{WORKERS} workers", results, FULL_RATIOS, LOCAL_PEERS)

            read_in_process(in_process_readers(data, peers), max(rounds, 3), pairs)
        finally:
            server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
