"""ImageShards and write_shards: WebDataset tar shards (written here with tarfile, the ImageNet layout,
and by write_shards) give the items ImageFolderDataset gives for the same files; labels from .cls,
.json and class names; the loader's workers, seeds and resume; HTTP with faults; every bad sample
named by shard and key."""

import io
import json
import tarfile
from pathlib import Path

import pytest
import torch

from recipes.core import DataError, DevicePrefetcher, MixedStream, ReadOptions, SkippedSampleWarning, StreamOrder
from recipes.vision import (
    ImageFolderDataset,
    ImageShards,
    eval_transform,
    train_transform,
    vision_loader,
    write_shards,
)
from tests.device_images import assert_near_worker
from tests.harness import digest
from tests.servers import FaultyHTTPServer, s3_server, upload


def write_tar(path: Path, members: list[tuple[str, bytes]], mode: str = "w") -> Path:
    with tarfile.open(path, mode) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def folder_members(dataset: ImageFolderDataset, rows: range, label: str = "cls") -> list[tuple[str, bytes]]:
    """Each sample of ``dataset`` in ``rows`` as ``<key>.<ext>`` and its label member."""
    members = []
    for row in rows:
        path, target = dataset.samples[row]
        members.append((f"{row:06d}.{Path(path).suffix[1:].lower()}", Path(path).read_bytes()))
        if label == "cls":
            members.append((f"{row:06d}.cls", f"{target}\n".encode()))
        else:
            members.append((f"{row:06d}.json", json.dumps({"label": dataset.classes[target], "n": target}).encode()))
    return members


@pytest.fixture(scope="module")
def folder(fixtures) -> ImageFolderDataset:
    return ImageFolderDataset(fixtures / "vision")


@pytest.fixture(scope="module")
def shards(folder, tmp_path_factory) -> list[Path]:
    """The 14 fixture images in three shards, the last one gzip-compressed."""
    out = tmp_path_factory.mktemp("shards")
    return [write_tar(out / "train-000000.tar", folder_members(folder, range(0, 5))),
            write_tar(out / "train-000001.tar", folder_members(folder, range(5, 10))),
            write_tar(out / "train-000002.tgz", folder_members(folder, range(10, 14)), mode="w:gz")]


def test_items_equal_the_folders_for_the_same_files(folder, shards):
    items = list(ImageShards(shards))
    assert len(items) == len(folder) == 14
    for row, (image, label) in enumerate(items):
        expected, target = folder[row]
        assert type(image).__name__ == "Image" and image.dtype == torch.uint8
        assert torch.equal(image, expected) and label == target and type(label) is int, folder.samples[row][0]


def test_labels_from_json_by_name_or_key_with_classes_as_a_list_or_a_file(folder, tmp_path):
    shard = write_tar(tmp_path / "named.tar", folder_members(folder, range(14), label="json"))
    (tmp_path / "classes.txt").write_text("\n".join(folder.classes) + "\n")
    for classes in (folder.classes, tmp_path / "classes.txt"):
        assert [label for _, label in ImageShards(shard, label="json", classes=classes)] == folder.targets
    assert [label for _, label in ImageShards(shard, label="json:n")] == folder.targets
    with pytest.raises(ValueError, match="label must be one of"):
        ImageShards(shard, label="txt")


def test_two_workers_read_every_sample_once_and_a_seed_draws_the_same_crops_whatever_the_workers(shards):
    def images(workers: int, seed: int = 0) -> list[str]:
        stream = ImageShards(shards, transform=train_transform(16), order=StreamOrder(shuffle_buffer=4, seed=seed))
        loader = vision_loader(stream, 2, train=False, device="cpu", num_workers=workers)
        return sorted(digest([image, label]) for images, labels in loader for image, label in zip(images, labels))

    once = images(0)
    assert len(once) == 14 and images(2) == once  # each sample once, augmented by its key's seed
    assert images(0, seed=1) != once


