"""decode="device": workers ship each clip's file, frames and transform seed; the prefetcher decodes and
transforms them where the batch goes. On the CPU the batches equal decode="worker"'s bit for bit; on CUDA
(NVDEC) within the grey levels TorchCodec's two decoders differ by."""

import pickle
from pathlib import Path

import pytest
import torch

from recipes.core import DevicePrefetcher, MixedDataset
from recipes.video import ClipBatch, VideoFolderDataset, VideoOptions, train_transform, video_loader
from recipes.video.device import decode_path
from recipes.video.loader import decode_of
from tests.harness import assert_same_batches


@pytest.fixture(scope="module")
def folder(fixtures: Path) -> Path:
    return fixtures / "video" / "folder"


def _pair(folder: Path, **options) -> tuple[VideoFolderDataset, VideoFolderDataset]:
    common = {"frames_per_clip": 4, "frame_step": 3, "clips_per_video": 2, "transform": train_transform(24)}
    return (VideoFolderDataset(folder, **common, options=VideoOptions(**options)),
            VideoFolderDataset(folder, **common, options=VideoOptions(decode="device", **options)))


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("layout", ["BTCHW", "BCTHW"])
def test_device_batches_on_the_cpu_equal_the_workers_batches(folder, workers, layout):
    worker, device = _pair(folder)
    plain = video_loader(worker, 3, seed=5, device="cpu", num_workers=0, layout=layout)
    expected = list(DevicePrefetcher(plain, "cpu"))
    loader = video_loader(device, 3, seed=5, device="cpu", num_workers=workers, layout=layout)
    assert_same_batches(list(DevicePrefetcher(loader, "cpu")), expected)
    evaluated = video_loader(device, 4, train=False, seed=5, device="cpu", num_workers=workers, layout=layout)
    plain = video_loader(worker, 4, train=False, seed=5, device="cpu", num_workers=0, layout=layout)
    assert_same_batches(list(DevicePrefetcher(evaluated, "cpu")), list(DevicePrefetcher(plain, "cpu")))


def test_the_raw_batch_ships_files_and_frames_not_pixels(folder):
    _, device = _pair(folder)
    batch = next(iter(video_loader(device, 3, seed=0, device="cpu", num_workers=0)))
    clips = batch["video"]
    assert isinstance(clips, ClipBatch) and len(clips) == 3 and clips.layout == "BTCHW"
    assert all(clip.path.startswith(str(folder)) and len(clip.frames) == 4 for clip in clips.clips)
    assert torch.equal(torch.stack([torch.from_numpy(clip.frames) for clip in clips.clips]), batch["frames"])
    assert len(pickle.dumps(batch)) < 8_000  # what crosses from a worker: a few hundred bytes a clip


def test_a_mixture_decodes_where_its_sources_agree(folder):
    worker, device = _pair(folder)
    mixed = MixedDataset([device, device], weights=[1, 1])
    raw = next(iter(video_loader(mixed, 2, seed=0, device="cpu", num_workers=0)))
    assert isinstance(raw["video"], ClipBatch)
    with pytest.raises(ValueError, match=r"sources decode in different places \(\['device', 'worker'\]\)"):
        video_loader(MixedDataset([worker, device], weights=[1, 1]), 2)


def test_auto_decodes_in_the_workers_off_cuda_and_small_videos_on_cuda(folder):
    dataset, device = _pair(folder)
    auto = VideoFolderDataset(folder, options=VideoOptions(decode="auto"))
    assert decode_of(auto, "cpu") == "worker" and decode_of(auto, "debug") == "worker"
    assert decode_path("auto", torch.device("cuda"), auto.clips) == "worker"  # 64x48 < 1280x720
    assert decode_of(dataset, "cuda") == "worker" and decode_of(device, "cpu") == "device"


@pytest.mark.gpu
def test_nvdec_decodes_within_the_grey_levels_of_the_cpu_decode(folder):
    worker, device = _pair(folder)
    cpu = list(DevicePrefetcher(video_loader(worker, 3, seed=5, device="cuda", num_workers=0), "cuda", normalize=False))
    gpu = list(DevicePrefetcher(video_loader(device, 3, seed=5, device="cuda", num_workers=0), "cuda", normalize=False))
    for ours, theirs in zip(gpu, cpu):
        assert ours["video"].is_cuda and ours["video"].shape == theirs["video"].shape
        difference = (ours["video"].float() - theirs["video"].float()).abs()
        assert difference.mean() < 1.5 and torch.equal(ours["frames"].cpu(), theirs["frames"].cpu())
