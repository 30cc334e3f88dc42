"""ImageFolderDataset's documented seams (CONVENTIONS rule 16): ``load_image`` and ``load_target``,
as torchvision's ``_load_image`` / ``_load_target``, change the items a subclass gives; a hook of
the wrong shape is refused by the preset."""

import pytest
import torch

from recipes.core import DevicePrefetcher
from recipes.vision import ImageFolderDataset, eval_transform, vision_loader


class Greyscale(ImageFolderDataset):
    """Every image read, then turned grey: the way a subclass that reads images its own way looks."""

    def load_image(self, index):
        return super().load_image(index).float().mean(0, keepdim=True).round().to(torch.uint8).expand(3, -1, -1)


class Named(ImageFolderDataset):
    """The target is the file's class name and stem, not the class index."""

    def load_target(self, index):
        return f"{self.classes[int(self.labels[index])]}/{self.path(index).rsplit('/', 1)[-1]}"


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