def test_a_stateful_loader_resumes_mid_epoch_with_exactly_the_batches_still_to_come(shards):
    def loader():
        stream = ImageShards(shards, transform=train_transform(16), order=StreamOrder(shuffle_buffer=3, seed=2))
        return vision_loader(stream, 2, device="cpu", seed=2, stateful=True, num_workers=0)

    uninterrupted = loader()
    expected = [digest(batch) for batch in list(uninterrupted) + list(uninterrupted)]
    interrupted = loader()
    batches = iter(interrupted)
    seen = [digest(next(batches)) for _ in range(3)]
    resumed = loader()
    resumed.load_state_dict(interrupted.state_dict())
    assert seen + [digest(batch) for batch in list(resumed) + list(resumed)] == expected


def test_device_decoding_gives_the_worker_paths_batches_and_its_states_resume_the_worker_path(shards):
    def loader(decode: str, workers: int, **options):
        stream = ImageShards(shards, transform=train_transform(16), order=StreamOrder(shuffle_buffer=4, seed=5))
        return vision_loader(stream, 4, device="cpu", seed=5, decode=decode, num_workers=workers, **options)

    # the fixtures' PNG, CMYK and progressive images are decoded in the worker, in the same batches
    assert any(not images.on_device.all() and images.on_device.any() for images, _ in loader("device", 0))
    worker, device = list(loader("worker", 2)), list(DevicePrefetcher(loader("device", 2), "cpu", normalize=False))
    assert len(worker) == len(device) == 2  # 7 samples a worker: a batch each, the rest dropped
    for (a, labels_a), (b, labels_b) in zip(worker, device):
        assert torch.equal(labels_a, labels_b)
        assert_near_worker(b, a)
    interrupted = loader("device", 0, stateful=True)
    next(iter(interrupted))
    resumed = loader("worker", 0, stateful=True)
    resumed.load_state_dict(interrupted.state_dict())  # the view's state is the stream's own
    assert [digest(batch) for batch in resumed] == [digest(batch) for batch in list(loader("worker", 0))[1:]]
    strict = ImageShards(shards, transform=train_transform(16), read_options=ReadOptions(strict_decode=True))
    assert strict.encoded().plan is None  # only libjpeg on the CPU reports corrupt data: decoded in the worker
    with pytest.raises(ValueError, match="use decode='worker'"):
        vision_loader(ImageShards(shards), 4, decode="device")


def test_spawned_workers_give_the_samples_of_the_main_process(shards):
    def images(**options) -> list[str]:
        loader = vision_loader(ImageShards(shards, transform=eval_transform(16, resize_size=16)), 4, train=False,
                               device="cpu", **options)
        return sorted(digest(image) for images, _ in loader for image in images)

    assert images(num_workers=2, multiprocessing_context="spawn") == images(num_workers=0)


@pytest.mark.usefixtures("quick_retries")
def test_http_shards_with_503s_and_cut_bodies_give_the_local_samples(shards):
    local = [digest(item) for item in ImageShards(shards[:2])]
    with FaultyHTTPServer(shards[0].parent, fail_every=3, cut_every=4) as server:
        remote = [digest(item) for item in ImageShards(server.url("train-{000000..000001}.tar"))]
    assert server.faults["503"] > 0 and server.faults["cut"] > 0
    assert remote == local and len(local) == 10


def test_s3_shards_with_a_cache_dir_give_the_local_samples_and_later_epochs_read_the_cache(shards, tmp_path):
    local = [digest(item) for item in ImageShards(shards, order=StreamOrder(seed=0))]
    with s3_server() as (endpoint, storage):
        upload(endpoint, shards[0].parent)
        stream = ImageShards("s3://data/train-*", storage_options=storage, cache_dir=tmp_path / "cache",
                             order=StreamOrder(seed=0))
        first = [digest(item) for item in stream]
    assert first == local and len(local) == 14
    again = [digest(item) for item in stream]  # the server is gone: the next epoch reads the cached shards
    assert sorted(again) == sorted(local)


