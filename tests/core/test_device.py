"""to_device, normalize_images and DevicePrefetcher (CPU path here; CUDA path marked gpu)."""

from collections import namedtuple

import pytest
import torch
from torchvision import tv_tensors
from torchvision.transforms import v2

from recipes.core.contracts.fixed_point import FixedPoint, fixed_to_float
from recipes.core.loading.device import IMAGENET_MEAN, IMAGENET_STD, DevicePrefetcher, normalize_images, to_device

Pair = namedtuple("Pair", "image label")


def _nested():
    boxes = tv_tensors.BoundingBoxes(torch.tensor([[1.0, 2, 3, 4]]), format="XYXY", canvas_size=(8, 9))
    return {
        "images": torch.randint(0, 256, (2, 3, 4, 5), dtype=torch.uint8),
        "targets": [{"boxes": boxes, "image_id": 7, "masks": tv_tensors.Mask(torch.zeros(3, 4, 5, dtype=torch.uint8))}],
        "pair": Pair(tv_tensors.Image(torch.zeros(3, 2, 2, dtype=torch.uint8)), "cat"),
        "ids": torch.arange(4),
    }


def test_to_device_keeps_structure_tv_tensor_classes_and_plain_leaves():
    moved = to_device(_nested(), "cpu")
    boxes = moved["targets"][0]["boxes"]
    assert isinstance(boxes, tv_tensors.BoundingBoxes) and boxes.canvas_size == (8, 9)
    assert moved["targets"][0]["image_id"] == 7
    assert isinstance(moved["pair"], Pair) and moved["pair"].label == "cat"
    assert isinstance(moved["pair"].image, tv_tensors.Image)


def test_normalize_matches_todtype_then_normalize_transforms():
    images = torch.randint(0, 256, (2, 3, 6, 7), dtype=torch.uint8)
    reference = v2.Normalize(IMAGENET_MEAN, IMAGENET_STD)(v2.ToDtype(torch.float32, scale=True)(images))
    torch.testing.assert_close(normalize_images(images), reference, rtol=1e-5, atol=1e-5)


def test_normalize_keeps_channels_last_batches_channels_last_with_the_same_values():
    images = torch.randint(0, 256, (2, 3, 6, 7), dtype=torch.uint8)
    nhwc = images.contiguous(memory_format=torch.channels_last)
    out = normalize_images(nhwc)
    assert out.is_contiguous(memory_format=torch.channels_last) and out.shape == (2, 3, 6, 7)
    torch.testing.assert_close(out, normalize_images(images), rtol=0, atol=1e-6)


@pytest.mark.parametrize("layout", [torch.contiguous_format, torch.channels_last])
def test_normalize_on_an_accelerator_keeps_the_layout(layout):
    # the non-CPU branch (one fused multiply-add on the device) runs here on the meta device:
    # shapes, dtypes and strides without a GPU; the gpu-marked tests check the values on CUDA
    images = torch.empty(2, 3, 8, 8, dtype=torch.uint8, device="meta").contiguous(memory_format=layout)
    out = normalize_images(images)
    assert out.device.type == "meta" and out.dtype == torch.float32 and out.shape == images.shape
    assert out.is_contiguous(memory_format=layout)


def test_normalize_converts_images_only():
    out = normalize_images(_nested())
    assert out["images"].dtype == torch.float32
    assert out["pair"].image.dtype == torch.float32 and isinstance(out["pair"].image, tv_tensors.Image)
    assert out["targets"][0]["masks"].dtype == torch.uint8  # a Mask with 3 "channels" is not an image
    assert out["ids"].dtype == torch.int64


