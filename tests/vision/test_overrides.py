"""ImageFolderDataset's documented seams (CONVENTIONS rule 16): ``find_samples``, as torchvision's
``find_classes`` + ``make_dataset``, and ``load_image`` / ``load_target``, as its ``_load_image`` /
``_load_target``, change the items a subclass gives; a hook of the wrong shape is refused by the
preset. A plain map-style Dataset gets the preset's seeding and resume too."""

import csv
import os
import shutil

import pytest
import torch
from torch.utils.data import Dataset

from recipes.core import DevicePrefetcher
from recipes.vision import ImageFolderDataset, eval_transform, train_transform, vision_loader
from tests.harness import check_resume_mid_epoch


class Greyscale(ImageFolderDataset):
    """Every image read, then turned grey: the way a subclass that reads images its own way looks."""

    def load_image(self, index):
        return super().load_image(index).float().mean(0, keepdim=True).round().to(torch.uint8).expand(3, -1, -1)


class Named(ImageFolderDataset):
    """The target is the file's class name and stem, not the class index."""

    def load_target(self, index):
        return f"{self.classes[int(self.labels[index])]}/{self.path(index).rsplit('/', 1)[-1]}"


class CsvLabels(ImageFolderDataset):
    """One folder of images and its labels.csv of ``file,label`` rows: docs/copying.md's change task."""

    def find_samples(self, root):
        with open(os.path.join(root, "labels.csv"), newline="", encoding="utf-8") as file:
            rows = list(csv.reader(file))
        classes = sorted({label for _, label in rows})
        return classes, [name for name, _ in rows], [classes.index(label) for _, label in rows]


def _flat_name(fixtures, path):
    return os.path.relpath(path, fixtures / "vision").replace(os.sep, "-")


@pytest.fixture
def flat(fixtures, tmp_path):
    """The fixture folder's images in one folder, labelled by a CSV: (folder, {file: label})."""
    folder, labels = tmp_path / "train", {}
    folder.mkdir()
    for path, _ in ImageFolderDataset(fixtures / "vision").samples:
        name = _flat_name(fixtures, path)
        shutil.copy(path, folder / name)
        labels[name] = "even" if len(labels) % 2 == 0 else "odd"  # not the folder names
    with open(folder / "labels.csv", "w", newline="", encoding="utf-8") as file:
        csv.writer(file).writerows(sorted(labels.items(), reverse=True))  # in no particular order
    return folder, labels


def test_labels_from_a_csv_by_overriding_find_samples(fixtures, flat):
    folder, labels = flat
    dataset, plain = CsvLabels(folder), ImageFolderDataset(fixtures / "vision")
    assert dataset.classes == ["even", "odd"] and len(dataset) == len(plain) == len(labels)
    by_file = {_flat_name(fixtures, path): index for index, (path, _) in enumerate(plain.samples)}
    for index in range(len(dataset)):
        name = os.path.basename(dataset.path(index))
        image, label = dataset[index]
        assert dataset.classes[label] == labels[name]
        assert torch.equal(image, plain[by_file[name]][0])  # the same file, decoded as the folder decodes it
    device = [b for b in DevicePrefetcher(vision_loader(CsvLabels(folder, eval_transform(32, resize_size=36)), 4,
                                                        train=False, device="cpu", num_workers=0, decode="device"),
                                          "cpu", normalize=False)]
    assert torch.cat([labels for _, labels in device]).tolist() == dataset.labels.tolist()

    def make():
        return vision_loader(CsvLabels(folder, train_transform(24)), 4, device="cpu", seed=3, num_workers=0,
                             stateful=True)

    check_resume_mid_epoch(make)


def test_what_find_samples_gives_is_checked(flat):
    class Unlabelled(CsvLabels):
        def find_samples(self, root):
            classes, files, labels = super().find_samples(root)
            return classes, files, [label + 2 for label in labels]

    with pytest.raises(ValueError, match=r"Unlabelled.find_samples gave (\d+) files and \1 labels for 2 classes"):
        Unlabelled(flat[0])


class Plain(Dataset):
    """A user's own map-style Dataset of (uint8 [3,H,W], label) items: no recipe class, no hook."""

    def __len__(self):
        return 18

    def __getitem__(self, index):
        pixels = ((torch.arange(3 * 20 * 16).reshape(3, 20, 16) * (index + 1)) % 256).to(torch.uint8)
        top, left = torch.randint(0, 9, (2,)).tolist()  # its own augmentation, from torch's generator
        return pixels[:, top:top + 12, left:left + 8], index % 3


@pytest.mark.parametrize("workers", [0, 2], ids=["workers0", "workers2"])
def test_a_plain_dataset_gets_the_presets_seeding_and_exact_resume(workers):
    def make():
        return vision_loader(Plain(), 4, device="cpu", seed=5, num_workers=workers, stateful=True)

    check_resume_mid_epoch(make)


def test_an_overridden_load_image_changes_the_items_images(fixtures):
    plain, grey = ImageFolderDataset(fixtures / "vision"), Greyscale(fixtures / "vision")
    for index in range(len(plain)):
        image, label = grey[index]
        expected = plain[index][0].float().mean(0, keepdim=True).round().to(torch.uint8).expand(3, -1, -1)
        assert torch.equal(image, expected) and label == plain[index][1]


def test_an_overridden_load_target_changes_the_items_targets(fixtures):
    named = Named(fixtures / "vision")
    plain = ImageFolderDataset(fixtures / "vision")
    for index in range(len(named)):
        image, target = named[index]
        assert target == f"{plain.classes[plain.targets[index]]}/{plain.samples[index][0].rsplit('/', 1)[-1]}"
        assert torch.equal(image, plain[index][0])


def test_device_decode_runs_an_overridden_load_image_in_the_workers(fixtures):
    grey = Greyscale(fixtures / "vision", eval_transform(32, resize_size=36))

    def batches(decode):
        loader = vision_loader(grey, 4, train=False, device="cpu", seed=0, num_workers=0, decode=decode)
        return [images for images, _ in DevicePrefetcher(loader, "cpu", normalize=False)]

    device, worker = batches("device"), batches("worker")
    assert len(device) == len(worker) == -(-len(grey) // 4)
    for a, b in zip(device, worker):
        assert torch.equal(a, b)
        assert torch.equal(a[:, 0], a[:, 1]) and torch.equal(a[:, 1], a[:, 2])  # grey: the override ran


class DescribedWrongly(ImageFolderDataset):
    def describe(self):  # the core passes the index
        return "somewhere"


def test_the_preset_refuses_a_hook_of_the_wrong_shape(fixtures):
    with pytest.raises(TypeError, match=r"DescribedWrongly\.describe\(\) does not take the arguments"):
        vision_loader(DescribedWrongly(fixtures / "vision"), 4, device="cpu", seed=0, num_workers=0)
