"""The keyword that left ImageFolderDataset's constructor still works: a DeprecationWarning that
names the new spelling and points at the caller's line, and the same items as the new spelling."""

import warnings
from pathlib import Path

import pytest
import torch

from recipes.core import ReadOptions
from recipes.vision import ImageFolderDataset, eval_transform

HERE = str(Path(__file__).resolve())


def test_strict_decode_warns_and_gives_the_same_items(fixtures):
    expected = ImageFolderDataset(fixtures / "vision", eval_transform(16, 16), read_options=ReadOptions(strict_decode=True))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dataset = ImageFolderDataset(fixtures / "vision", eval_transform(16, 16), strict_decode=True)
    assert len(caught) == 1 and issubclass(caught[0].category, DeprecationWarning)
    assert caught[0].filename == HERE  # stacklevel: the caller's line, not the library's
    assert "pass read_options=ReadOptions(strict_decode=...)" in str(caught[0].message)
    assert dataset.strict_decode is expected.strict_decode is True and len(dataset) == len(expected) > 0
    for (image, label), (want_image, want_label) in zip(dataset, expected):
        assert torch.equal(image, want_image) and label == want_label
    with pytest.raises(ValueError, match=r"ImageFolderDataset does not read read_options.verify_cache; it reads only strict_decode"):
        ImageFolderDataset(fixtures / "vision", read_options=ReadOptions(verify_cache=True))