@pytest.mark.parametrize("channels_last", [False, True])
def test_normalize_converts_five_dimensional_uint8_batches_in_their_memory_order(channels_last):
    # a tv_tensors.Video [B, T, C, H, W] (channels at -3) and a plain [B, C, T, H, W] batch (channels at 1)
    frames = torch.randint(0, 256, (2, 4, 5, 6, 3), dtype=torch.uint8)  # [B, T, H, W, C] memory
    sequence = frames.permute(0, 1, 4, 2, 3) if channels_last else frames.permute(0, 1, 4, 2, 3).contiguous()
    reference = v2.Normalize(IMAGENET_MEAN, IMAGENET_STD)(v2.ToDtype(torch.float32, scale=True)(sequence))
    out = normalize_images(tv_tensors.Video(sequence))
    assert isinstance(out, tv_tensors.Video) and out.stride() == sequence.stride()
    torch.testing.assert_close(out.as_subclass(torch.Tensor), reference, rtol=1e-5, atol=1e-5)
    planar = sequence.permute(0, 2, 1, 3, 4)
    out = normalize_images(planar)
    assert type(out) is torch.Tensor and out.stride() == planar.stride()
    torch.testing.assert_close(out, reference.permute(0, 2, 1, 3, 4), rtol=1e-5, atol=1e-5)
    assert normalize_images(torch.zeros(2, 4, 3, 5, 6, dtype=torch.uint8)).dtype == torch.uint8  # T=4 at 1: no image


class _Encoded:
    """A batch field that decodes itself where the batch goes (recipes.core.contracts.protocols.DecodesOnDevice)."""

    def __init__(self, value):
        self.value = value

    def decode_on(self, device):
        return torch.full((1, 3, 2, 2), self.value, dtype=torch.uint8, device=device)


def test_the_prefetcher_decodes_a_field_that_decodes_itself_before_it_normalises():
    batch = next(iter(DevicePrefetcher([{"pixels": _Encoded(255), "ids": torch.arange(2)}], "cpu",
                                       mean=(0, 0, 0), std=(1, 1, 1))))
    assert batch["pixels"].dtype == torch.float32 and (batch["pixels"] == 1).all() and batch["ids"].tolist() == [0, 1]


def test_normalize_can_produce_bfloat16():
    out = normalize_images(torch.zeros(1, 3, 2, 2, dtype=torch.uint8), dtype=torch.bfloat16)
    assert out.dtype == torch.bfloat16


class _Resumable:
    """A loader stand-in with state: yields k, k+1, ... and remembers k."""

    def __init__(self, n):
        self.n, self.k = n, 0

    def __iter__(self):
        while self.k < self.n:
            self.k += 1
            yield {"pixels": torch.full((1, 3, 1, 1), self.k, dtype=torch.uint8)}

    def __len__(self):
        return self.n

    def state_dict(self):
        return {"k": self.k}

    def load_state_dict(self, state):
        self.k = state["k"]


def test_cpu_prefetcher_normalises_every_batch_and_passes_state_through():
    loader = _Resumable(3)
    prefetcher = DevicePrefetcher(loader, "cpu", mean=(0, 0, 0), std=(1, 1, 1))
    seen = []
    for batch in prefetcher:
        seen.append(round(batch["pixels"].flatten()[0].item() * 255))
        assert prefetcher.state_dict() == {"k": seen[-1]}
    assert seen == [1, 2, 3] and len(prefetcher) == 3


def _uint8_batches(count, layout=torch.contiguous_format):
    generator = torch.Generator().manual_seed(0)
    return [
        torch.randint(0, 256, (4, 3, 16, 16), dtype=torch.uint8, generator=generator).contiguous(memory_format=layout)
        for _ in range(count)
    ]


@pytest.mark.parametrize("layout", [torch.contiguous_format, torch.channels_last])
def test_cpu_prefetcher_gives_new_memory_in_the_batch_layout_and_never_writes_it_again(layout):
    batches = _uint8_batches(8, layout)
    originals = [batch.clone() for batch in batches]
    expected = [normalize_images(batch) for batch in batches]
    kept, first_row, as_numpy = [], None, None
    for index, out in enumerate(DevicePrefetcher(batches, "cpu")):
        assert torch.equal(out, expected[index]) and out.is_contiguous(memory_format=layout)
        if index == 0:
            first_row = out[0]  # a view, its batch dropped
        elif index == 1:
            as_numpy = out.numpy()  # an array over the batch's memory
        else:
            kept.append(out)  # whole batches kept
    assert torch.equal(first_row, expected[0][0]) and (as_numpy == expected[1].numpy()).all()
    assert all(torch.equal(out, reference) for out, reference in zip(kept, expected[2:]))
    assert len({out.data_ptr() for out in kept}) == len(kept)
    assert all(torch.equal(batch, original) for batch, original in zip(batches, originals))  # inputs untouched