def test_two_ranks_of_two_readers_read_every_sample_once_each_epoch(shards):
    seen = []
    for rank in (0, 1):
        stream = ImageShards(shards, transform=eval_transform(8, resize_size=8),
                             order=StreamOrder(shuffle_buffer=3, seed=0, rank=rank, world_size=2))
        loader = vision_loader(stream, 1, train=False, device="cpu", num_workers=2)
        seen += [digest(images[0]) for images, _ in loader]
    one = vision_loader(ImageShards(shards, transform=eval_transform(8, resize_size=8)), 1, train=False, device="cpu",
                        num_workers=0)
    assert len(seen) == 14 and sorted(seen) == sorted(digest(images[0]) for images, _ in one)


def test_two_shard_sets_mix_by_weight_and_the_mixture_resumes_exactly(shards):
    def loader():
        sources = [ImageShards(part, transform=train_transform(8), order=StreamOrder(seed=0))
                   for part in (shards[:2], shards[2:])]
        mixed = MixedStream(sources, weights=[3, 1], samples_per_epoch=12, seed=0)
        return vision_loader(mixed, 3, device="cpu", seed=0, stateful=True, num_workers=0)

    uninterrupted = loader()
    expected = [digest(batch) for batch in list(uninterrupted) + list(uninterrupted)]
    assert len(expected) == 8
    interrupted = loader()
    batches = iter(interrupted)
    seen = [digest(next(batches)) for _ in range(2)]
    resumed = loader()
    resumed.load_state_dict(interrupted.state_dict())
    assert seen + [digest(batch) for batch in list(resumed) + list(resumed)] == expected


JPEG = "rgb.jpg"


@pytest.mark.parametrize("members, message", [
    ([("a.cls", b"1")], r"a: no image \(jpg/"),
    ([("a.jpg", JPEG)], r"a: no label \(cls\)"),
    ([("a.jpg", JPEG), ("a.cls", b"7")], r"a: the label 7 is out of range \(a class index is in 0\.\.1\)"),
    ([("a.jpg", JPEG), ("a.cls", b"-1")], r"a: the label -1 is out of range"),
    ([("a.jpg", JPEG), ("a.cls", b"zebra")], r"a: the label 'zebra' is not one of the 2 classes"),
    ([("a.jpg", JPEG), ("a.png", "rgb.png"), ("a.cls", b"0")], r"a: two images under one key \(jpg, png\)"),
    ([("a.jpg", JPEG), ("a.cls", b"\xff")], r"a: cannot read the label from its \.cls"),
    ([("a.jpg", b"not a jpeg"), ("a.cls", b"0")], r"a\.jpg"),
], ids=["no-image", "no-label", "out-of-range", "negative", "unknown-name", "two-images", "not-utf8", "bad-image"])
def test_a_bad_sample_is_named_by_shard_and_key_or_skipped_with_a_warning(fixtures, tmp_path, members, message):
    def data(value):
        return (fixtures / "vision" / "dog" / value).read_bytes() if isinstance(value, str) else value

    good = [("b.jpg", data(JPEG)), ("b.cls", b"1")]
    shard = write_tar(tmp_path / "bad.tar", [(name, data(value)) for name, value in members] + good)
    with pytest.raises(DataError, match=r"bad\.tar:" + message):
        list(ImageShards(shard, classes=["cat", "dog"]))
    with pytest.warns(SkippedSampleWarning, match=r"bad\.tar:" + message):
        items = list(ImageShards(shard, classes=["cat", "dog"], on_error="skip"))
    assert [label for _, label in items] == [1]  # the good sample only, never a substitute


def test_a_class_name_without_classes_says_what_to_pass(fixtures, tmp_path):
    image = (fixtures / "vision" / "dog" / JPEG).read_bytes()
    shard = write_tar(tmp_path / "named.tar", [("a.jpg", image), ("a.json", b'{"label": "dog"}')])
    with pytest.raises(DataError, match=r"named\.tar:a: the label 'dog' is a class name; pass classes="):
        list(ImageShards(shard, label="json"))


