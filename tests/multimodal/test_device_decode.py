"""decode="device" for image-caption pairs: on the CPU, the batches of decode="worker" for the same seed
(captions exactly, pixels within a grey level on average and four at most: tests/device_images.py); on
CUDA, pixels as near a full-resolution reference as the worker path's."""

import json
import shutil

import numpy as np
import pytest
import torch
from torchvision.transforms import v2

from recipes.core import DevicePrefetcher, MixedDataset
from recipes.multimodal import ImageTextDataset, multimodal_loader
from recipes.vision import train_transform
from recipes.core.pixels.device_decode import EncodedBatch
from tests.device_images import assert_near_worker, distance_to_reference, reference
from tests.photos import photo

TRANSFORMS = {
    "train": lambda: v2.Compose([v2.Resize(40), v2.CenterCrop(32), v2.RandomHorizontalFlip()]),
    "eval": lambda: v2.Compose([v2.Resize(32), v2.CenterCrop(32)]),
}


def _manifest(fixtures, tmp_path):
    """The pairs' JPEGs plus PNG, gray, 16-bit, palette, CMYK, EXIF-turned and progressive files, two captions each."""
    images = tmp_path / "images"
    shutil.copytree(fixtures / "multimodal" / "images", images)
    for path in sorted((fixtures / "vision").rglob("*.*")):
        if path.suffix.lower() in (".png", ".jpg"):
            shutil.copy(path, images / f"{path.parent.name}_{path.name}")
    photo(70, 50, seed=0).save(images / "progressive.jpg", quality=90, progressive=True)
    rows = [{"image": f"images/{p.name}", "captions": [f"a {p.stem} picture", "another caption"]}
            for p in sorted(images.iterdir())]
    manifest = tmp_path / "pairs.jsonl"
    manifest.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return manifest


@pytest.mark.parametrize("kind", list(TRANSFORMS))
def test_cpu_batches_equal_the_worker_path_captions_and_pixels(fixtures, tokenizer, tmp_path, kind):
    dataset = ImageTextDataset(_manifest(fixtures, tmp_path), tokenizer, transform=TRANSFORMS[kind]())
    batches = {
        decode: list(DevicePrefetcher(
            multimodal_loader(dataset, 6, train=kind == "train", device="cpu", seed=5, decode=decode, num_workers=0),
            "cpu", normalize=False))
        for decode in ("worker", "device")
    }
    assert len(batches["worker"]) == len(batches["device"]) > 1
    for a, b in zip(batches["worker"], batches["device"]):
        assert a.keys() == b.keys()
        for key in ("input_ids", "attention_mask", "lengths", "index"):
            assert torch.equal(a[key], b[key]), key
        assert_near_worker(b["pixel_values"], a["pixel_values"])


LARGE = {
    "train": lambda: train_transform(24),
    "eval": lambda: v2.Compose([v2.Resize(110, antialias=True), v2.CenterCrop(96)]),
}


def _large_pairs(tmp_path):
    """JPEGs 2-9 times the transforms' sizes (the worker path decodes them at 1/2 or 1/4), gray, a PNG, a small one."""
    images = tmp_path / "images"
    images.mkdir()
    sizes = [(320, 240), (240, 320), (900, 700), (420, 330), (60, 50)] * 2
    for j, size in enumerate(sizes):
        photo(*size, seed=j).save(images / f"{j}.jpg", quality=90)
    photo(320, 240, seed=20).convert("L").save(images / "gray.jpg", quality=90)
    photo(320, 240, seed=21).save(images / "flat.png")
    rows = [{"image": f"images/{p.name}", "captions": [f"photo {p.stem}", "a photo"]} for p in sorted(images.iterdir())]
    manifest = tmp_path / "pairs.jsonl"
    manifest.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return manifest


