"""multimodal_loader(ImageTextShards(...), stateful=True): a fresh loader given the state yields
exactly the batches an uninterrupted run would have, at every stop, 0 and 2 workers, plain and
gzipped shards, local files and URLs."""

import gzip
import json

import pytest
from torchvision.transforms import v2

from recipes.multimodal import ImageTextShards, multimodal_loader, write_shards
from recipes.core.sampling.stream_order import StreamOrder
from tests.harness import STOPS, check_resume, mutated_state, mutation_cases
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
    shards = ImageTextShards(pattern, tokenizer, transform=AUGMENT, captions="all",
                             order=StreamOrder(shuffle_buffer=3, seed=2))
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


SHARD_FIELDS = ["seed", "epoch", "slots", "position", "position.0", "position.1", "position.1.0", "position.1.1", "position.2",
                "source"]
# a seed may be any integer and an epoch any large one; a block index is only a shuffle's seed
VALID_VALUES = {("seed", "negative"), ("seed", "too-large"), ("epoch", "too-large"), ("position.0", "too-large"),
                ("source", "missing")}  # a state without a source is one 0.1.0 saved


def _shards(shard_folder, tokenizer):
    return ImageTextShards(str(shard_folder / "shard-{000000..000003}.tar"), tokenizer, captions="first",
                           order=StreamOrder(shuffle_buffer=3, seed=2))


@pytest.fixture(scope="module")
def mid_pass(shard_folder, tokenizer):
    """A reader's state 4 samples into its pass (in its second shard), and the samples that followed."""
    shards = _shards(shard_folder, tokenizer)
    items = iter(shards)
    for _ in range(4):
        next(items)
    return shards.state_dict(), [(item["key"], item["input_ids"].tolist()) for item in items]


def test_a_checked_state_still_resumes_exactly(shard_folder, tokenizer, mid_pass):
    state, rest = mid_pass
    assert state["position"][1][0] > 0 and rest  # mid-pass, past the first shard
    resumed = _shards(shard_folder, tokenizer)
    resumed.load_state_dict(json.loads(json.dumps(state)))
    assert [(item["key"], item["input_ids"].tolist()) for item in resumed] == rest


@pytest.mark.parametrize(("field", "kind"), mutation_cases(SHARD_FIELDS, VALID_VALUES))
def test_every_field_of_a_loaded_shard_state_is_checked(shard_folder, tokenizer, mid_pass, field, kind):
    state = mutated_state(mid_pass[0], field, kind)
    with pytest.raises(ValueError, match="ImageTextShards state|of the loaded state"):
        shards = _shards(shard_folder, tokenizer)
        shards.load_state_dict(state)
        next(iter(shards))


def test_a_negative_shard_index_no_longer_replays_the_epoch(shard_folder, tokenizer, mid_pass):
    state = mid_pass[0]
    shards = _shards(shard_folder, tokenizer)
    with pytest.raises(ValueError, match=r"position\[1\]\[0\] \(shard\) = -1 is not an integer in \[0, 3\]"):
        shards.load_state_dict({**state, "position": [state["position"][0], [-1, 0], 0]})


def test_a_state_of_other_shards_is_refused(shard_folder, tokenizer, mid_pass):
    others = ImageTextShards(str(shard_folder / "shard-{000000..000002}.tar"), tokenizer, captions="first",
                             order=StreamOrder(shuffle_buffer=3))
    with pytest.raises(ValueError, match=r"ImageTextShards state: source = '4 shards [0-9a-f]{8}' is not this one's '3 shards"):
        others.load_state_dict(mid_pass[0])