def test_written_shards_are_equal_reproducible_and_read_back_as_the_folder(fixtures, folder, tmp_path):
    paths = write_shards(fixtures / "vision", tmp_path / "a", samples_per_shard=5)
    again = write_shards(fixtures / "vision", tmp_path / "b", samples_per_shard=5)
    assert [path.name for path in paths] == ["shard-000000.tar", "shard-000001.tar", "shard-000002.tar"]
    assert [path.read_bytes() for path in paths] == [path.read_bytes() for path in again]  # byte-identical
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["classes.txt", *[p.name for p in paths]]  # no .tmp
    with tarfile.open(paths[0]) as tar:
        names = tar.getnames()
        assert names[:2] == [f"000000000{Path(folder.samples[0][0]).suffix}", "000000000.cls"]  # original bytes
        assert len([name for name in names if name.endswith(".cls")]) == 5
    shards = ImageShards(paths, classes=tmp_path / "a" / "classes.txt")
    assert shards.classes == folder.classes
    items = list(shards)
    assert len(items) == 14 and all(torch.equal(image, folder[row][0]) and label == folder.targets[row]
                                    for row, (image, label) in enumerate(items))


def test_a_manifest_of_paths_and_names_is_written_with_its_classes_and_bad_rows_named(fixtures, folder, tmp_path):
    root = fixtures / "vision"
    rows = [(Path(path).relative_to(root).as_posix(), folder.classes[label]) for path, label in folder.samples]
    manifest = tmp_path / "train.csv"
    manifest.write_text("path,label\n" + "".join(f"{path},{name}\n" for path, name in rows))
    paths = write_shards(manifest, tmp_path / "out", image_root=root)
    assert (tmp_path / "out" / "classes.txt").read_text().split() == sorted(set(folder.classes))
    assert [label for _, label in ImageShards(paths)] == folder.targets  # the names, numbered in sorted order
    (tmp_path / "bad.jsonl").write_text(json.dumps({"path": "cat/nope.jpg", "label": 0}) + "\n"
                                        + json.dumps({"path": rows[0][0], "label": 0}) + "\n")
    with pytest.raises(DataError, match=r"bad\.jsonl line 1 \(cat/nope\.jpg\): cannot read it"):
        write_shards(tmp_path / "bad.jsonl", tmp_path / "bad", image_root=root)
    with pytest.warns(SkippedSampleWarning, match=r"bad\.jsonl line 1"):
        kept = write_shards(tmp_path / "bad.jsonl", tmp_path / "skipped", image_root=root, on_error="skip")
    assert [label for _, label in ImageShards(kept)] == [0]


def test_recipes_check_names_each_bad_sample_of_the_shards_by_shard_and_key(fixtures, tmp_path, capsys):
    from recipes.__main__ import main

    write_shards(fixtures / "vision", tmp_path, samples_per_shard=7)
    assert main(["check", "vision", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "no problems found" in out and "14 samples" in out and "bird 5, cat 5, dog 4" in out  # from classes.txt
    image = (fixtures / "vision" / "dog" / JPEG).read_bytes()
    bad = [("x.jpg", image), ("x.cls", b"9"), ("y.jpg", image[:300]), ("y.cls", b"0")]
    write_tar(tmp_path / "shard-000002.tar", bad)
    assert main(["check", "vision", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "shard-000002.tar:x" in out and "out of range" in out and "shard-000002.tar:y" in out


def test_recipes_show_and_bench_read_shards_as_they_read_a_folder(fixtures, tmp_path, capsys):
    from recipes.__main__ import main

    shards = tmp_path / "shards"
    write_shards(fixtures / "vision", shards, samples_per_shard=5)
    assert main(["show", "vision", str(shards), "--output", str(tmp_path / "batch.png"), "--batch-size", "4"]) == 0
    out = capsys.readouterr().out
    assert "evaluation batch (stream order) of ImageShards, 14 samples; batch size 4, 4 drawn" in out
    assert "10 samples in later batches" in out and (tmp_path / "batch.png").stat().st_size > 0
    assert main(["bench", "vision", str(shards / "shard-000000.tar"), "--seconds", "1", "--max-workers", "0",
                 "--batch-size", "2", "--step-ms", "0", "--size", "32"]) == 0
    out = capsys.readouterr().out
    assert "ImageShards with 5 samples" in out and "loader_kwargs = {'num_workers': 0" in out