@pytest.mark.parametrize("kind", list(LARGE))
def test_photos_over_twice_the_resize_give_the_worker_path_pairs_through_workers(tokenizer, tmp_path, kind):
    dataset = ImageTextDataset(_large_pairs(tmp_path), tokenizer, transform=LARGE[kind]())
    batches = {
        decode: list(DevicePrefetcher(
            multimodal_loader(dataset, 4, train=kind == "train", device="cpu", seed=7, decode=decode, num_workers=2),
            "cpu", normalize=False))
        for decode in ("worker", "device")
    }
    assert len(batches["worker"]) == len(batches["device"]) == 3
    for a, b in zip(batches["worker"], batches["device"]):
        for key in ("input_ids", "attention_mask", "lengths", "index"):
            assert torch.equal(a[key], b[key]), key
        assert_near_worker(b["pixel_values"], a["pixel_values"])


def test_shards_are_refused_with_a_reason(fixtures, tokenizer, tmp_path):
    from recipes.multimodal import ImageTextShards, write_shards

    write_shards(fixtures / "multimodal" / "captions.json", tmp_path, samples_per_shard=4)
    shards = ImageTextShards(str(tmp_path / "shard-{000000..000001}.tar"), tokenizer, transform=TRANSFORMS["eval"]())
    with pytest.raises(ValueError, match="map-style"):
        multimodal_loader(shards, 2, device="cpu", decode="device")


@pytest.mark.gpu
def test_cuda_pairs_are_as_near_a_full_resolution_reference_as_the_worker_path(tokenizer, tmp_path):
    dataset = ImageTextDataset(_large_pairs(tmp_path), tokenizer, transform=LARGE["eval"]())
    loader = {decode: multimodal_loader(dataset, 4, train=False, device=device, seed=7, decode=decode, num_workers=0)
              for decode, device in (("worker", "cpu"), ("device", "cuda"))}
    raw = list(multimodal_loader(dataset, 4, train=False, device="cpu", seed=7, decode="device", num_workers=0))
    worker = list(DevicePrefetcher(loader["worker"], "cpu", normalize=False))
    cuda = list(DevicePrefetcher(loader["device"], "cuda", normalize=False))
    measured = []
    for encoded, a, b in zip(raw, worker, cuda, strict=True):
        assert torch.equal(a["input_ids"], b["input_ids"].cpu()) and b["pixel_values"].is_cuda
        if isinstance(encoded["pixel_values"], EncodedBatch):
            references = reference(encoded["pixel_values"])
            measured.append([distance_to_reference(batch["pixel_values"], references) for batch in (a, b)])
    worker_distance, cuda_distance = (sum(column) / len(measured) for column in zip(*measured))
    assert cuda_distance <= worker_distance + 0.5, measured


def test_a_mixture_gives_the_worker_path_batches_with_the_mixture_indices(fixtures, tokenizer, tmp_path):
    manifest = _manifest(fixtures, tmp_path)
    train = ImageTextDataset(manifest, tokenizer, transform=TRANSFORMS["train"]())
    plain = ImageTextDataset(fixtures / "multimodal" / "captions.json", tokenizer, transform=TRANSFORMS["eval"]())
    mixed = MixedDataset([train, plain], [1, 1], samples_per_epoch=24)
    batches = {
        decode: list(DevicePrefetcher(
            multimodal_loader(mixed, 6, device="cpu", seed=5, decode=decode, num_workers=0), "cpu", normalize=False))
        for decode in ("worker", "device")
    }
    assert len(batches["worker"]) == len(batches["device"]) == 4
    indices = torch.cat([batch["index"] for batch in batches["device"]])
    drawn = torch.from_numpy(np.asarray(mixed.epoch_indices(5, 0)))
    assert torch.equal(torch.sort(indices).values, torch.sort(drawn).values)
    for a, b in zip(batches["worker"], batches["device"]):
        for key in ("input_ids", "attention_mask", "lengths", "index"):
            assert torch.equal(a[key], b[key]), key
        assert_near_worker(b["pixel_values"], a["pixel_values"])
