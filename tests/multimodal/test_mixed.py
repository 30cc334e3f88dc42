"""Mixtures through multimodal_loader: a MixedDataset of two ImageTextDatasets (batches name
mixture indices whose captions are the sources' own) and a MixedStream of two shard sets (exact
shares), each resumed exactly with 2 workers."""

import pytest
from torchvision.transforms import v2

from recipes.core import MixedDataset, MixedStream
from recipes.multimodal import ImageTextDataset, ImageTextShards, multimodal_loader, write_shards
from recipes.core.sampling.stream_order import StreamOrder
from tests.harness import check_resume, check_resume_mid_epoch

RESIZE = v2.Resize((24, 24), antialias=True)


@pytest.fixture(scope="module")
def mixed(fixtures, tokenizer):
    root = fixtures / "multimodal"
    manifest = ImageTextDataset(root / "manifest.jsonl", tokenizer, transform=RESIZE, captions="first")
    captions = ImageTextDataset(root / "captions.json", tokenizer, transform=RESIZE, captions="all")
    return MixedDataset([manifest, captions], [1, 1], samples_per_epoch=32)


def test_batches_name_mixture_indices_with_the_sources_captions(mixed):
    seen = 0
    for batch in multimodal_loader(mixed, 4, device="cpu", seed=0, num_workers=0):
        for ids, mask, index in zip(batch["input_ids"], batch["attention_mask"], batch["index"].tolist()):
            source, local = mixed.locate(index)
            assert ids[mask.bool()].tolist() == mixed.datasets[source][local]["input_ids"].tolist()
            seen += 1
    assert seen == 32


def test_a_mixture_resumes_exactly(mixed):
    check_resume_mid_epoch(lambda: multimodal_loader(mixed, 4, device="cpu", seed=2, stateful=True, num_workers=2))


@pytest.fixture(scope="module")
def shard_sets(fixtures, tmp_path_factory):
    """The 8 caption images as 4 shards of 2 in ``a``, and the manifest's as ``b/other-*.tar``."""
    out = tmp_path_factory.mktemp("mixed-shards")
    write_shards(fixtures / "multimodal" / "captions.json", out / "a", samples_per_shard=2)
    for path in write_shards(fixtures / "multimodal" / "manifest.jsonl", out / "b", samples_per_shard=2):
        path.rename(path.with_name(path.name.replace("shard-", "other-")))
    return out


def _stream_mixture(shard_sets, tokenizer, workers):
    a = ImageTextShards(shard_sets / "a", tokenizer, transform=RESIZE, order=StreamOrder(shuffle_buffer=3, seed=1))
    b = ImageTextShards(str(shard_sets / "b" / "other-*.tar"), tokenizer, transform=RESIZE,
                        order=StreamOrder(shuffle_buffer=3, seed=2))
    mixture = MixedStream([a, b], [1, 3], samples_per_epoch=24, seed=0)
    return multimodal_loader(mixture, 3, device="cpu", seed=2, stateful=True, num_workers=workers)


@pytest.mark.parametrize("workers", [0, 2], ids=["workers0", "workers2"])
def test_a_mixture_of_shard_streams_draws_its_shares_and_resumes_exactly(shard_sets, tokenizer, workers):
    loader = _stream_mixture(shard_sets, tokenizer, workers)
    reference = [list(loader) for _ in range(3)]
    for epoch in reference:
        keys = [key for batch in epoch for key in batch["key"]]
        assert len(keys) == 24 and sum(key.startswith("shard-") for key in keys) == 6  # weights 1:3
    check_resume(lambda: _stream_mixture(shard_sets, tokenizer, workers), "mid", len(reference[0]), reference)
