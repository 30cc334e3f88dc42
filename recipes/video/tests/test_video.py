"""What a copy of the video recipe must keep doing, checked against torchvision's folder walk and TorchCodec.

    python -m pytest video/tests          # in the folder you copied the recipe into

Each test builds the fixture folder from the recipe's own ``fixtures.py`` (moving patterns in H.264
MP4, VP9 and AV1 WebM, MPEG-4 and MJPEG AVI; a rotated, a variable-rate and a short video; manifests
and Kinetics-style cuts), so they run wherever the recipe does, with or without
``dataloader-recipes`` installed.
"""

from pathlib import Path

import pytest
import torch
from torchcodec.decoders import VideoDecoder
from torchcodec.samplers import clips_at_regular_indices
from torchvision.datasets import DatasetFolder

from recipes.core import DataError, SkippedSampleWarning
from recipes.video import (
    VIDEO_EXTENSIONS,
    VideoDataset,
    VideoFolderDataset,
    train_transform,
    video_collate,
    video_loader,
)
from recipes.video.fixtures import write_video


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("fixtures") / "video"
    write_video(folder)
    return folder


def test_the_index_is_the_walk_of_dataset_folder(root):
    ours = VideoFolderDataset(root / "folder", clips_per_video=2)
    theirs = DatasetFolder(str(root / "folder"), loader=str, extensions=VIDEO_EXTENSIONS)
    assert (ours.classes, ours.class_to_idx) == (theirs.classes, theirs.class_to_idx) == (
        ["left", "right", "still"], {"left": 0, "right": 1, "still": 2})
    assert ours.samples == theirs.samples and len(ours) == 2 * len(theirs) == 18
    assert ours.targets == [target for target in theirs.targets for _ in (0, 1)]


def test_evenly_spaced_clips_are_torchcodecs_placed_and_decoded(root):
    dataset = VideoFolderDataset(root / "folder", frames_per_clip=4, frame_step=2, clips_per_video=3)
    for video, (path, label) in enumerate(dataset.samples):
        decoder = VideoDecoder(path)
        placed = clips_at_regular_indices(decoder, num_clips=3, num_frames_per_clip=4, num_indices_between_frames=2)
        for clip in range(3):
            item = dataset[3 * video + clip]
            expected = decoder.get_frames_at(item["frames"].tolist())
            assert item["video"].dtype == torch.uint8 and item["video"].shape[:2] == (4, 3)
            assert torch.equal(item["video"], expected.data), (path, clip)
            assert torch.equal(expected.pts_seconds, placed.pts_seconds[clip]), (path, clip)  # the same frames
            assert (item["label"], item["clip"], item["index"]) == (label, clip, 3 * video + clip)


def test_collate_stacks_uint8_clips_and_refuses_two_sizes(root):
    dataset = VideoFolderDataset(root / "folder", frames_per_clip=4, clips_per_video=2, transform=train_transform(24))
    items = [dataset[0], None, dataset[5], dataset[11]]  # None: a sample skipped
    batch = video_collate(items)
    assert batch["video"].shape == (3, 4, 3, 24, 24) and batch["video"].dtype == torch.uint8
    for row, item in zip(batch["video"], (items[0], items[2], items[3])):
        assert torch.equal(row, item["video"])
    assert batch["label"].tolist() == [0, 0, 1] and batch["index"].tolist() == [0, 5, 11]
    assert batch["clip"].tolist() == [0, 1, 1] and batch["frames"].shape == (3, 4)
    plain = VideoFolderDataset(root / "folder", frames_per_clip=2)
    rotated = [path for path, _ in plain.samples].index(str(root / "folder" / "still" / "s0_rotated.mp4"))
    with pytest.raises(ValueError, match="train_transform"):
        video_collate([plain[0], plain[rotated]])  # landscape and, turned upright, portrait


