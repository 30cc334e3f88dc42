"""The keywords that left CocoDataset's constructor still work: a DeprecationWarning that names
the new spelling and points at the caller's line, and the same items as the new spelling."""

import warnings
from pathlib import Path

import pytest
import torch

from recipes.core import ReadOptions
from recipes.core.contracts.errors import DataError
from recipes.detection import CocoDataset

HERE = str(Path(__file__).resolve())


def _old(build, pattern):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dataset = build()
    assert len(caught) == 1 and issubclass(caught[0].category, DeprecationWarning), [str(w.message) for w in caught]
    assert caught[0].filename == HERE, caught[0].filename  # stacklevel: the caller's line, not the library's
    assert pattern in str(caught[0].message), str(caught[0].message)
    return dataset


@pytest.mark.parametrize(
    "old, new",
    [({"strict_decode": True}, ReadOptions(strict_decode=True)),
     ({"strict": True}, ReadOptions(strict_annotations=True)),
     ({"strict": True, "strict_decode": True}, ReadOptions(strict_annotations=True, strict_decode=True))],
    ids=["strict_decode", "strict", "both"],
)
def test_a_moved_keyword_warns_and_gives_the_same_items(fixtures, old, new):
    root, ann_file = fixtures / "detection/images", fixtures / "detection/instances.json"
    expected = CocoDataset(root, ann_file, masks=True, read_options=new)
    dataset = _old(lambda: CocoDataset(root, ann_file, masks=True, **old), "is deprecated: pass read_options=ReadOptions(")
    assert dataset.strict_decode == expected.strict_decode and len(dataset) == len(expected) > 0
    for (image, target), (want_image, want) in zip(dataset, expected):
        assert torch.equal(image, want_image) and target.keys() == want.keys()
        assert all(torch.equal(torch.as_tensor(target[key]), torch.as_tensor(want[key])) for key in target)


def test_strict_keeps_its_meaning_under_the_old_spelling(fixtures):
    root = fixtures / "hostile/coco"
    with pytest.raises(DataError, match=r"annotation 3: bbox .* has a non-positive width"):
        _old(lambda: CocoDataset(root / "images", root / "negative_box.json", strict=True), "strict_annotations=...")
    with pytest.raises(ValueError, match=r"CocoDataset does not read read_options.truncation"):
        CocoDataset(root / "images", root / "negative_box.json", read_options=ReadOptions(truncation="slice"))
