"""The v2 presets: uint8 in and out, PIL's pixels, and reduced-scale decoding only where exact."""

import io
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from torchvision import tv_tensors
from torchvision.transforms import v2

from recipes.core.pixels.images import decode_image, read_image
from recipes.vision import ImageFolderDataset, RandomHorizontalFlip, RandomResizedCrop, eval_transform, train_transform
from tests.photos import photo


def _pil_pipeline(first_steps):
    return v2.Compose([*first_steps, v2.PILToTensor()])


@pytest.mark.parametrize("preset", ["train", "eval"])
def test_presets_give_the_pixels_of_the_pil_pipeline_up_to_rounding(fixtures, preset):
    # same transforms on a PIL image (ImageFolder's way): same random draws, Pillow's resize
    ours = train_transform(48) if preset == "train" else eval_transform(48, resize_size=56)
    peer = _pil_pipeline(ours.transforms)
    dataset = ImageFolderDataset(fixtures / "vision", draft_size=None)
    for index, (path, _) in enumerate(dataset.samples):
        image, _ = dataset[index]  # decoding equals PIL's: test_folder checks it
        pil = Image.fromarray(image.permute(1, 2, 0).numpy())
        for seed in range(3):
            torch.manual_seed(seed)
            mine = ours(image)
            torch.manual_seed(seed)
            theirs = peer(pil)
            assert mine.dtype == torch.uint8 and tuple(mine.shape) == (3, 48, 48)
            assert (mine.int() - theirs.int()).abs().max() <= 1, path


def test_presets_are_uint8_antialiased_v2_pipelines():
    train, evaluation = train_transform(224), eval_transform(224, 256)
    assert [type(t) for t in train.transforms] == [RandomResizedCrop, RandomHorizontalFlip]
    assert isinstance(train.transforms[0], v2.RandomResizedCrop) and isinstance(train.transforms[1], v2.RandomHorizontalFlip)
    assert [type(t) for t in evaluation.transforms] == [v2.Resize, v2.CenterCrop]
    assert train.transforms[0].antialias and evaluation.transforms[0].antialias
    image = tv_tensors.Image(torch.randint(0, 256, (3, 300, 400), dtype=torch.uint8))
    for preset in (train, evaluation):
        out = preset(image)
        assert isinstance(out, tv_tensors.Image) and out.dtype == torch.uint8 and tuple(out.shape) == (3, 224, 224)


def test_decoder_memory_layout_does_not_change_the_pixels(fixtures):
    # the dataset hands the transform a CHW view of HWC memory; a contiguous copy must give the same
    path = str(fixtures / "vision" / "dog" / "rgb.jpg")
    loose, packed = read_image(path, contiguous=False), read_image(path)
    assert not loose.is_contiguous()
    for preset in (train_transform(32), eval_transform(32, 40)):
        for seed in range(5):
            torch.manual_seed(seed)
            a = preset(tv_tensors.Image(loose))
            torch.manual_seed(seed)
            assert torch.equal(a, preset(tv_tensors.Image(packed)))


def test_eval_preset_decodes_large_jpegs_at_reduced_scale_close_to_a_full_decode(tmp_path):
    (tmp_path / "only").mkdir()
    path = str(tmp_path / "only" / "big.jpg")
    photo(400, 300, seed=3).save(path, quality=90)
    preset = eval_transform(32, resize_size=40)
    assert preset.draft_size == (40, 40)
    drafted = ImageFolderDataset(tmp_path, preset)[0][0]
    data = Path(path).read_bytes()
    assert decode_image(data, draft_size=(40, 40)).shape[-2:] == (75, 100)  # 1/4 scale
    assert torch.equal(drafted, preset(decode_image(data, draft_size=(40, 40))))
    full = ImageFolderDataset(tmp_path, preset, draft_size=None)[0][0]
    assert torch.equal(full, preset(read_image(path)))
    assert (drafted.float() - full.float()).abs().mean() < 3  # a different downscale filter, same picture


