"""video_collate and video_loader: batches of [B, T, 3, H, W] (or [B, 3, T, H, W]) uint8 in the clips'
memory order, random clips to train and evenly spaced ones to evaluate, workers and spawn alike, mixtures
and subsets, collate_fn as given, exact resume, and DevicePrefetcher's normalisation of either layout."""

from pathlib import Path

import pytest
import torch
from torch.utils.data import Subset

from recipes.core import DevicePrefetcher, MixedDataset
from recipes.core.loading.device import IMAGENET_MEAN, IMAGENET_STD
from recipes.video import VideoCollate, VideoFolderDataset, eval_transform, train_transform, video_collate, video_loader
from tests.harness import assert_same_batches, resume_suite


@pytest.fixture(scope="module")
def folder(fixtures: Path) -> Path:
    return fixtures / "video" / "folder"


@pytest.fixture(scope="module")
def dataset(folder) -> VideoFolderDataset:
    return VideoFolderDataset(folder, frames_per_clip=4, frame_step=2, clips_per_video=2, transform=train_transform(24))


def test_collate_stacks_clips_in_their_memory_order_with_labels_indices_and_frames(dataset):
    items = [dataset[0], None, dataset[5], dataset[11]]
    batch = video_collate(items)
    video = batch["video"]
    assert type(video).__name__ == "Video" and video.shape == (3, 4, 3, 24, 24) and video.dtype == torch.uint8
    assert video.stride() == (4 * 24 * 24 * 3, 24 * 24 * 3, 1, 24 * 3, 3)  # each frame channels-last, as decoded
    for row, item in zip(video, [items[0], items[2], items[3]]):
        assert torch.equal(row, item["video"])
    assert batch["label"].tolist() == [0, 0, 1] and batch["index"].tolist() == [0, 5, 11]
    assert batch["clip"].tolist() == [0, 1, 1] and batch["frames"].shape == (3, 4)
    channels_first = video_collate(items, layout="BCTHW")["video"]
    assert type(channels_first) is torch.Tensor and channels_first.shape == (3, 3, 4, 24, 24)
    assert torch.equal(channels_first, video.permute(0, 2, 1, 3, 4))
    assert channels_first.is_contiguous(memory_format=torch.channels_last_3d)


def test_collate_refuses_clips_of_two_sizes_or_floats_and_says_the_fix(folder):
    plain = VideoFolderDataset(folder, frames_per_clip=2)
    with pytest.raises(ValueError, match=r"clip 1 is \[2, 3, 64, 48\] but clip 0 is \[2, 3, 48, 64\].*train_transform"):
        video_collate([plain[0], plain[7]])  # the rotated video is portrait
    item = plain[0]
    with pytest.raises(ValueError, match="clips must stay uint8"):
        video_collate([{**item, "video": item["video"].float()}])
    assert video_collate([{**item, "source": "a"}])["source"] == ["a"]  # other keys ride along
    assert video_collate([])["video"].shape == (0, 0, 3, 0, 0)


def test_training_draws_new_clips_each_epoch_and_the_same_for_a_seed(dataset):
    loader = video_loader(dataset, 3, seed=4, device="cpu", num_workers=0)
    first, second = list(loader), list(loader)
    assert [b["frames"].tolist() for b in first] != [b["frames"].tolist() for b in second]
    assert_same_batches(list(video_loader(dataset, 3, seed=4, device="cpu", num_workers=0)), first)
    assert len(first) == len(dataset) // 3


def test_evaluation_keeps_the_order_and_the_evenly_spaced_clips(dataset, folder):
    plain = VideoFolderDataset(folder, frames_per_clip=4, frame_step=2, clips_per_video=2, transform=eval_transform(24))
    batches = list(video_loader(plain, 4, train=False, device="cpu", num_workers=0))
    assert torch.cat([b["index"] for b in batches]).tolist() == list(range(len(plain)))
    for batch in batches:
        for index, frames, video in zip(batch["index"].tolist(), batch["frames"], batch["video"]):
            assert torch.equal(frames, plain[index]["frames"]) and torch.equal(video, plain[index]["video"])


