"""decode="device" machinery: header triage, parameter plans, packing, batch decode (CPU here; CUDA marked gpu)."""

import ast
import inspect
import io
import pickle

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torchvision.transforms import v2

from recipes.core.loading.device import DevicePrefetcher
from recipes.core.pixels.device_augment import augment_images, decode_batch, pad_images, resize_weights, scatter_images, weight_table
from recipes.core.loading.mixing import MixedDataset
from recipes.core.contracts.states import source_of
from recipes.core.pixels.device_decode import (
    DeviceView,
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
    with_decode,
)
from recipes.core.contracts.errors import DataError, SkippedSampleWarning
from recipes.core.pixels.image_headers import device_decodable
from recipes.core.pixels.images import decode_image, read_file
from recipes.vision.transforms import resize_uint8
from tests.device_images import assert_near_worker, distance_to_reference, grey_levels, reference
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
    assert keep == [True]
    assert_near_worker(pixels[0], plan.steps[1][1](plan.steps[0][1](reduced)))


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
        near, exact = _augment(full, params, scale), _augment(reduced, params)
        assert_near_worker(near, transform(full))  # sides the scale divides: the whole image, resized once
        assert exact.shape == (3, 48, 48) and grey_levels(near, exact)[0] < 2.0
    data = bytearray(_jpeg((322, 241), seed=7))  # sides that 4 does not divide: libjpeg rounds them up
    full, reduced = decode_image(data), decode_image(data, draft_size=(50, 50))
    assert reduced.shape[-2:] == (61, 81)
    generator = torch.Generator().manual_seed(0)
    for _ in range(20):  # random boxes, edges included: the same region, scaled up, from the full decode
        height, width = (int(torch.randint(12, 62, (), generator=generator)) for _ in range(2))
        top = int(torch.randint(0, 62 - height, (), generator=generator))
        left = int(torch.randint(0, 82 - width, (), generator=generator))
        params = (top, left, height, width, 48, 48, 0, 0, 48, 48, 1)
        near, exact = _augment(full, params, 4), _augment(reduced, params)
        # up to ~2.4 for a small box, which the reduced decode enlarges; 4.4 if an edge box were cut short
        assert near.shape == exact.shape == (3, 48, 48) and grey_levels(near, exact)[0] < 3.0


def _augment(image: torch.Tensor, params, scale: int = 1) -> torch.Tensor:
    return augment_images([image], [tuple(params)], [scale])[0]


def _encoded(data: bytes, params, source="a.jpg") -> EncodedImage:
    return EncodedImage(data, tuple(params), source)


def test_a_batch_of_both_kinds_keeps_its_order_pickles_and_pins_bytes_and_pixels():
    worker = torch.full((3, 8, 8), 7, dtype=torch.uint8)
    first = _encoded(_jpeg(seed=1), (0, 0, 40, 60, 8, 8, 0, 0, 8, 8, 0))
    second = _encoded(_jpeg(seed=2), (5, 10, 20, 30, 16, 16, 4, 4, 8, 8, 1))
    batch = pack_images([first, worker, second], caller="test", fix="resize")
    assert isinstance(batch, EncodedBatch) and len(batch) == 3 and batch.on_device.tolist() == [True, False, True]
    assert batch.offsets.tolist() == [0, len(first.data), len(first.data) + len(second.data)]
    again = pickle.loads(pickle.dumps(batch))
    pixels, keep = decode_batch(again, "cpu")
    assert keep == [True] * 3 and pixels.shape == (3, 3, 8, 8) and torch.equal(pixels[1], worker)
    assert pixels.is_contiguous(memory_format=torch.channels_last)
    decoded = decode_image(bytearray(second.data))
    assert_near_worker(pixels[2], resize_uint8(decoded[:, 5:25, 10:40], (16, 16))[:, 4:12, 4:12].flip(-1))
    if torch.cuda.is_available():  # pinning needs CUDA's allocator
        pinned = batch.pin_memory()
        assert pinned.data.is_pinned() and pinned.decoded.is_pinned() and torch.equal(pinned.data, batch.data)
    with pytest.raises(ValueError, match="test: images of sizes"):
        pack_images([first, torch.zeros(3, 9, 9, dtype=torch.uint8)], caller="test", fix="resize")
    assert pack_images([worker, worker], caller="test", fix="resize").shape == (2, 3, 8, 8)  # no bytes: a plain stack


