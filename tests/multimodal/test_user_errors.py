"""A failing transform or collate names the sample: manifest line and image, or shard member."""

import hashlib
import json
import tarfile

import pytest
import torch
from torchvision.transforms import v2

from recipes.core.contracts.errors import SampleError
from recipes.multimodal import ImageTextDataset, ImageTextShards, multimodal_loader, write_shards
from tests.loader_errors import loader_error

TARGET = 4  # the manifest row whose image the transform fails on


def digest(image: torch.Tensor) -> str:
    return hashlib.sha1(image.contiguous().numpy().tobytes()).hexdigest()


class FailOnPixels:
    """Resize + centre crop, except on the image with the given pixels: what a user's bug looks like."""

    def __init__(self, target: str) -> None:
        self.target, self.resize = target, v2.Compose([v2.Resize(16, antialias=True), v2.CenterCrop(16)])

    def __call__(self, image: torch.Tensor) -> torch.Tensor:
        if digest(image) == self.target:
            raise RuntimeError("model expects 3 channels")
        return self.resize(image)


def failing_resize(image: torch.Tensor) -> torch.Tensor:
    raise RuntimeError("model expects 3 channels")


def manifest_rows(path) -> list[tuple[int, str]]:
    """(line number, image) of every row of a JSONL manifest, read with json."""
    lines = path.read_text().splitlines()
    return [(number, json.loads(line)["image"]) for number, line in enumerate(lines, start=1) if line.strip()]


@pytest.fixture(scope="module")
def failing(fixtures, tokenizer):
    plain = ImageTextDataset(fixtures / "multimodal" / "manifest.jsonl", tokenizer)
    digests = [digest(plain[index]["image"]) for index in range(len(plain))]
    assert digests.count(digests[TARGET]) == 1
    return FailOnPixels(digests[TARGET])


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("on_error", ["raise", "skip"])
def test_a_failing_transform_names_the_manifest_line_and_image_even_when_skipping(
    fixtures, tokenizer, failing, workers, on_error
):
    manifest = fixtures / "multimodal" / "manifest.jsonl"
    dataset = ImageTextDataset(manifest, tokenizer, transform=failing, on_error=on_error)
    loader = multimodal_loader(dataset, 2, train=False, device="cpu", num_workers=workers)
    error = loader_error(loader, SampleError)
    line, image = manifest_rows(manifest)[TARGET]
    expected = (
        f"dataset index {TARGET} ({manifest} line {line}, image {image}): "
        "the transform raised RuntimeError: model expects 3 channels"
    )
    assert expected in str(error)
    if workers == 0:
        assert isinstance(error.__cause__, RuntimeError)


@pytest.mark.parametrize("workers", [0, 1])
def test_a_failing_transform_on_shards_names_the_shard_and_member(fixtures, tokenizer, tmp_path, workers):
    paths = write_shards(fixtures / "multimodal" / "manifest.jsonl", tmp_path, samples_per_shard=4)
    shards = ImageTextShards(paths, tokenizer, transform=failing_resize, on_error="skip")
    error = loader_error(multimodal_loader(shards, 2, train=False, device="cpu", num_workers=workers), SampleError)
    with tarfile.open(paths[0]) as tar:
        first = tar.getnames()[0]  # shard order, member order: the first sample is the first to fail
    key, extension = first.rsplit(".", 1)
    expected = f"shard {paths[0]}:{key}.{extension}: the transform raised RuntimeError: model expects 3 channels"
    assert expected in str(error)


def test_a_failing_collate_names_the_lines_of_the_batch(fixtures, tokenizer):
    manifest = fixtures / "multimodal" / "manifest.jsonl"
    dataset = ImageTextDataset(manifest, tokenizer)  # no resize: sizes differ, multimodal_collate refuses
    rows = manifest_rows(manifest)
    loader = multimodal_loader(dataset, len(rows), train=False, device="cpu", num_workers=0)
    with pytest.raises(SampleError) as caught:
        list(loader)
    described = ", ".join(f"{manifest} line {line}, image {image}" for line, image in rows[:8])
    more = f" and {len(rows) - 8} more" if len(rows) > 8 else ""
    indices = list(range(len(rows)))
    expected = f"the batch of dataset indices {indices} ({described}{more}): the collate_fn raised ValueError"
    assert f"{expected}: multimodal_collate" in str(caught.value)
