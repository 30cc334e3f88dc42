"""The domain as the command line runs it: ``recipes demo detection`` (the COCO fixture through
CocoDataset and detection_loader) and the annotations or tar shards ``recipes bench/show detection PATH`` open."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torchvision.transforms import v2

from recipes.core import storage, streams
from recipes.detection import CocoDataset, detection_loader


def build(fixtures: Path) -> tuple[CocoDataset, Any]:
    """The fixture's 10 images with masks and a random flip, in aspect-ratio grouped batches of 4."""
    dataset = CocoDataset(
        fixtures / "detection/images",
        fixtures / "detection/instances.json",
        transforms=v2.RandomHorizontalFlip(),
        masks=True,
    )
    # drop_last=False: the fixture is tiny and a demo should show every image
    return dataset, detection_loader(dataset, 4, train=True, device="cpu", seed=0, drop_last=False)


def open_path(options: Any, *, train: bool) -> CocoDataset | Any:
    """The COCO annotations at ``options.path`` (the CLI's ``DataOptions``) over their images
    (:func:`image_root`), or the tar shards there (a ``CocoShards``, the ``categories.json`` beside
    them read where there is one): a random flip if ``train``, else the images as the files hold
    them; crowd regions kept when ``options.include_crowd``."""
    transforms = v2.RandomHorizontalFlip() if train else None
    if streams.is_shards(options.path):
        from recipes.detection import CocoShards

        names = shard_folder(options.path) / "categories.json"
        return CocoShards(str(options.path), transforms=transforms, categories=names if names.is_file() else None,
                          on_error=options.on_error)
    return CocoDataset(image_root(options), options.path, transforms=transforms, include_crowd=options.include_crowd,
                       on_error=options.on_error)


def shard_folder(path: Any) -> Path:
    """The folder of the shards at ``path``: itself, or the folder of the one shard it names."""
    return Path(path) if Path(path).is_dir() else Path(path).parent


def image_root(options: Any) -> Path:
    """``--image-root``, else ``images/`` next to the annotation file, else its folder."""
    if options.image_root is not None:
        return Path(options.image_root).expanduser()
    beside = Path(options.path).parent / "images"
    return beside if beside.is_dir() else Path(options.path).parent


def prepare_path(source: Path, dest: Path, *, max_side: int = 0, quality: int = 90, image_root: Path | None = None,
                 **run: Any) -> tuple[Any, str]:
    """``recipes prepare detection INSTANCES.json DEST --image-root IMAGES``: :func:`recipes.detection.prepare`,
    and how to read what it wrote."""
    from recipes.detection import prepare

    if image_root is None:
        raise ValueError("detection reads its images from --image-root DIR (the folder of the file's file_names)")
    summary = prepare(image_root, source, dest, max_side=max_side, quality=quality, **run)
    categories = str(storage.join(dest, "categories.json"))
    return summary, f"recipes.detection.CocoShards({str(dest)!r}, categories={categories!r})"