def test_workers_give_the_batches_of_the_main_process(dataset):
    alone = list(video_loader(dataset, 3, seed=2, device="cpu", num_workers=0))
    assert_same_batches(list(video_loader(dataset, 3, seed=2, device="cpu", num_workers=2)), alone)


@pytest.mark.slow
def test_spawned_workers_give_the_same_batches(dataset):
    alone = list(video_loader(dataset, 3, seed=2, device="cpu", num_workers=0))
    spawned = video_loader(dataset, 3, seed=2, device="cpu", num_workers=1, multiprocessing_context="spawn")
    assert_same_batches(list(spawned), alone)


def test_a_mixture_and_a_subset_draw_random_clips_to_train_and_even_ones_to_evaluate(folder, dataset):
    other = VideoFolderDataset(folder, frames_per_clip=4, frame_step=2, transform=train_transform(24))
    mixed = MixedDataset([dataset, other], weights=[1, 1], samples_per_epoch=12)
    batches = list(video_loader(mixed, 4, seed=0, device="cpu", num_workers=0))
    assert len(batches) == 3 and all(b["video"].shape == (4, 4, 3, 24, 24) for b in batches)
    evaluated = list(video_loader(mixed, 4, train=False, device="cpu", num_workers=0))
    assert torch.cat([b["index"] for b in evaluated]).tolist() == list(range(len(mixed)))
    assert torch.equal(evaluated[0]["frames"][1], dataset[1]["frames"])  # clip 1 of 2, evenly spaced
    subset = Subset(dataset, [1, 3, 5, 7])
    loader = video_loader(subset, 2, seed=1, device="cpu", num_workers=0)
    epochs = [sorted(pair for b in loader for pair in zip(b["index"].tolist(), b["frames"][:, 0].tolist()))
              for _ in range(3)]
    assert epochs[0] != epochs[1] != epochs[2]


def test_a_given_collate_fn_is_used_as_given(dataset):
    def names(batch):
        return [item["index"] for item in batch]

    batch = next(iter(video_loader(dataset, 2, train=False, device="cpu", num_workers=0, collate_fn=names)))
    assert batch == [0, 1]
    with pytest.raises(ValueError, match=r"layout must be one of \('BTCHW', 'BCTHW'\)"):
        video_loader(dataset, 2, layout="BHWC")
    assert VideoCollate("BCTHW")([dataset[0]])["video"].shape == (1, 3, 4, 24, 24)


@pytest.mark.parametrize("layout", ["BTCHW", "BCTHW"])
def test_the_prefetcher_normalises_clips_of_either_layout_on_the_device(dataset, layout):
    raw = next(iter(video_loader(dataset, 3, seed=0, device="cpu", num_workers=0, layout=layout)))
    out = next(iter(DevicePrefetcher([raw], "cpu")))
    channel = 2 if layout == "BTCHW" else 1
    shape = [1] * 5
    shape[channel] = 3
    mean, std = torch.tensor(IMAGENET_MEAN).view(shape), torch.tensor(IMAGENET_STD).view(shape)
    expected = (raw["video"].as_subclass(torch.Tensor).float() / 255 - mean) / std
    assert out["video"].dtype == torch.float32 and out["video"].stride() == raw["video"].stride()
    torch.testing.assert_close(out["video"].as_subclass(torch.Tensor), expected, rtol=1e-5, atol=1e-5)
    assert type(out["video"]) is type(raw["video"]) and torch.equal(out["frames"], raw["frames"])


@pytest.fixture(scope="module")
def make_loader(dataset):
    return lambda workers: video_loader(dataset, 4, seed=3, device="cpu", num_workers=workers, stateful=True)


resume_reference, test_resumed_loader_yields_exactly_the_batches_still_to_come = resume_suite(epoch_batches=4)