def test_prefetcher_can_leave_images_as_uint8():
    batch = next(iter(DevicePrefetcher([torch.zeros(1, 3, 1, 1, dtype=torch.uint8)], "cpu", normalize=False)))
    assert batch.dtype == torch.uint8


def test_fixed_point_becomes_the_exact_float_it_stands_for_and_plain_integers_stay():
    every = torch.arange(-(2**15), 2**15, dtype=torch.int16)
    batch = {"samples": every.view(2, -1).as_subclass(FixedPoint), "ids": torch.arange(3, dtype=torch.int16)}
    floats = fixed_to_float(batch)
    assert type(floats["samples"]) is torch.Tensor and floats["samples"].dtype == torch.float32
    assert torch.equal(floats["samples"].view(-1).double() * 2**15, every.double())  # every value, exactly
    assert floats["ids"] is batch["ids"]  # an integer tensor without the mark is not scaled
    eight = torch.tensor([-128, 64], dtype=torch.int8).as_subclass(FixedPoint)
    assert fixed_to_float(eight).tolist() == [-1.0, 0.5]
    assert isinstance(batch["samples"][0], FixedPoint)  # torch keeps the class through its operations


def test_cpu_prefetcher_makes_fixed_point_float32_in_new_memory_whatever_the_image_dtype():
    samples = torch.tensor([[-32768, 16384, 0]], dtype=torch.int16).as_subclass(FixedPoint)
    loader = [{"samples": samples, "images": torch.zeros(1, 3, 2, 2, dtype=torch.uint8)}]
    (batch,) = DevicePrefetcher(loader, "cpu", dtype=torch.bfloat16)
    assert type(batch["samples"]) is torch.Tensor and batch["samples"].dtype == torch.float32
    assert batch["samples"].tolist() == [[-1.0, 0.5, 0.0]] and batch["images"].dtype == torch.bfloat16
    assert samples.tolist() == [[-32768, 16384, 0]]  # the raw batch is never written
    assert fixed_to_float(torch.tensor([0.5]).as_subclass(FixedPoint)).tolist() == [0.5]  # floats kept as they are


@pytest.mark.gpu
def test_fixed_point_on_cuda_gives_the_cpu_floats():
    samples = torch.randint(-(2**15), 2**15, (4, 1000), dtype=torch.int16).as_subclass(FixedPoint)
    (batch,) = DevicePrefetcher([{"samples": samples.pin_memory()}], "cuda")
    assert batch["samples"].is_cuda and torch.equal(batch["samples"].cpu(), fixed_to_float(samples))


@pytest.mark.gpu
@pytest.mark.parametrize("layout", [torch.contiguous_format, torch.channels_last])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_normalize_on_cuda_gives_the_cpu_values_in_the_same_layout(layout, dtype):
    images = torch.randint(0, 256, (4, 3, 17, 19), dtype=torch.uint8).contiguous(memory_format=layout)
    out = normalize_images(images.cuda(), dtype=dtype)
    assert out.is_cuda and out.dtype == dtype and out.is_contiguous(memory_format=layout)
    tolerance = 1e-5 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(out.cpu(), normalize_images(images, dtype=dtype), rtol=tolerance, atol=tolerance)


@pytest.mark.gpu
def test_cuda_prefetcher_overlaps_copies_and_reports_the_consumed_state():
    loader = _Resumable(4)
    prefetcher = DevicePrefetcher(loader, "cuda", mean=(0, 0, 0), std=(1, 1, 1))
    seen = []
    for batch in prefetcher:
        assert batch["pixels"].is_cuda and batch["pixels"].dtype == torch.float32
        seen.append(round(batch["pixels"].flatten()[0].item() * 255))
        assert prefetcher.state_dict() == {"k": seen[-1]}  # not the batch prefetched ahead
    assert seen == [1, 2, 3, 4]


@pytest.mark.gpu
def test_pinned_batches_move_non_blocking_and_arrive_intact():
    images = torch.randint(0, 256, (8, 3, 64, 64), dtype=torch.uint8).pin_memory()
    out = to_device({"x": images}, "cuda")["x"]
    torch.cuda.synchronize()
    assert torch.equal(out.cpu(), images)