def test_the_batch_weights_are_torchs_antialiased_resize_of_the_box_cropped_and_flipped():
    # the oracle: F.interpolate in float64 on the box, then the crop and the flip, one image at a time
    generator = torch.Generator().manual_seed(0)
    images, rows = [], []
    for _ in range(12):
        height, width = (int(torch.randint(8, 90, (), generator=generator)) for _ in range(2))
        images.append(torch.rand(3, height, width, generator=generator, dtype=torch.float64) * 255)
        box = [int(torch.randint(1, side + 1, (), generator=generator)) for side in (height, width)]
        corner = [int(torch.randint(0, side - b + 1, (), generator=generator)) for side, b in zip((height, width), box)]
        resized = [int(torch.randint(12, 70, (), generator=generator)) for _ in range(2)]  # up and down
        crop = [int(torch.randint(0, r - 12 + 1, (), generator=generator)) for r in resized]
        rows.append((*corner, *box, *resized, *crop, 12, 12, len(rows) % 2))
    params, sizes = np.array(rows), np.array([image.shape[-2:] for image in images])
    table = torch.from_numpy(weight_table(params, np.ones(len(rows), dtype=np.int64), sizes))
    weights = resize_weights(table, 12, int(sizes.max())).double()
    for image, row, w in zip(images, map(ImageParams._make, rows), weights):
        top, left, height, width = row.box
        box = image[None, :, top : top + height, left : left + width]
        expected = F.interpolate(box, size=row.resized, mode="bilinear", align_corners=False, antialias=True)[0]
        expected = expected[:, row.crop_top : row.crop_top + 12, row.crop_left : row.crop_left + 12]
        expected = expected.flip(-1) if row.flip else expected
        got = w[0, :, : image.shape[-2]] @ image @ w[1, :, : image.shape[-1]].T
        torch.testing.assert_close(got, expected, rtol=0, atol=1e-3)  # float32 weights, 255-scale pixels


def test_the_float_resize_is_within_one_grey_level_of_the_uint8_kernel():
    # the worker path's fixed-point uint8 kernel against the batch's float32 products, on the CPU
    image = decode_image(bytearray(_jpeg((97, 71), seed=3)))
    for size in [(32, 32), (50, 20), (96, 70)]:
        params = (0, 0, 71, 97, *size, 0, 0, *size, 0)
        assert grey_levels(resize_uint8(image, size), _augment(image, params))[1] <= 1


def test_images_are_padded_alike_by_numpy_and_by_the_scatter_other_devices_use():
    generator = torch.Generator().manual_seed(1)
    shapes = [(5, 7), (9, 3), (4, 4), (1, 1)]
    images = [torch.randint(0, 256, (h, w, 3), dtype=torch.uint8, generator=generator).permute(2, 0, 1) for h, w in shapes]
    sizes = torch.tensor(shapes, dtype=torch.float32)
    padded = pad_images(images, sizes)  # the decoder's [H,W,3] memory, copied by NumPy
    assert padded.shape == (4, 3, 9, 7) and padded.is_contiguous()
    assert torch.equal(padded, scatter_images([image.contiguous() for image in images], sizes, 9, 7))
    for image, row in zip(images, padded):
        assert torch.equal(row[:, : image.shape[1], : image.shape[2]], image)
        assert row.sum() == image.sum()  # zeros elsewhere


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
    from recipes.core.pixels import device_augment

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


class _Halves(torch.utils.data.Dataset):
    """A dataset of JPEGs whose halves have their own transforms."""

    def __init__(self) -> None:
        self.transforms = [v2.Compose([v2.Resize(8, antialias=True), v2.CenterCrop(8)]),
                           v2.Compose([v2.Resize(12, antialias=True), v2.CenterCrop(8), v2.RandomHorizontalFlip(1.0)])]

    def __len__(self) -> int:
        return 4

    def describe(self, index: int) -> str:
        return f"{index}.jpg"

    def state_source(self) -> str:
        return "four JPEGs"


class _HalvesOnDevice(DeviceView):
    """Its view for decode="device": a plan per half, routed by the view."""

    reads = _Halves

    def __init__(self, dataset: _Halves) -> None:
        super().__init__(dataset)
        self.plans = [ImagePlan(transform) for transform in dataset.transforms]

    def __getitem__(self, index: int) -> tuple[EncodedImage, int]:
        return encode_image(bytearray(_jpeg(seed=index)), f"{index}.jpg", self.plans[index % 2], None), index


def test_a_domains_view_ships_encoded_items_and_answers_for_its_dataset():
    view = with_decode(_Halves(), "device", _HalvesOnDevice)
    assert with_decode(view.dataset, "worker", _HalvesOnDevice) is view.dataset
    assert len(view) == 4 and view.describe(3) == "3.jpg" and source_of(view) == "four JPEGs"
    items = [view[i] for i in range(4)]
    assert [image.params.flip for image, _ in items] == [0, 1, 0, 1]
    pixels, keep = decode_batch(pack_images([image for image, _ in items], caller="test", fix="-"), "cpu")
    for (image, index), got in zip(items, pixels):
        expected = view.dataset.transforms[index % 2](decode_image(bytearray(image.data)))
        assert_near_worker(got, expected)
    # the worker side names no mixture: with_decode puts a mixture's sources through the view
    tree = ast.parse(inspect.getsource(inspect.getmodule(DeviceView)))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert "recipes.core.loading.mixing" not in imported and "MixedDataset" not in ast.unparse(tree)


def test_a_mixture_is_decoded_through_each_sources_view_with_its_own_draws():
    mixture = MixedDataset([_Halves(), _Halves()], [1, 3], samples_per_epoch=12)
    view = with_decode(mixture, "device", _HalvesOnDevice)
    assert isinstance(view, MixedDataset) and all(isinstance(source, _HalvesOnDevice) for source in view.datasets)
    assert list(view.epoch_indices(0, 1)) == list(mixture.epoch_indices(0, 1))
    assert view.state_source() == mixture.state_source() and mixture.datasets[0].__class__ is _Halves
    image, index = view[6]  # source 1, its index 2: an even half's plan
    assert isinstance(image, EncodedImage) and image.params.flip == 0 and index == 2


