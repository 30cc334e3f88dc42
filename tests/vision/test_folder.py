"""ImageFolderDataset against torchvision's ImageFolder and PIL; image_collate; bad files."""

import os
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from torchvision import tv_tensors
from torchvision.datasets import DatasetFolder, ImageFolder

from recipes.core.contracts.read_options import ReadOptions
from recipes.core import DevicePrefetcher
from recipes.core.contracts.errors import DataError, SkippedSampleWarning
from recipes.vision import ImageFolderDataset, eval_transform, image_collate, vision_loader
from recipes.vision.tests.test_vision import pil_pixels  # PIL's upright RGB (16-bit gray: its top byte)
from tests.photos import jpeg_bytes, overwrite_scan_data, photo


def assert_same_index(ours: ImageFolderDataset, theirs: DatasetFolder) -> None:
    assert ours.classes == theirs.classes
    assert ours.class_to_idx == theirs.class_to_idx
    assert ours.samples == theirs.samples  # same order, same path spelling
    assert ours.imgs == getattr(theirs, "imgs", theirs.samples)  # ImageFolder's alias
    assert ours.targets == theirs.targets
    assert len(ours) == len(theirs)
    assert all(type(path) is str and type(label) is int for path, label in ours.samples)
    assert all(ours.path(i) == path for i, (path, _) in enumerate(theirs.samples))


def messy_tree(root: Path) -> Path:
    """Everything ImageFolder's walk has an opinion on; files are empty (the index never opens them)."""
    files = [
        "cat/b.jpg", "cat/a.JPG", "cat/c.Jpeg", "cat/d.png", "cat/notes.txt", "cat/README", "cat/.hidden.jpg",
        "cat/archive.jpg.zip", "cat/nodotjpg", "cat/sub/z.jpg", "cat/sub/deeper/y.webp", "cat/sub dir/q.jpg",
        "cat/sub-dir/r.jpg", "cat/sub.dir/s.jpg", "cat/sub_dir/t.bmp", "cat/Sub/u.TIF", "cat/sub0/v.ppm",
        "dog/1.jpg", "dog/10.jpg", "dog/2.jpg", "dog/\u00e9t\u00e9.jpg", "dog/e\u0301te.jpg", "dog/x.pgm",
        "Zebra/only.tiff", "bird/nest/egg.jpeg", "bird/nest/egg.txt", "labels.csv",
    ]
    for name in files:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(b"")
    (root / "outside").mkdir()
    (root / "outside" / "linked.png").write_bytes(b"")
    os.symlink(root / "outside", root / "dog" / "link")  # ImageFolder follows links into folders
    return root


def test_fixture_folder_has_torchvision_classes_samples_and_targets(fixtures):
    assert_same_index(ImageFolderDataset(fixtures / "vision"), ImageFolder(fixtures / "vision"))
    names = [os.path.basename(path) for path, _ in ImageFolderDataset(fixtures / "vision").samples]
    assert "X.JPG" in names and "p0.jpg" in names and "notes.txt" not in names


def test_messy_tree_has_torchvision_order_extensions_nesting_and_links(tmp_path):
    root = messy_tree(tmp_path / "data")
    ours = ImageFolderDataset(root)
    assert_same_index(ours, ImageFolder(root))
    assert "outside" in ours.classes  # ImageFolder counts every folder, whatever it holds
    assert any(path.endswith(os.path.join("link", "linked.png")) for path, _ in ours.samples)


@pytest.mark.parametrize("spelling", ["str", "trailing-slash", "relative", "home"])
def test_root_spelling_is_kept_in_paths_like_torchvision(tmp_path, monkeypatch, spelling):
    messy_tree(tmp_path / "data")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    root = {"str": str(tmp_path / "data"), "trailing-slash": f"{tmp_path / 'data'}/", "relative": "data",
            "home": "~/data"}[spelling]
    assert_same_index(ImageFolderDataset(root), ImageFolder(root))


