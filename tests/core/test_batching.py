"""stack_images: one copy per image, the images' own layout, errors that name the sample."""

import pytest
import torch

from recipes.core.contracts.batching import stack_images


def _hwc_images(count, height=5, width=7):
    """``[3,H,W]`` views of ``[H,W,3]`` memory, as the decoders and a resized crop give them."""
    generator = torch.Generator().manual_seed(0)
    return [torch.randint(0, 256, (height, width, 3), dtype=torch.uint8, generator=generator).permute(2, 0, 1) for _ in range(count)]


def test_channels_last_images_make_a_channels_last_batch_with_the_same_pixels():
    images = _hwc_images(3)
    batch = stack_images(images)
    assert batch.shape == (3, 3, 5, 7) and batch.is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(batch, torch.stack([image.contiguous() for image in images]))


def test_contiguous_images_make_a_contiguous_batch():
    images = [image.contiguous() for image in _hwc_images(2)]
    batch = stack_images(images)
    assert batch.is_contiguous() and torch.equal(batch, torch.stack(images))


def test_the_batch_is_new_memory_that_later_batches_never_touch():
    images = _hwc_images(2)
    first = stack_images(images)
    kept = first.clone()
    second = stack_images(_hwc_images(2, 5, 7)[::-1])
    assert first.untyped_storage().data_ptr() != second.untyped_storage().data_ptr()
    assert torch.equal(first, kept)


def test_an_empty_batch_and_errors_that_name_the_sample():
    assert stack_images([]).shape == (0, 3, 0, 0)
    images = _hwc_images(2)
    with pytest.raises(ValueError, match=r"sample 1 is \[3, 4, 7\] but sample 0 is \[3, 5, 7\].*add a crop"):
        stack_images([images[0], _hwc_images(1, 4, 7)[0]], fix="add a crop")
    with pytest.raises(ValueError, match="sample 0 is torch.float32"):
        stack_images([images[0].float()])
