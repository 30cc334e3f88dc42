"""decode="device" for image folders: on the CPU, the batches of decode="worker" for the same seed."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from recipes.core import DevicePrefetcher, MixedDataset
from recipes.core.device_decode import EncodedBatch
from recipes.core.errors import DataError, SkippedSampleWarning
from recipes.vision import ImageFolderDataset, eval_transform, train_transform, vision_loader
from tests.photos import photo

PRESETS = {"train": lambda: train_transform(24), "eval": lambda: eval_transform(24, resize_size=28)}


def _folder(fixtures, tmp_path):
    """The fixture folder (JPEG, PNG, gray, 16-bit, palette, RGBA, CMYK, EXIF-turned) plus progressive JPEGs."""
    root = tmp_path / "images"
    shutil.copytree(fixtures / "vision", root)
    for seed in range(2):
        photo(70, 50, seed=seed).save(root / "bird" / f"progressive_{seed}.jpg", quality=90, progressive=True)
    return root


def _large_photos(root):
    """Two classes of JPEGs 2-9 times the presets' draft sizes below (decoded at 1/2 or 1/4 by
    the worker path), gray and colour, landscape and portrait, plus a PNG and a small JPEG."""
    for k in range(2):
        folder = root / f"class_{k}"
        folder.mkdir(parents=True)
        for j, size in enumerate([(320, 240), (240, 320), (900, 700), (420, 330), (60, 50)]):
            photo(*size, seed=10 * k + j).save(folder / f"{j}.jpg", quality=90)
        photo(320, 240, seed=10 * k + 7).convert("L").save(folder / "gray.jpg", quality=90)
        photo(320, 240, seed=10 * k + 8).save(folder / "flat.png")
    return root


# draft sizes (99, 99) and (110, 110): every JPEG but the small one is at least twice that
LARGE = {"train": lambda: train_transform(24), "eval": lambda: eval_transform(96, resize_size=110)}


@pytest.mark.parametrize("preset", list(LARGE))
def test_photos_decoded_at_reduced_scale_give_the_worker_path_batches_through_workers(tmp_path, preset):
    dataset = ImageFolderDataset(_large_photos(tmp_path / "photos"), LARGE[preset]())  # draft_size="auto"
    train = preset == "train"
    worker, device = (
        list(DevicePrefetcher(vision_loader(dataset, 4, train=train, device="cpu", seed=7, decode=decode,
                                            num_workers=2), "cpu"))
        for decode in ("worker", "device")
    )
    assert len(worker) == len(device) == (3 if train else 4)
    for (a, labels_a), (b, labels_b) in zip(worker, device):
        assert torch.equal(labels_a, labels_b)
        torch.testing.assert_close(b, a, rtol=0, atol=1e-6)
    raw = list(vision_loader(dataset, 4, train=train, device="cpu", seed=7, decode="device", num_workers=0))
    scales = torch.cat([images.scales for images, _ in raw if isinstance(images, EncodedBatch)])
    assert (scales > 1).sum() >= 8 and (scales == 1).any()  # reduced-scale JPEGs went to the device decoder


def _batches(dataset, decode, device="cpu", train=True, **overrides):
    loader = vision_loader(dataset, 5, train=train, device=device, seed=3, decode=decode, num_workers=0, **overrides)
    return list(DevicePrefetcher(loader, device))


@pytest.mark.parametrize("preset", list(PRESETS))
def test_cpu_batches_equal_the_worker_path_with_fallbacks_in_the_same_batch(fixtures, tmp_path, preset):
    dataset = ImageFolderDataset(_folder(fixtures, tmp_path), PRESETS[preset]())
    raw = list(vision_loader(dataset, 5, device="cpu", seed=3, decode="device", num_workers=0))
    # batches mixing device and worker decoding ran
    assert any(isinstance(images, EncodedBatch) and not images.on_device.all() for images, _ in raw)
    for epoch in range(2):
        worker, device = (_batches(dataset, decode, train=preset == "train") for decode in ("worker", "device"))
        assert len(worker) == len(device) > 0
        for (a, labels_a), (b, labels_b) in zip(worker, device):
            assert torch.equal(labels_a, labels_b) and a.shape == b.shape == (len(labels_a), 3, 24, 24)
            torch.testing.assert_close(b, a, rtol=0, atol=1e-6)


def test_a_spawned_two_worker_loader_gives_the_same_batches(fixtures):
    dataset = ImageFolderDataset(fixtures / "vision", train_transform(16))
    spawned = vision_loader(dataset, 4, device="cpu", seed=1, decode="device", num_workers=2,
                            multiprocessing_context="spawn", persistent_workers=False)
    local = vision_loader(dataset, 4, device="cpu", seed=1, num_workers=0)
    pairs = zip(DevicePrefetcher(spawned, "cpu"), DevicePrefetcher(local, "cpu"), strict=True)
    for (a, labels_a), (b, labels_b) in pairs:
        assert torch.equal(labels_a, labels_b) and torch.equal(a, b)


def test_bad_files_follow_the_error_policy_as_with_worker_decoding(fixtures, tmp_path):
    root = _folder(fixtures, tmp_path)
    shutil.copytree(fixtures / "hostile" / "images", root / "bad")
    with pytest.raises(DataError, match="bad"):
        _batches(ImageFolderDataset(root, eval_transform(16, 16)), "device", train=False)
    dataset = ImageFolderDataset(root, eval_transform(16, 16), on_error="skip")
    with pytest.warns(SkippedSampleWarning) as caught_device:
        device = _batches(dataset, "device", train=False)
    with pytest.warns(SkippedSampleWarning) as caught_worker:
        worker = _batches(dataset, "worker", train=False)
    assert sorted(str(w.message) for w in caught_device) == sorted(str(w.message) for w in caught_worker)
    for (a, labels_a), (b, labels_b) in zip(worker, device, strict=True):
        assert torch.equal(labels_a, labels_b) and torch.equal(a, b)


def test_unknown_decode_and_transforms_it_cannot_plan_are_refused(fixtures):
    with pytest.raises(ValueError, match="decode must be one of"):
        vision_loader(ImageFolderDataset(fixtures / "vision", train_transform(16)), 4, decode="gpu")
    with pytest.raises(ValueError, match="use decode='worker'"):
        vision_loader(ImageFolderDataset(fixtures / "vision"), 4, decode="device")


@pytest.mark.gpu
@pytest.mark.parametrize("preset", list(PRESETS))
def test_cuda_batches_are_within_a_grey_level_of_the_cpu(fixtures, tmp_path, preset):
    dataset = ImageFolderDataset(_folder(fixtures, tmp_path), PRESETS[preset](), draft_size=None)
    cpu = _batches(dataset, "device", train=False, pin_memory=True)
    cuda = _batches(dataset, "device", "cuda", train=False, pin_memory=True)
    for (a, labels_a), (b, labels_b) in zip(cpu, cuda, strict=True):
        assert b.is_cuda and torch.equal(labels_a, labels_b.cpu())
        assert (b.cpu() - a).abs().mean() * 0.226 * 255 < 1.0  # normalised: one grey level is ~1/(0.226*255)


@pytest.mark.slow
def test_the_gpu_feed_benchmark_runs_its_cpu_smoke_run_and_exits_cleanly_without_cuda():
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_feed.py"
    run = subprocess.run([sys.executable, str(script), "--device", "cpu", "--quick"], capture_output=True, text=True,
                         timeout=300, check=True)
    assert "(b) recipes decode='worker'" in run.stdout and "(c) recipes decode='device'" in run.stdout
    if not torch.cuda.is_available():
        bare = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=True)
        assert "needs a CUDA GPU" in bare.stdout


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="with CUDA it runs the real check, minutes long")
def test_the_prepared_gpu_check_runs_through_without_cuda(tmp_path):
    # the one-try script a session lent a GPU runs: it must not have rotted in between
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHON": sys.executable, "OUT": str(tmp_path), "WHEELS": str(tmp_path / "none")}
    run = subprocess.run(["bash", "benchmarks/gpu_check.sh"], cwd=root, env=env, capture_output=True, text=True,
                         timeout=300, check=False)  # the assert shows its output
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    tests = (tmp_path / "gpu_tests.txt").read_text()
    assert " skipped" in tests and "error" not in tests.lower() and " passed" not in tests
    assert "needs a CUDA GPU" in (tmp_path / "gpu_feed.txt").read_text()


def test_a_mixture_of_folders_with_their_own_transforms_gives_the_worker_path_batches(fixtures, tmp_path):
    root = _folder(fixtures, tmp_path)
    cropped = ImageFolderDataset(root, train_transform(24))
    resized = ImageFolderDataset(fixtures / "vision", eval_transform(24, resize_size=28))
    mixed = MixedDataset([cropped, resized], [3, 1], samples_per_epoch=30)
    for epoch in range(2):
        worker, device = (_batches(mixed, decode) for decode in ("worker", "device"))
        assert len(worker) == len(device) == 6
        for (a, labels_a), (b, labels_b) in zip(worker, device):
            assert torch.equal(labels_a, labels_b)
            torch.testing.assert_close(b, a, rtol=0, atol=1e-6)