@pytest.mark.parametrize("extensions", [(".png", ".webp"), ".png", (".tiff",)], ids=["tuple", "str", "one"])
def test_custom_extensions_select_what_dataset_folder_selects(tmp_path, extensions):
    root = messy_tree(tmp_path / "data")
    ours = ImageFolderDataset(root, extensions=extensions, allow_empty=True)
    assert_same_index(ours, DatasetFolder(root, loader=open, extensions=extensions, allow_empty=True))


def test_extensions_are_case_insensitive_on_both_sides(tmp_path):
    root = messy_tree(tmp_path / "data")
    upper = ImageFolderDataset(root, extensions=(".PNG", ".WebP"), allow_empty=True)
    # torchvision lowercases only the file name, so (".PNG",) would find nothing there
    assert_same_index(upper, DatasetFolder(root, loader=open, extensions=(".png", ".webp"), allow_empty=True))


def test_empty_class_folder_is_refused_like_torchvision_unless_allowed(tmp_path):
    root = messy_tree(tmp_path / "data")
    (root / "empty").mkdir()
    (root / "texts_only").mkdir()
    (root / "texts_only" / "a.txt").write_bytes(b"")
    with pytest.raises(FileNotFoundError):
        ImageFolder(root)
    with pytest.raises(FileNotFoundError, match="empty, texts_only.*allow_empty=True"):
        ImageFolderDataset(root)
    assert_same_index(ImageFolderDataset(root, allow_empty=True), ImageFolder(root, allow_empty=True))


def test_missing_empty_or_file_root_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        ImageFolderDataset(tmp_path / "nope")
    (tmp_path / "bare").mkdir()
    (tmp_path / "bare" / "a.jpg").write_bytes(b"")
    with pytest.raises(FileNotFoundError, match="no class folder.*<class name>"):
        ImageFolderDataset(tmp_path / "bare")
    with pytest.raises(NotADirectoryError, match="is a file"):
        ImageFolderDataset(tmp_path / "bare" / "a.jpg")


def test_index_is_numpy_arrays_not_python_lists(fixtures):
    dataset = ImageFolderDataset(fixtures / "vision")
    assert isinstance(dataset.labels, np.ndarray) and dataset.labels.dtype == np.int64
    assert isinstance(dataset.paths.data, np.ndarray) and isinstance(dataset.paths.offsets, np.ndarray)
    assert not any(isinstance(value, list) and len(value) == len(dataset) for value in vars(dataset).values())


def test_every_fixture_image_matches_pil_pixel_for_pixel(fixtures):
    dataset = ImageFolderDataset(fixtures / "vision")
    modes = set()
    for index, (path, label) in enumerate(ImageFolder(fixtures / "vision").samples):
        image, target = dataset[index]
        assert isinstance(image, tv_tensors.Image) and image.dtype == torch.uint8
        assert image.permute(1, 2, 0).is_contiguous()  # the decoder's dense [H,W,3] memory, documented
        assert target == label and type(target) is int
        np.testing.assert_array_equal(image.permute(1, 2, 0).numpy(), pil_pixels(path), err_msg=path)
        with Image.open(path) as opened:
            modes.add(opened.mode)
    assert modes == {"RGB", "RGBA", "L", "P", "I;16", "CMYK"}


def test_exif_rotated_photo_comes_out_upright(fixtures):
    dataset = ImageFolderDataset(fixtures / "vision")
    index = next(i for i, (path, _) in enumerate(dataset.samples) if path.endswith("exif_rot6.jpg"))
    image = dataset[index][0]
    assert tuple(image.shape) == (3, 96, 64)
    red, blue = image[:, 2:14, 2:22].float().mean((1, 2)), image[:, 90:94, 54:62].float().mean((1, 2))
    assert red[0] > 200 and red[1:].max() < 60 and blue[2] > 200 and blue[:2].max() < 60  # red TL, blue BR