@pytest.mark.parametrize("width, height", [(600, 560), (1100, 1060), (2200, 2150), (700, 2400), (500, 400)])
def test_train_preset_drafts_only_to_where_even_the_smallest_crop_is_still_a_downscale(width, height):
    # the rule is checked against torchvision's own RandomResizedCrop draws on the drafted image
    size = 64
    preset = train_transform(size)
    data = io.BytesIO()
    Image.new("RGB", (width, height), (90, 120, 150)).save(data, "JPEG")
    image = decode_image(data.getvalue(), draft_size=preset.draft_size)
    scale = width // image.shape[-1]
    assert scale == {600: 2, 1100: 4, 2200: 8, 700: 2, 500: 1}[width]  # the bound does allow drafting
    crop = preset.transforms[0]
    torch.manual_seed(0)
    smallest = min(min(p["height"], p["width"]) for p in (crop.make_params([image]) for _ in range(3000)))
    assert smallest >= size
    # and a draft at the output size would not: crops of a few pixels, upscaled ~5x
    tight = decode_image(data.getvalue(), draft_size=(size, size))
    if tight.shape[-1] < image.shape[-1]:
        assert min(min(p["height"], p["width"]) for p in (crop.make_params([tight]) for _ in range(300))) < size


def test_draft_size_can_be_turned_off_or_given(fixtures):
    assert ImageFolderDataset(fixtures / "vision", train_transform(224)).draft_size == train_transform(224).draft_size
    assert ImageFolderDataset(fixtures / "vision", train_transform(224), draft_size=None).draft_size is None
    assert ImageFolderDataset(fixtures / "vision", draft_size=(300, 300)).draft_size == (300, 300)
    assert ImageFolderDataset(fixtures / "vision", lambda x: x).draft_size is None  # a plain callable: no draft
    assert train_transform(224).draft_size == (916, 916)  # 224 / sqrt(0.08 * 3/4), rounded up, +1


def test_each_seed_gives_its_own_crop_and_the_same_seed_the_same_crop():
    image = tv_tensors.Image(torch.from_numpy(np.array(photo(120, 90, seed=1))).permute(2, 0, 1))
    preset = train_transform(32)
    crops = []
    for seed in (0, 1, 0):
        torch.manual_seed(seed)
        crops.append(preset(image))
    assert torch.equal(crops[0], crops[2]) and not torch.equal(crops[0], crops[1])


def _decoded_photo(width=160, height=120, seed=2):
    """A photo as the dataset hands it to transforms: a [3,H,W] view of [H,W,3] memory."""
    return torch.from_numpy(np.array(photo(width, height, seed=seed))).permute(2, 0, 1)


@pytest.mark.parametrize("interpolation, antialias", [
    (v2.InterpolationMode.BILINEAR, True),   # the preset: torch's interpolate called directly
    (v2.InterpolationMode.BILINEAR, False),
    (v2.InterpolationMode.BICUBIC, True),    # other modes go through F.resize_image
    (v2.InterpolationMode.NEAREST, False),
])
def test_fast_crop_gives_v2s_pixels_for_the_same_box_in_every_layout(interpolation, antialias):
    hwc = _decoded_photo()
    ours = RandomResizedCrop(40, interpolation=interpolation, antialias=antialias)
    theirs = v2.RandomResizedCrop(40, interpolation=interpolation, antialias=antialias)
    torch.manual_seed(0)
    boxes = [{"top": 7, "left": 9, "height": 40, "width": 40}]  # already the output size: no resize
    boxes += [ours.make_params([hwc]) for _ in range(100)]
    for box in boxes:
        for image in (hwc, hwc.contiguous(), tv_tensors.Image(hwc)):
            mine = ours.transform(image, box)
            assert torch.equal(mine, theirs.transform(image, box)), box
            assert type(mine) is type(image)
    # and a whole sample with boxes goes through v2 (same draws for every leaf)
    boxes = tv_tensors.BoundingBoxes([[10, 10, 50, 60]], format="XYXY", canvas_size=(120, 160))
    torch.manual_seed(1)
    image, out_boxes = ours(tv_tensors.Image(hwc), boxes)
    torch.manual_seed(1)
    box = ours.make_params([tv_tensors.Image(hwc)])
    assert torch.equal(image, theirs.transform(tv_tensors.Image(hwc), box))
    assert torch.equal(out_boxes, theirs.transform(boxes, box))