def test_what_has_no_device_path_is_refused_with_the_reason():
    class Plain(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return 1

    class Stream(torch.utils.data.IterableDataset):
        def __iter__(self):
            return iter(())

    with pytest.raises(ValueError, match="no device path for Plain: use decode='worker'"):
        with_decode(Plain(), "device", None)
    with pytest.raises(ValueError, match="map-style dataset; Stream is iterable: use decode='worker'"):
        with_decode(Stream(), "device", _HalvesOnDevice)
    with pytest.raises(ValueError, match="decode must be one of"):
        with_decode(Plain(), "gpu", _HalvesOnDevice)
    with pytest.raises(NotImplementedError, match="DeviceView must implement __getitem__"):
        DeviceView(Plain())[0]


@pytest.mark.gpu
def test_cuda_decode_and_augment_is_near_the_reference_and_never_waits_on_the_device():
    params = [(0, 0, 40, 60, 24, 24, 0, 0, 24, 24, 0), (3, 7, 30, 41, 48, 32, 8, 4, 24, 24, 1)]
    items = [_encoded(_jpeg(seed=s), p) for s, p in enumerate(params)] + [torch.zeros(3, 24, 24, dtype=torch.uint8)]
    batch = pack_images(items, caller="test", fix="-").pin_memory()
    cpu, _ = decode_batch(batch, "cpu")
    decode_batch(batch, "cuda")  # warm-up: nvJPEG handles, kernels, pinned blocks
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        cuda, keep = decode_batch(batch, "cuda")
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert keep == [True] * 3 and cuda.is_cuda and torch.equal(cuda[2].cpu(), cpu[2])
    references = reference(batch)
    # the same full decodes on both (no reduced scale here): the CPU's libjpeg and nvJPEG's IDCT differ
    assert distance_to_reference(cuda, references) <= distance_to_reference(cpu, references) + 0.5


@pytest.mark.gpu
def test_cuda_decodes_a_reduced_scale_jpeg_in_full_nearer_the_reference_than_the_cpu():
    data = bytearray(_jpeg((320, 240), seed=6))
    plan = ImagePlan(v2.Compose([v2.Resize(50, antialias=True), v2.CenterCrop(48)]))
    item = encode_image(data, "big.jpg", plan, None, draft_size=(50, 50))
    batch = pack_images([item], caller="test", fix="-")
    cpu, _ = decode_batch(batch, "cpu")  # the worker path's 1/4-scale decode
    cuda, keep = decode_batch(batch, "cuda")  # nvJPEG in full, the box four times as large
    assert item.scale == 4 and keep == [True] and cuda.is_cuda and cuda.shape == cpu.shape == (1, 3, 48, 48)
    references = reference(batch)
    assert distance_to_reference(cuda, references) <= distance_to_reference(cpu, references) + 0.5


def test_a_reduced_scale_decode_is_as_near_the_full_resolution_reference_on_both_paths():
    # on the CPU both paths decode at the worker path's reduced scale: the float32 products are as near
    # the reference as the uint8 kernel (the CUDA tests hold nvJPEG's full decodes to the same reference)
    plan = ImagePlan(v2.Compose([v2.Resize(50, antialias=True), v2.CenterCrop(48), v2.RandomHorizontalFlip(0.5)]))
    transform = v2.Compose([step.transform for step in plan.steps])
    torch.manual_seed(0)
    files = [bytearray(_jpeg(size, seed=s)) for s, size in enumerate([(320, 240), (322, 241), (150, 200), (90, 60)])]
    items = [encode_image(data, f"{j}.jpg", plan, transform, draft_size=(50, 50)) for j, data in enumerate(files)]
    batch = pack_images(items, caller="test", fix="-")
    device, _ = decode_batch(batch, "cpu")
    worker = torch.stack([_worker(data, item) for data, item in zip(files, items)])
    references = reference(batch)
    assert batch.scales.tolist() == [4, 4, 2, 1]
    assert distance_to_reference(device, references) <= distance_to_reference(worker, references) + 0.5
    assert_near_worker(device, worker)


def _worker(data: bytearray, item: EncodedImage) -> torch.Tensor:
    """The worker path's pixels for ``item``'s parameters: the reduced decode, the uint8 kernel."""
    decoded = decode_image(data, draft_size=(50, 50))
    top, left, height, width = item.params.box
    resized = resize_uint8(decoded[:, top : top + height, left : left + width], item.params.resized)
    top, left, height, width = item.params.crop
    crop = resized[:, top : top + height, left : left + width]
    return crop.flip(-1) if item.params.flip else crop


def test_a_view_refuses_a_dataset_of_another_class_naming_both():
    class Plain(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return 1

    with pytest.raises(ValueError, match=r"reads a _Halves's samples; Plain is not one: use decode='worker'"):
        with_decode(Plain(), "device", _HalvesOnDevice)
