"""The v2 presets: uint8 in and out, PIL's pixels, and reduced-scale decoding only where exact."""

import io
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from torchvision import tv_tensors
from torchvision.transforms import v2

from recipes.core.images import decode_image, read_image
from recipes.vision import ImageFolderDataset, eval_transform, train_transform
from tests.vision.photos import photo


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
    assert [type(t) for t in train.transforms] == [v2.RandomResizedCrop, v2.RandomHorizontalFlip]
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
