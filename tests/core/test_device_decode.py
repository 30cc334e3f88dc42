"""decode="device" machinery: header triage, parameter plans, packing, batch decode (CPU here; CUDA marked gpu)."""

import ast
import inspect
import io
import pickle

import pytest
import torch
from torchvision.transforms import v2

from recipes.core.device import DevicePrefetcher
from recipes.core.device_augment import augment, decode_batch, resize
from recipes.core.device_decode import (
    DeviceDecodeDataset,
    EncodedBatch,
    EncodedImage,
    ImageParams,
    ImagePlan,
    Step,
    centre_box,
    draft_scale,
    encode_image,
    pack_images,
    resized_size,
)
from recipes.core.errors import DataError, SkippedSampleWarning
from recipes.core.image_headers import device_decodable
from recipes.core.images import decode_image, read_file
from tests.photos import photo


def _jpeg(size=(60, 40), seed=0, **options) -> bytes:
    out = io.BytesIO()
    photo(*size, seed=seed).save(out, format="JPEG", quality=90, **options)
    return out.getvalue()


def test_only_plain_jpegs_go_to_the_device(fixtures):
    found = {path.name: device_decodable(read_file(path)) for path in (fixtures / "vision").rglob("*.*")}
    assert found["rgb.jpg"] == (96, 64) or found["rgb.jpg"] is not None
    assert found["gray.jpg"] == (100, 70)
    for name in ("cmyk.jpg", "exif_rot6.jpg", "rgb.png", "gray16.png", "palette.png", "rgba.png", "notes.txt"):
        assert found[name] is None, name
    assert device_decodable(_jpeg(progressive=True)) is None
    assert device_decodable(_jpeg()) == (60, 40)
    assert device_decodable(_jpeg()[:-200]) is None  # cut: the worker's decoder says why
    assert device_decodable(_jpeg(), max_pixels=100) is None  # a bomb: the worker refuses it


def test_resized_size_and_centre_box_follow_v2_resize_and_center_crop():
    for height, width in [(40, 60), (61, 40), (33, 33), (100, 7)]:
        for size, max_size in [([32], None), ([20], 30), ([9, 13], None)]:
            out = v2.Resize(size, max_size=max_size)(torch.zeros(3, height, width, dtype=torch.uint8))
            assert resized_size(height, width, size, max_size) == tuple(out.shape[-2:])
        image = torch.arange(height * width).view(1, height, width)
        top, left, h, w = centre_box(height, width, 7, 6)
        assert torch.equal(image[:, top : top + h, left : left + w], v2.CenterCrop((7, 6))(image))
    assert centre_box(5, 5, 6, 5) is None  # v2 would pad


def test_unsupported_transforms_are_refused_with_the_choices():
    for transform in (None, v2.ColorJitter(0.1), v2.RandomResizedCrop(8), v2.Compose([v2.CenterCrop(8), v2.Resize(8)]),
                      v2.Resize(8, interpolation=v2.InterpolationMode.NEAREST)):
        with pytest.raises(ValueError, match="decode='device' supports"):
            ImagePlan(transform)