def test_transform_receives_the_uint8_image(fixtures):
    seen = []
    dataset = ImageFolderDataset(fixtures / "vision", transform=lambda image: seen.append(image) or image[:, :8, :8])
    image, _ = dataset[0]
    assert isinstance(seen[0], tv_tensors.Image) and seen[0].dtype == torch.uint8 and seen[0].shape[0] == 3
    assert tuple(image.shape) == (3, 8, 8) and isinstance(image, tv_tensors.Image)


@pytest.fixture()
def hostile_folder(fixtures, tmp_path):
    """good/: three fixture images; bad/: the four hostile image files."""
    for name in ("bird/rgb.jpg", "dog/rgb.png", "bird/gray.png"):
        (tmp_path / "good").mkdir(exist_ok=True)
        shutil.copy(fixtures / "vision" / name, tmp_path / "good" / name.replace("/", "_"))
    shutil.copytree(fixtures / "hostile" / "images", tmp_path / "bad")
    return tmp_path


BAD = {"bomb.png": "bomb", "empty.jpg": "empty", "not_an_image.jpg": "not an image", "truncated.jpg": "cannot decode"}


@pytest.mark.parametrize("name", sorted(BAD), ids=[n.split(".")[0] for n in sorted(BAD)])
def test_bad_file_raises_a_data_error_naming_it(hostile_folder, name):
    dataset = ImageFolderDataset(hostile_folder)
    index = next(i for i, (path, _) in enumerate(dataset.samples) if path.endswith(name))
    with pytest.raises(DataError, match=f"{name}: .*{BAD[name]}"):
        dataset[index]


def test_raise_policy_stops_the_loader_at_the_first_bad_file_and_names_it(hostile_folder):
    # (tests/core checks that the message survives the trip out of a worker; a DataLoader whose
    # worker raised takes 2 x 5 s to shut down, so this stays in the main process)
    loader = vision_loader(ImageFolderDataset(hostile_folder, eval_transform(16, 16)), 2, train=False,
                           device="cpu", num_workers=0)
    with pytest.raises(DataError, match=r"bad[/\\]bomb\.png: refused as a decompression bomb"):
        list(loader)


def test_skip_policy_yields_exactly_the_good_images_and_warns_for_each_bad_one(hostile_folder):
    dataset = ImageFolderDataset(hostile_folder, eval_transform(16, 16), on_error="skip")
    loader = vision_loader(dataset, 3, train=False, device="cpu", num_workers=0)
    with pytest.warns(SkippedSampleWarning) as caught:
        batches = list(loader)
    assert [len(labels) for _, labels in batches] == [0, 2, 1]  # bad/ sorts first: 4 bad, then 3 good
    good = dataset.class_to_idx["good"]
    assert torch.cat([labels for _, labels in batches]).tolist() == [good] * 3
    expected = torch.stack([dataset[i][0] for i in range(len(dataset)) if dataset.targets[i] == good])
    assert torch.equal(torch.cat([images for images, labels in batches if len(labels)]), expected)
    messages = sorted(str(w.message) for w in caught)
    assert len(messages) == 4
    for message, name in zip(messages, sorted(BAD)):
        assert os.path.join("bad", name) in message and BAD[name] in message


def test_skip_policy_with_workers_gives_the_same_good_images(hostile_folder):
    dataset = ImageFolderDataset(hostile_folder, eval_transform(16, 16), on_error="skip")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SkippedSampleWarning)
        plain = list(vision_loader(dataset, 3, train=False, device="cpu", num_workers=0))
        workers = list(vision_loader(dataset, 3, train=False, device="cpu", num_workers=2))  # forked: same filter
    assert [len(labels) for _, labels in workers] == [0, 2, 1]
    for (a, x), (b, y) in zip(plain, workers):
        assert torch.equal(a, b) and torch.equal(x, y)