def test_fast_crop_keeps_the_decoders_channels_last_layout():
    out = RandomResizedCrop(40, antialias=True)(tv_tensors.Image(_decoded_photo()))
    assert isinstance(out, tv_tensors.Image) and out.shape == (3, 40, 40)
    assert out.permute(1, 2, 0).is_contiguous()  # dense [H,W,3]: the flip and the batch copy move whole pixels


def _ks_distance(a, b):
    """Two-sample Kolmogorov-Smirnov statistic: the largest gap between the empirical CDFs."""
    grid = np.sort(np.concatenate([a, b]))
    cdf_a = np.searchsorted(np.sort(a), grid, side="right") / len(a)
    cdf_b = np.searchsorted(np.sort(b), grid, side="right") / len(b)
    return np.abs(cdf_a - cdf_b).max()


@pytest.mark.parametrize("height, width, scale, ratio", [
    (375, 500, (0.08, 1.0), (3 / 4, 4 / 3)),   # ImageNet's photos and defaults
    (500, 333, (0.08, 1.0), (3 / 4, 4 / 3)),   # portrait: many large draws miss and retry
    (60, 400, (0.5, 1.0), (3 / 4, 4 / 3)),     # a panorama: ten misses -> the central crop
    (200, 200, (0.3, 0.6), (0.5, 2.0)),
])
def test_crop_boxes_follow_v2s_distribution(height, width, scale, ratio):
    # our draws come from one torch.rand(4) per try, v2's from ~11 tensor calls: different boxes
    # for a seed, the same law. Two-sample KS on every coordinate against torchvision itself;
    # at n = 4000 a gap over 0.044 would have p < 0.001 (c(0.001) = 1.95), fixed seeds.
    image = torch.zeros(3, height, width, dtype=torch.uint8)
    ours = RandomResizedCrop(32, scale=scale, ratio=ratio)
    theirs = v2.RandomResizedCrop(32, scale=scale, ratio=ratio)
    torch.manual_seed(0)
    mine = [ours.make_params([image]) for _ in range(4000)]
    torch.manual_seed(1)
    reference = [theirs.make_params([image]) for _ in range(4000)]
    for key in ("top", "left", "height", "width"):
        a = np.array([box[key] for box in mine], dtype=float)
        b = np.array([box[key] for box in reference], dtype=float)
        assert _ks_distance(a, b) < 0.044, key
    for box in mine:  # every box lies inside the image
        assert 0 <= box["top"] <= height - box["height"] and 0 <= box["left"] <= width - box["width"]


def test_fast_flip_draws_and_flips_exactly_as_v2():
    image = tv_tensors.Image(_decoded_photo(48, 40))
    for seed in range(20):
        torch.manual_seed(seed)
        mine = [RandomHorizontalFlip()(image) for _ in range(3)]
        after_mine = torch.rand(1)
        torch.manual_seed(seed)
        theirs = [v2.RandomHorizontalFlip()(image) for _ in range(3)]
        assert torch.equal(after_mine, torch.rand(1))  # the same generator consumption
        for a, b in zip(mine, theirs):
            assert type(a) is tv_tensors.Image and torch.equal(a, b)
    masks = tv_tensors.Mask(torch.zeros(1, 40, 48, dtype=torch.uint8))
    flipped, flipped_masks = RandomHorizontalFlip(p=1.0)(image, masks)  # a sample: v2's own path
    assert torch.equal(flipped, image.flip(-1)) and isinstance(flipped_masks, tv_tensors.Mask)