def test_draft_scale_is_the_scale_the_reduced_decode_gives():
    # the oracle: the size decode_image returns for that draft_size, against the full decode's
    for width, height in [(16, 16), (33, 17), (40, 30), (64, 48), (70, 31), (97, 71), (130, 45)]:
        data = bytearray(_jpeg((width, height), seed=width))
        for draft in [(2, 2), (3, 5), (4, 4), (5, 3), (8, 8), (9, 6), (15, 15), (16, 9), (20, 20), (40, 40)]:
            scale = draft_scale(width, height, draft)
            shape = tuple(decode_image(data, draft_size=draft).shape[-2:])
            assert shape == (-(-height // scale), -(-width // scale)), (width, height, draft, scale)
    assert draft_scale(4000, 3000, None) == 1


def test_a_reduced_scale_jpeg_is_planned_on_its_reduced_size_and_decoded_so_on_the_cpu():
    data = bytearray(_jpeg((97, 71), seed=5))
    plan = ImagePlan(v2.Compose([v2.Resize(12, antialias=True), v2.CenterCrop(10)]))
    item = encode_image(data, "big.jpg", plan, None, draft_size=(12, 12))
    assert item.scale == 4 and item.params[:4] == (0, 0, 18, 25)  # libjpeg rounds 71/4 and 97/4 up
    pixels, keep = decode_batch(pack_images([item], caller="test", fix="-"), "cpu")
    reduced = decode_image(data, draft_size=(12, 12), contiguous=False)
    assert keep == [True] and torch.equal(pixels[0], plan.steps[1][1](plan.steps[0][1](reduced)))


def test_a_full_decode_with_its_box_scaled_up_is_near_the_reduced_scale_decode():
    # nvJPEG has no reduced-scale decode: the full image and the box times the scale stand in for it
    data = bytearray(_jpeg((320, 240), seed=6))
    full = decode_image(data)
    transform = v2.Compose([v2.Resize(50, antialias=True), v2.CenterCrop(48)])
    plan = ImagePlan(transform)
    for draft, scale in [((50, 50), 4), ((100, 100), 2)]:
        reduced = decode_image(data, draft_size=draft)
        assert draft_scale(320, 240, draft) == scale and reduced.shape[-2:] == (240 // scale, 320 // scale)
        params = plan.draw(*reduced.shape[-2:])
        near, exact = augment(full, params, scale=scale), augment(reduced, params)
        assert torch.equal(near, transform(full))  # sides the scale divides: the whole image, resized once
        assert exact.shape == (3, 48, 48) and (near.float() - exact.float()).abs().mean() < 2.0
    data = bytearray(_jpeg((322, 241), seed=7))  # sides that 4 does not divide: libjpeg rounds them up
    full, reduced = decode_image(data), decode_image(data, draft_size=(50, 50))
    assert reduced.shape[-2:] == (61, 81)
    generator = torch.Generator().manual_seed(0)
    for _ in range(20):  # random boxes, edges included: the same region, scaled up, from the full decode
        height, width = (int(torch.randint(12, 62, (), generator=generator)) for _ in range(2))
        top = int(torch.randint(0, 62 - height, (), generator=generator))
        left = int(torch.randint(0, 82 - width, (), generator=generator))
        params = (top, left, height, width, 48, 48, 0, 0, 48, 48, 1)
        near, exact = augment(full, params, scale=4).float(), augment(reduced, params).float()
        # up to ~2.4 for a small box, which the reduced decode enlarges; 4.4 if an edge box were cut short
        assert near.shape == exact.shape == (3, 48, 48) and (near - exact).abs().mean() < 3.0


def _encoded(data: bytes, params, source="a.jpg") -> EncodedImage:
    return EncodedImage(data, tuple(params), source)


def test_a_batch_of_both_kinds_keeps_its_order_pickles_and_pins_only_pixels():
    worker = torch.full((3, 8, 8), 7, dtype=torch.uint8)
    first = _encoded(_jpeg(seed=1), (0, 0, 40, 60, 8, 8, 0, 0, 8, 8, 0))
    second = _encoded(_jpeg(seed=2), (5, 10, 20, 30, 16, 16, 4, 4, 8, 8, 1))
    batch = pack_images([first, worker, second], caller="test", fix="resize")
    assert isinstance(batch, EncodedBatch) and len(batch) == 3 and batch.on_device.tolist() == [True, False, True]
    assert batch.offsets.tolist() == [0, len(first.data), len(first.data) + len(second.data)]
    again = pickle.loads(pickle.dumps(batch))
    pixels, keep = decode_batch(again, "cpu")
    assert keep == [True] * 3 and pixels.shape == (3, 3, 8, 8) and torch.equal(pixels[1], worker)
    decoded = decode_image(bytearray(second.data))
    expected = resize(decoded[:, 5:25, 10:40], (16, 16))[:, 4:12, 4:12].flip(-1)
    assert torch.equal(pixels[2], expected)
    with pytest.raises(ValueError, match="test: images of sizes"):
        pack_images([first, torch.zeros(3, 9, 9, dtype=torch.uint8)], caller="test", fix="resize")
    assert pack_images([worker, worker], caller="test", fix="resize").shape == (2, 3, 8, 8)  # no bytes: a plain stack


def test_the_float_resize_is_within_one_grey_level_of_the_uint8_kernel():
    # the arithmetic CUDA uses (no uint8 antialiased kernel there), checked on the CPU
    image = decode_image(bytearray(_jpeg((97, 71), seed=3)))
    for size in [(32, 32), (50, 20), (96, 70)]:
        exact, float_path = resize(image, size), resize(image, size, in_float=True)
        assert (exact.int() - float_path.int()).abs().max() <= 1


def test_a_file_no_decoder_takes_raises_naming_it_or_is_dropped_from_every_field():
    good = _jpeg(seed=4)
    bad = bytearray(good)
    bad[len(bad) // 2 : len(bad) // 2 + 400] = b"\xff\xd0" * 200  # entropy data wrecked, header and end intact
    params = (0, 0, 40, 60, 8, 8, 0, 0, 8, 8, 0)
    for on_error in ("raise", "skip"):
        items = [EncodedImage(good, params, "good.jpg", on_error),
                 EncodedImage(bytes(bad), params, "bad.jpg", on_error)]
        raw = (pack_images(items, caller="test", fix="-"), torch.tensor([10, 11]), ["a", "b"])
        try:
            batch = next(iter(DevicePrefetcher([raw], "cpu", normalize=False)))
        except DataError as error:
            assert on_error == "raise" and "bad.jpg" in str(error)
            continue
        # libjpeg may accept the wreck (it fills what it cannot read); then nothing is dropped
        assert len(batch[0]) == len(batch[1]) == len(batch[2])


def test_a_skipped_sample_leaves_the_labels_too(monkeypatch):
    from recipes.core import device_augment

    params = (0, 0, 40, 60, 8, 8, 0, 0, 8, 8, 0)
    items = [EncodedImage(_jpeg(seed=s), params, f"{s}.jpg", "skip") for s in range(3)]

    def refuse_one(encoded, device, sources):
        if "1.jpg" in sources:
            raise DataError(f"{', '.join(sources)}: cannot decode image (test)")
        return [decode_image(bytearray(data.numpy().tobytes())) for data in encoded]

    monkeypatch.setattr(device_augment, "decode_jpegs", refuse_one)
    monkeypatch.setattr(device_augment, "decode_image", lambda data, source: refuse_one([], "cpu", [source]))
    pixels = pack_images(items, caller="test", fix="-")
    raw = {"pixel_values": pixels, "index": torch.tensor([0, 1, 2]), "key": ["x", "y", "z"]}
    with pytest.warns(SkippedSampleWarning, match="1.jpg"):
        batch = next(iter(DevicePrefetcher([raw], "cpu", normalize=False)))
    assert batch["index"].tolist() == [0, 2] and batch["key"] == ["x", "z"] and len(batch["pixel_values"]) == 2


def test_plans_read_steps_by_kind_and_draw_named_params():
    plan = ImagePlan(v2.Compose([v2.Resize(12, antialias=True), v2.CenterCrop(10), v2.RandomHorizontalFlip(0.0)]))
    assert [step.kind for step in plan.steps] == [Step.RESIZE, Step.CENTRE_CROP, Step.FLIP]
    params = plan.draw(40, 60)
    assert params == ImageParams(box_top=0, box_left=0, box_height=40, box_width=60, resized_height=12,
                                 resized_width=18, crop_top=1, crop_left=4, crop_height=10, crop_width=10, flip=0)
    assert params.box == (0, 0, 40, 60) and params.resized == (12, 18) and params.output_size == (10, 10)


def test_encode_image_gives_an_encoded_image_either_way_and_pixels_alone_stack():
    transform = v2.Compose([v2.Resize(8, antialias=True), v2.CenterCrop(8)])
    plan = ImagePlan(transform)
    jpeg = encode_image(bytearray(_jpeg()), "a.jpg", plan, transform)
    out = io.BytesIO()
    photo(60, 40, seed=0).save(out, format="PNG")
    png = encode_image(bytearray(out.getvalue()), "a.png", plan, transform)
    assert jpeg.on_device and jpeg.pixels is None and jpeg.params.output_size == (8, 8)
    assert not png.on_device and png.data is None and png.pixels.shape == (3, 8, 8)
    assert torch.equal(png.pixels, transform(decode_image(bytearray(out.getvalue()))))
    stacked = pack_images([png, png.pixels], caller="test", fix="-")  # no file for the device: a plain stack
    assert isinstance(stacked, torch.Tensor) and stacked.shape == (2, 3, 8, 8)
    batch = pack_images([png, jpeg], caller="test", fix="-")
    assert batch.on_device.tolist() == [False, True] and batch.image_params() == [jpeg.params]


class _Routed(torch.utils.data.Dataset):
    """A dataset of two halves with their own plans, routed by itself: the protocol, no mixture."""

    def __init__(self) -> None:
        self.transforms = [v2.Compose([v2.Resize(8, antialias=True), v2.CenterCrop(8)]),
                           v2.Compose([v2.Resize(12, antialias=True), v2.CenterCrop(8), v2.RandomHorizontalFlip(1.0)])]

    def __len__(self) -> int:
        return 4

    def device_plan(self) -> dict[str, ImagePlan]:
        return {"even": ImagePlan(self.transforms[0]), "odd": ImagePlan(self.transforms[1])}

    def encoded_item(self, index: int, plan: dict[str, ImagePlan]) -> tuple[EncodedImage, int]:
        half = "odd" if index % 2 else "even"
        return encode_image(bytearray(_jpeg(seed=index)), f"{index}.jpg", plan[half], None), index


def test_any_dataset_with_the_protocol_routes_its_own_plans():
    dataset = DeviceDecodeDataset(_Routed())
    assert dataset.epoch_indices is None
    items = [dataset[i] for i in range(4)]
    assert [image.params.flip for image, _ in items] == [0, 1, 0, 1]
    pixels, keep = decode_batch(pack_images([image for image, _ in items], caller="test", fix="-"), "cpu")
    for (image, index), got in zip(items, pixels):
        expected = dataset.dataset.transforms[index % 2](decode_image(bytearray(image.data)))
        assert torch.equal(got, expected)
    # the worker side names no mixture: a mixture is one more dataset with the protocol
    tree = ast.parse(inspect.getsource(inspect.getmodule(DeviceDecodeDataset)))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert "recipes.core.mixing" not in imported and "MixedDataset" not in ast.unparse(tree)


def test_datasets_without_the_protocol_are_refused_with_the_reason():
    class Plain(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return 1

    class Stream(torch.utils.data.IterableDataset):
        def __iter__(self):
            return iter(())

    with pytest.raises(ValueError, match="encoded_item and device_plan.*Plain has none: use decode='worker'"):
        DeviceDecodeDataset(Plain())
    with pytest.raises(ValueError, match="map-style dataset; Stream is iterable: use decode='worker'"):
        DeviceDecodeDataset(Stream())


@pytest.mark.gpu
def test_cuda_decode_and_augment_is_near_the_cpu_and_never_waits_on_the_device():
    params = [(0, 0, 40, 60, 24, 24, 0, 0, 24, 24, 0), (3, 7, 30, 41, 48, 32, 8, 4, 24, 24, 1)]
    items = [_encoded(_jpeg(seed=s), p) for s, p in enumerate(params)] + [torch.zeros(3, 24, 24, dtype=torch.uint8)]
    batch = pack_images(items, caller="test", fix="-").pin_memory()
    cpu, _ = decode_batch(batch, "cpu")
    decode_batch(batch, "cuda")  # warm-up: nvJPEG handles and kernels
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        cuda, keep = decode_batch(batch, "cuda")
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert keep == [True] * 3 and cuda.is_cuda
    assert (cuda.cpu().float() - cpu.float()).abs().mean() < 1.0  # nvJPEG's IDCT and float resize: ~1 grey level


@pytest.mark.gpu
def test_cuda_decodes_a_reduced_scale_jpeg_in_full_near_the_cpu():
    data = bytearray(_jpeg((320, 240), seed=6))
    plan = ImagePlan(v2.Compose([v2.Resize(50, antialias=True), v2.CenterCrop(48)]))
    item = encode_image(data, "big.jpg", plan, None, draft_size=(50, 50))
    batch = pack_images([item], caller="test", fix="-")
    cpu, _ = decode_batch(batch, "cpu")
    cuda, keep = decode_batch(batch, "cuda")
    assert item.scale == 4 and keep == [True] and cuda.is_cuda and cuda.shape == cpu.shape == (1, 3, 48, 48)
    assert (cuda.cpu().float() - cpu.float()).abs().mean() < 2.5  # a full decode resized once: ~1 grey level