def test_unknown_options_list_the_choices(fixtures):
    with pytest.raises(ValueError, match="on_error must be one of"):
        ImageFolderDataset(fixtures / "vision", on_error="ignore")
    with pytest.raises(ValueError, match="draft_size must be 'auto', None or"):
        ImageFolderDataset(fixtures / "vision", draft_size="big")


# -- image_collate -------------------------------------------------------------------------------


def _samples(sizes, labels=None):
    generator = torch.Generator().manual_seed(0)
    return [
        (tv_tensors.Image(torch.randint(0, 256, (3, h, w), dtype=torch.uint8, generator=generator)), label)
        for (h, w), label in zip(sizes, labels or range(len(sizes)))
    ]


def test_collate_stacks_uint8_images_and_int64_labels():
    batch = _samples([(5, 7)] * 4, labels=[3, 0, 2, 2])
    images, labels = image_collate(batch)
    assert images.dtype == torch.uint8 and tuple(images.shape) == (4, 3, 5, 7)
    assert labels.dtype == torch.int64 and labels.tolist() == [3, 0, 2, 2]
    assert torch.equal(images, torch.stack([image for image, _ in batch]))


def test_collate_copies_strided_images_correctly():
    image = torch.randint(0, 256, (9, 8, 3), dtype=torch.uint8).permute(2, 0, 1)  # HWC memory
    images, _ = image_collate([(image, 0), (image.flip(-1), 1)])
    assert torch.equal(images[0], image) and torch.equal(images[1], image.flip(-1))
    assert images.is_contiguous(memory_format=torch.channels_last)  # one plain copy per image, no transpose
    contiguous, _ = image_collate([(image.contiguous(), 0)])
    assert contiguous.is_contiguous()


def test_collate_drops_skipped_samples():
    batch = _samples([(4, 4)] * 3)
    images, labels = image_collate([None, batch[0], None, batch[2]])
    assert labels.tolist() == [0, 2] and torch.equal(images[1], batch[2][0])
    images, labels = image_collate([None, None])
    assert tuple(images.shape) == (0, 3, 0, 0) and tuple(labels.shape) == (0,)


def test_collate_of_different_sizes_asks_for_a_resize_or_crop_transform():
    with pytest.raises(ValueError, match=r"sample 2 is \[3, 6, 4\].*sample 0 is \[3, 4, 4\].*add a resize/crop transform"):
        image_collate(_samples([(4, 4), (4, 4), (6, 4)]))


@pytest.mark.parametrize("decode", ["worker", "device"])
def test_strict_decode_raises_or_skips_a_jpeg_with_overwritten_scan_data(tmp_path, decode):
    (tmp_path / "a").mkdir()
    data = jpeg_bytes(photo(320, 240, 0), quality=90)
    (tmp_path / "a" / "clean.jpg").write_bytes(data)
    (tmp_path / "a" / "damaged.jpg").write_bytes(overwrite_scan_data(data, 0.5, seed=1))

    def batches(mode=decode, **options):
        # eval_transform(16) drafts these photos: PIL decodes, libjpeg checks
        dataset = ImageFolderDataset(tmp_path, eval_transform(16, 16), **options)
        loader = vision_loader(dataset, 2, train=False, device="cpu", num_workers=0, decode=mode)
        return list(DevicePrefetcher(loader, "cpu"))

    assert len(batches()[0][1]) == 2  # the default decodes it, damaged blocks and all
    reason = r"a[/\\]damaged\.jpg: cannot decode image \(Corrupt JPEG data"
    with pytest.raises(DataError, match=reason):
        batches(read_options=ReadOptions(strict_decode=True))
    with pytest.warns(SkippedSampleWarning, match=reason) as caught:
        (images, labels), = batches(read_options=ReadOptions(strict_decode=True), on_error="skip")
    assert len(caught) == 1 and labels.tolist() == [0]
    # the clean photo (sorted first), decoded in the worker as the plain path decodes it
    assert torch.equal(images, batches("worker")[0][0][:1])
