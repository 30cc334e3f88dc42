"""Property test: image_collate stacks exactly the kept samples, whatever their layout, and refuses mixed sizes."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torchvision import tv_tensors

from recipes.vision import image_collate
from tests.core.mutations import fuzz_settings


@st.composite
def batches(draw):
    """1..6 samples of one random size (1..9 px a side), some None, some channels-last views."""
    height, width = draw(st.integers(1, 9)), draw(st.integers(1, 9))
    seed = draw(st.integers(0, 2**31))
    generator = torch.Generator().manual_seed(seed)
    batch = []
    for _ in range(draw(st.integers(1, 6))):
        if draw(st.integers(0, 4)) == 0:
            batch.append(None)
            continue
        if draw(st.booleans()):  # as decoded: a [3,H,W] view of [H,W,3] memory
            image = torch.randint(0, 256, (height, width, 3), dtype=torch.uint8, generator=generator).permute(2, 0, 1)
        else:
            image = torch.randint(0, 256, (3, height, width), dtype=torch.uint8, generator=generator)
        batch.append((tv_tensors.Image(image) if draw(st.booleans()) else image, draw(st.integers(0, 999))))
    return batch


@fuzz_settings(150)
@given(batch=batches())
def test_image_collate_unstacks_to_exactly_the_kept_samples(batch):
    images, labels = image_collate(batch)
    kept = [sample for sample in batch if sample is not None]
    assert images.dtype == torch.uint8 and labels.dtype == torch.int64
    if not kept:
        assert images.shape == (0, 3, 0, 0) and labels.shape == (0,)
        return
    assert images.shape == (len(kept), *kept[0][0].shape)
    # one dense block: NCHW, or channels-last when the first image is a view of HWC memory
    assert images.is_contiguous() or images.is_contiguous(memory_format=torch.channels_last)
    for image, (expected, _) in zip(images.unbind(0), kept):
        assert torch.equal(image, expected.as_subclass(torch.Tensor))
    assert labels.tolist() == [label for _, label in kept]


@fuzz_settings(50)
@given(sizes=st.lists(st.tuples(st.integers(1, 5), st.integers(1, 5)), min_size=2, max_size=4, unique=True))
def test_image_collate_refuses_mixed_sizes_naming_the_sample(sizes):
    batch = [(torch.zeros((3, h, w), dtype=torch.uint8), 0) for h, w in sizes]
    with pytest.raises(ValueError, match=r"image_collate: sample 1 is \[3, \d, \d\] but sample 0 is"):
        image_collate(batch)