def test_a_seed_gives_the_same_clips_with_or_without_workers_and_new_ones_each_epoch(root):
    dataset = VideoFolderDataset(root / "folder", frames_per_clip=4, frame_step=2, transform=train_transform(24))

    def batches(workers: int, seed: int = 0) -> list:
        loader = video_loader(dataset, 3, device="cpu", seed=seed, num_workers=workers)
        return [(batch["video"], batch["frames"]) for batch in loader]

    first = batches(0)
    assert len(first) == 3
    for other in (batches(0), batches(2)):
        assert all(torch.equal(a, c) and torch.equal(b, d) for (a, b), (c, d) in zip(first, other, strict=True))
    assert not all(torch.equal(b, d) for (_, b), (_, d) in zip(first, batches(0, seed=1)))
    loader = video_loader(dataset, 3, device="cpu", seed=0, num_workers=0)
    assert [b["frames"].tolist() for b in loader] != [b["frames"].tolist() for b in loader]  # a fresh draw each epoch


def test_a_stateful_loader_resumes_mid_epoch_with_exactly_the_batches_still_to_come(root):
    def loader():
        dataset = VideoFolderDataset(root / "folder", frames_per_clip=2, transform=train_transform(16))
        return video_loader(dataset, 2, device="cpu", seed=3, stateful=True, num_workers=0)

    uninterrupted = loader()
    expected = list(uninterrupted) + list(uninterrupted)
    interrupted = loader()
    batches = iter(interrupted)
    seen = [next(batches) for _ in range(2)]
    resumed = loader()
    resumed.load_state_dict(interrupted.state_dict())
    got = seen + list(resumed) + list(resumed)  # the epoch's rest, then the next epoch
    assert len(got) == len(expected) == 8
    assert all(torch.equal(a["video"], b["video"]) and torch.equal(a["frames"], b["frames"])
               for a, b in zip(got, expected))


def test_a_manifest_gives_the_folders_clips_and_kinetics_cuts_give_the_whole_videos_frames(root):
    folder = VideoFolderDataset(root / "folder", frames_per_clip=4)
    listed = VideoDataset(root / "manifest.csv", video_root=root, frames_per_clip=4)
    paths = [path for path, _ in folder.samples]
    assert len(listed) > 0
    for index in range(len(listed)):
        same = folder[paths.index(listed.path(index))]
        assert torch.equal(listed[index]["video"], same["video"]) and listed[index]["label"] == same["label"]
    trimmed = VideoDataset.kinetics(root / "kinetics" / "train.csv", root / "kinetics" / "trimmed", frames_per_clip=8)
    whole = VideoDataset.kinetics(root / "kinetics" / "train.csv", root / "kinetics" / "full", trimmed=False,
                                  frames_per_clip=8)
    assert trimmed.classes == whole.classes == ["left", "right", "still"] and len(trimmed) == len(whole) == 4
    for index, start in enumerate((0, 2, 1, 1)):  # the segments' starts in seconds, at 25 fps
        assert torch.equal(whole[index]["frames"], trimmed[index]["frames"] + 25 * start)


def test_a_bad_file_is_named_at_construction_or_left_out_with_a_warning(root, tmp_path):
    (tmp_path / "left").mkdir()
    good = root / "folder" / "left" / "l0_h264.mp4"
    (tmp_path / "left" / "good.mp4").write_bytes(good.read_bytes())
    (tmp_path / "left" / "broken.mp4").write_bytes(good.read_bytes()[:300])
    with pytest.raises(DataError, match=r"broken\.mp4"):
        VideoFolderDataset(tmp_path, frames_per_clip=4)
    with pytest.warns(SkippedSampleWarning, match=r"broken\.mp4"):
        dataset = VideoFolderDataset(tmp_path, frames_per_clip=4, on_error="skip")
    assert [Path(path).name for path, _ in dataset.samples] == ["good.mp4"]
    assert torch.equal(dataset[0]["video"], VideoDecoder(str(good)).get_frames_at(dataset[0]["frames"].tolist()).data)
