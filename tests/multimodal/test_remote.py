"""Tar shards over real servers (HTTP with injected faults, S3 through s3fs) give the local samples."""

import os

import pytest
from torchvision.transforms import v2

from recipes.core.contracts.errors import DataError
from recipes.core.contracts.read_options import ReadOptions
from recipes.core.sampling.stream_order import StreamOrder
from recipes.multimodal import ImageTextShards, multimodal_loader, write_shards
from tests.harness import digest
from tests.servers import FaultyHTTPServer, s3_server, upload

# the faults are retried as ever, without the real backoff's seconds (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("quick_retries")

RESIZE = v2.Compose([v2.Resize(24, antialias=True), v2.CenterCrop(24)])



@pytest.fixture(scope="module")
def shard_folder(fixtures, tmp_path_factory):
    out = tmp_path_factory.mktemp("shards")
    write_shards(fixtures / "multimodal" / "captions.json", out, samples_per_shard=2)  # 4 shards
    return out


def _batches(shards, workers):
    loader = multimodal_loader(shards, 4, train=False, device="cpu", num_workers=workers)
    return [batch for batch in loader]


def _by_key(batches):
    """Every item as (key, digest of its pixels and ids), sorted: workers interleave the order."""
    return sorted(
        (key, digest([batch["pixel_values"][i], batch["input_ids"][i][: batch["lengths"][i]]]))
        for batch in batches
        for i, key in enumerate(batch["key"])
    )


@pytest.mark.parametrize("workers", [0, 2])
def test_http_shards_with_503s_and_cut_bodies_give_the_local_samples(shard_folder, tokenizer, workers):
    options = dict(transform=RESIZE, captions="all", order=StreamOrder(shuffle_buffer=3, seed=0))
    local = _batches(ImageTextShards(str(shard_folder / "shard-{000000..000003}.tar"), tokenizer, **options), workers)
    with FaultyHTTPServer(shard_folder, fail_every=3, cut_every=4) as server:
        url = server.url("shard-{000000..000003}.tar")
        remote = _batches(ImageTextShards(url, tokenizer, **options), workers)
    assert server.faults["503"] > 0 and server.faults["cut"] > 0
    assert len(_by_key(local)) == 28 and _by_key(remote) == _by_key(local)
    if workers == 0:  # one reader: the same order too
        assert [digest(batch) for batch in remote] == [digest(batch) for batch in local]


@pytest.mark.parametrize("workers", [0, 2])
def test_s3_shards_through_s3fs_give_the_local_samples(shard_folder, tokenizer, workers):
    options = dict(transform=RESIZE, captions="first", order=StreamOrder(seed=0))
    local = _batches(ImageTextShards(shard_folder, tokenizer, **options), workers)
    with s3_server() as (endpoint, storage):
        upload(endpoint, shard_folder)
        shards = ImageTextShards("s3://data/shard-*.tar", tokenizer, storage_options=storage, **options)
        remote = _batches(shards, workers)
    assert len(_by_key(local)) == 8 and _by_key(remote) == _by_key(local)


def test_a_server_that_keeps_failing_is_named_or_skipped(shard_folder, tokenizer):
    with FaultyHTTPServer(shard_folder, fail_every=1) as server:
        url = server.url("shard-000000.tar")
        with pytest.raises(DataError, match=r"http://127.0.0.1:\d+/shard-000000.tar: read failed"):
            list(ImageTextShards(url, tokenizer))


def test_spawned_workers_read_url_shards(shard_folder, tokenizer):
    options = dict(transform=RESIZE, captions="first", order=StreamOrder(seed=0))
    local = _batches(ImageTextShards(shard_folder, tokenizer, **options), 0)
    with FaultyHTTPServer(shard_folder, cut_every=3) as server:
        shards = ImageTextShards(server.url("shard-{000000..000003}.tar"), tokenizer, **options)
        loader = multimodal_loader(shards, 4, train=False, device="cpu", num_workers=2, multiprocessing_context="spawn")
        remote = list(loader)
    assert _by_key(remote) == _by_key(local)


