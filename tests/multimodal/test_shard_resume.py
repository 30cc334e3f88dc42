"""multimodal_loader(ImageTextShards(...), stateful=True): a fresh loader given the state yields
exactly the batches an uninterrupted run would have, at every stop, 0 and 2 workers, plain and
gzipped shards, local files and URLs."""

import gzip
import json

import pytest
from torchvision.transforms import v2

from recipes.multimodal import ImageTextShards, multimodal_loader, write_shards
from tests.harness import STOPS, check_resume
from tests.servers import FaultyHTTPServer

AUGMENT = v2.Compose([v2.RandomResizedCrop(16, scale=(0.3, 1.0), antialias=True), v2.RandomHorizontalFlip()])



@pytest.fixture(scope="module")
def shard_folder(fixtures, tmp_path_factory):
    """The 8 COCO-caption images (28 captions) in 4 plain shards of 2, and the same gzipped."""
    out = tmp_path_factory.mktemp("shards")
    for path in write_shards(fixtures / "multimodal" / "captions.json", out, samples_per_shard=2):
        (out / (path.name + ".gz")).write_bytes(gzip.compress(path.read_bytes()))
    return out


def _make(pattern, tokenizer, workers):
    shards = ImageTextShards(pattern, tokenizer, transform=AUGMENT, captions="all", shuffle_buffer=3, seed=2)
    return multimodal_loader(shards, 3, device="cpu", seed=2, stateful=True, num_workers=workers)


@pytest.fixture(scope="module")
def references(shard_folder, tokenizer):
    pattern = str(shard_folder / "shard-{000000..000003}.tar")
    loaders = {workers: _make(pattern, tokenizer, workers) for workers in (0, 2)}
    return {workers: [list(loader) for _ in range(3)] for workers, loader in loaders.items()}


@pytest.mark.parametrize("workers", [0, 2], ids=["workers0", "workers2"])
@pytest.mark.parametrize("stop", STOPS)
def test_resumed_shards_yield_exactly_the_batches_still_to_come(shard_folder, tokenizer, references, workers, stop):
    pattern = str(shard_folder / "shard-{000000..000003}.tar")
    reference = references[workers]
    check_resume(lambda: _make(pattern, tokenizer, workers), stop, len(reference[0]), reference)


def test_gzipped_shards_resume_by_reading_the_shard_from_its_start(shard_folder, tokenizer):
    pattern = str(shard_folder / "shard-{000000..000003}.tar.gz")  # no seeking into a gzip stream
    loader = _make(pattern, tokenizer, 0)
    reference = [list(loader) for _ in range(3)]
    for stop in ("1", "mid"):
        check_resume(lambda: _make(pattern, tokenizer, 0), stop, len(reference[0]), reference)


@pytest.mark.parametrize("workers", [0, 2], ids=["workers0", "workers2"])
def test_url_shards_resume_exactly_through_faults(shard_folder, tokenizer, references, workers):
    reference = references[workers]
    with FaultyHTTPServer(shard_folder, fail_every=5, cut_every=3) as server:
        pattern = server.url("shard-{000000..000003}.tar")
        check_resume(lambda: _make(pattern, tokenizer, workers), "mid", len(reference[0]), reference)
    assert server.faults["503"] > 0 and server.faults["cut"] > 0


def test_the_state_holds_positions_not_samples(shard_folder, tokenizer):
    loader = _make(str(shard_folder / "shard-{000000..000003}.tar"), tokenizer, 0)
    iterator = iter(loader)
    next(iterator)
    next(iterator)
    state = json.dumps(loader.state_dict())
    assert len(state) < 2000 and "pixel" not in state