@pytest.mark.parametrize("manifest", ["manifest.jsonl", "manifest.csv", "captions.json"])
def test_a_caption_manifest_and_its_images_from_urls_equal_the_local_ones(fixtures, tokenizer, manifest):
    from recipes.multimodal import ImageTextDataset

    root = fixtures / "multimodal"
    local = ImageTextDataset(root / manifest, tokenizer, transform=RESIZE, captions="first")
    with FaultyHTTPServer(root, fail_every=4, cut_every=3) as server:
        # the manifest names images/img_0.jpg...: its URL's folder is the default image root
        remote = ImageTextDataset(server.url(manifest), tokenizer, transform=RESIZE, captions="first")
        pairs = [(remote[i], local[i]) for i in range(len(local))]
    assert server.faults["503"] > 0 and len(remote) == len(local)
    assert all(digest([a["image"], a["input_ids"]]) == digest([b["image"], b["input_ids"]]) for a, b in pairs)


@pytest.mark.parametrize("workers", [0, 2])
def test_cached_url_shards_are_read_from_disk_in_later_epochs(shard_folder, tokenizer, tmp_path, workers):
    options = dict(transform=RESIZE, captions="first", order=StreamOrder(seed=0))
    local = _by_key(_batches(ImageTextShards(shard_folder, tokenizer, **options), 0))
    with FaultyHTTPServer(shard_folder, cut_every=3) as server:
        shards = ImageTextShards(server.url("shard-{000000..000003}.tar"), tokenizer, cache_dir=tmp_path, **options)
        loader = multimodal_loader(shards, 4, train=False, device="cpu", num_workers=workers)
        first = _by_key(list(loader))
        fetched = server.gets
        second = _by_key(list(loader))
        assert server.gets == fetched  # the second epoch fetched no shard body
    assert first == second == local and len(list(tmp_path.glob("*.tar"))) == 4


def test_a_cached_sample_index_lets_the_next_build_read_no_shard(shard_folder, tokenizer, tmp_path):
    options = dict(transform=RESIZE, captions="first", order=StreamOrder(seed=0, rank=1, world_size=3))
    local = _by_key(_batches(ImageTextShards(shard_folder, tokenizer, **options), 0))
    with FaultyHTTPServer(shard_folder) as server:
        url = server.url("shard-{000000..000003}.tar")
        ImageTextShards(url, tokenizer, cache_dir=tmp_path, **options)
        assert server.count("GET") >= 4  # the first build walks every shard's headers
        before = len(server.log)
        again = ImageTextShards(url, tokenizer, cache_dir=tmp_path, **options)
        assert len(server.log) == before  # the second asks nothing
        assert _by_key(_batches(again, 0)) == local and len(local) == 3  # rank 1's 3 of the 8 samples
    assert [path.name.startswith("shards-index-") for path in tmp_path.glob("*.npz")] == [True]


def test_cache_verify_fetches_again_a_cached_shard_damaged_behind_its_mtime(shard_folder, tokenizer, tmp_path):
    options = dict(transform=RESIZE, captions="first", order=StreamOrder(seed=0))
    local = _by_key(_batches(ImageTextShards(shard_folder, tokenizer, **options), 0))
    with FaultyHTTPServer(shard_folder) as server:
        url = server.url("shard-{000000..000003}.tar")
        trusting = ImageTextShards(url, tokenizer, cache_dir=tmp_path, **options)
        verifying = ImageTextShards(url, tokenizer, cache_dir=tmp_path, read_options=ReadOptions(verify_cache=True),
                                    **options)
        assert _by_key(_batches(trusting, 0)) == local
        copy = trusting.cache.entry(server.url("shard-000001.tar"))
        stat, data = copy.stat(), bytearray(copy.read_bytes())
        data[600] ^= 0xFF  # inside the first member's bytes; size and modification time kept
        copy.write_bytes(bytes(data))
        os.utime(copy, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        fetched = server.gets
        assert _by_key(_batches(verifying, 0)) == local
        assert server.gets == fetched + 1  # that shard alone, fetched again
    assert copy.read_bytes() == (shard_folder / "shard-000001.tar").read_bytes()
