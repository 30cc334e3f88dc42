"""VideoFolderDataset against its oracles: torchvision's folder walk for classes and order, one set of
transform parameters per clip, the bad-input rules file by file, and an index kept by file size and time."""

import os
import shutil
from pathlib import Path

import pytest
import torch
from torchvision.datasets import DatasetFolder
from torchvision.transforms import v2
from torchvision.transforms.v2 import functional as F

from recipes.core.contracts.errors import DataError, SampleError
from recipes.video import VIDEO_EXTENSIONS, VideoFolderDataset, VideoOptions
from recipes.video.fixtures import FOLDER_CLIPS
from tests.harness import with_skip_warnings

HOSTILE = ("empty.mp4", "not_a_video.mp4", "sound_only.mp4", "truncated.mp4", "truncated.avi", "huge_frames.avi",
           "many_frames.avi", "unknown_codec.avi")


@pytest.fixture(scope="module")
def folder(fixtures: Path) -> Path:
    return fixtures / "video" / "folder"


def test_classes_and_video_order_are_the_dataset_folder_walk(folder):
    dataset = VideoFolderDataset(folder, clips_per_video=2)
    reference = DatasetFolder(str(folder), loader=str, extensions=VIDEO_EXTENSIONS)
    assert dataset.classes == reference.classes == ["left", "right", "still"]
    assert dataset.class_to_idx == reference.class_to_idx
    assert dataset.samples == reference.samples and len(reference.samples) == len(FOLDER_CLIPS)
    assert len(dataset) == 2 * len(FOLDER_CLIPS) and dataset.targets == [t for t in reference.targets for _ in (0, 1)]
    assert not any(path.endswith("notes.txt") for path, _ in dataset.samples)


def test_an_item_is_a_uint8_video_with_its_label_index_clip_and_frames(folder):
    dataset = VideoFolderDataset(folder, frames_per_clip=4, clips_per_video=2)
    item = dataset[13]
    assert sorted(item) == ["clip", "frames", "index", "label", "video"]
    assert type(item["video"]).__name__ == "Video" and item["video"].dtype == torch.uint8
    assert item["video"].shape == (4, 3, 48, 64) and (item["index"], item["clip"], item["label"]) == (13, 1, 2)
    assert dataset.describe(13) == f"{dataset.path(6)}, clip 1 of 2"
    with pytest.raises(IndexError):
        dataset[len(dataset)]


def _crop(video: torch.Tensor, top: int, left: int, flip: bool) -> torch.Tensor:
    square = video[..., top : top + 24, left : left + 24]
    return F.horizontal_flip(square) if flip else square


def test_the_transform_draws_one_crop_and_one_flip_for_all_frames_of_a_clip(folder):
    plain = VideoFolderDataset(folder, frames_per_clip=6)
    cropped = VideoFolderDataset(folder, frames_per_clip=6, transform=v2.Compose([v2.RandomCrop(24),
                                                                                  v2.RandomHorizontalFlip()]))
    flips = set()
    for index in range(len(plain)):
        torch.manual_seed(index)
        whole, out = plain[index]["video"], cropped[index]["video"]
        fits = [(top, left, flip) for top in range(whole.shape[-2] - 23) for left in range(whole.shape[-1] - 23)
                for flip in (False, True) if torch.equal(out, _crop(whole, top, left, flip))]
        assert fits, f"no single crop and flip gives clip {index}"
        flips.add(fits[0][2])
    assert flips == {False, True}


def test_a_failing_transform_names_the_file_and_is_not_skipped(folder):
    def broken(video):
        raise RuntimeError("boom")

    dataset = VideoFolderDataset(folder, frames_per_clip=2, transform=broken, on_error="skip")
    with pytest.raises(SampleError, match=r"dataset index 0 \(.*l0_h264.mp4\): the transform raised RuntimeError"):
        dataset[0]


@pytest.fixture
def mixed(folder, fixtures, tmp_path) -> Path:
    """A class folder of one good video and every hostile file."""
    shutil.copy(folder / "left/l0_h264.mp4", tmp_path / "good.mp4")
    for name in HOSTILE:
        shutil.copy(fixtures / "video" / "hostile" / name, tmp_path / name)
    root = tmp_path / "root"
    (root / "only").mkdir(parents=True)
    for path in tmp_path.glob("*.*"):
        shutil.move(path, root / "only" / path.name)
    return root


def test_bad_files_are_named_at_construction_then_skipped_with_a_warning_each(mixed):
    with pytest.raises(DataError, match=r"only/empty.mp4: empty file \(0 bytes\)"):
        VideoFolderDataset(mixed)
    dataset, warned = with_skip_warnings(lambda: VideoFolderDataset(mixed, on_error="skip"))
    assert [Path(path).name for path, _ in dataset.samples] == ["good.mp4"] and dataset[0] is not None
    assert sorted(message.split(": ")[1].rsplit("/", 1)[-1] for message in warned) == sorted(HOSTILE)


def test_short_videos_repeat_wrap_are_skipped_or_refused(folder):
    short = str(folder / "still/s1_short.mp4")
    repeat = VideoFolderDataset(folder, frames_per_clip=16)
    video = [path for path, _ in repeat.samples].index(short)
    assert repeat[video]["frames"].tolist() == list(range(10)) + [9] * 6
    assert VideoFolderDataset(folder, frames_per_clip=16, short="wrap")[video]["frames"].tolist()[10:] == list(range(6))
    skipped, warned = with_skip_warnings(lambda: VideoFolderDataset(folder, frames_per_clip=16, short="skip"))
    assert short not in [path for path, _ in skipped.samples] and warned == [
        f"skipped: {short}: 10 frames, shorter than a clip of 16 (short='skip')"]
    with pytest.raises(DataError, match=r"s1_short.mp4: 10 frames, shorter than a clip of 16 \(short='raise'\)"):
        VideoFolderDataset(folder, frames_per_clip=16, short="raise")


def test_the_index_is_kept_by_file_size_and_time_and_built_again_when_one_changes(folder, tmp_path):
    root = tmp_path / "root"
    shutil.copytree(folder, root)
    options = VideoOptions(index_dir=tmp_path / "index")
    first = VideoFolderDataset(root, options=options)
    assert len(list((tmp_path / "index").glob("video-index-*.npz"))) == 1
    target = root / "left/l0_h264.mp4"
    stat = os.stat(target)
    target.write_bytes(b"\0" * stat.st_size)  # same size and time: the kept index is trusted, no file opened
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    again = VideoFolderDataset(root, options=options)
    assert again.clips.index.frames.tolist() == first.clips.index.frames.tolist()
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))  # a new time: built again, the file read
    with pytest.raises(DataError, match=r"l0_h264.mp4: not a video"):
        VideoFolderDataset(root, options=options)


def test_a_bad_file_kept_in_the_index_is_named_again_from_it(mixed, tmp_path):
    options = VideoOptions(index_dir=tmp_path / "index")
    for _ in range(2):
        with pytest.raises(DataError, match=r"only/empty.mp4: empty file"):
            VideoFolderDataset(mixed, options=options)


def test_a_subclass_reads_clips_its_own_way(folder):
    class Blank(VideoFolderDataset):
        def load_clip(self, video, frames):
            return torch.zeros(len(frames), 3, 8, 8, dtype=torch.uint8)

    item = Blank(folder, frames_per_clip=3)[0]
    assert item["video"].shape == (3, 3, 8, 8) and not item["video"].any()


def test_the_loader_state_names_counts_and_digests_not_the_root(folder):
    words = VideoFolderDataset(folder).state_source()
    assert str(folder) not in words and "9 clips of 9 videos" in words and "3 classes" in words


def test_an_empty_class_folder_or_a_missing_root_is_refused_with_the_fix(tmp_path):
    with pytest.raises(FileNotFoundError, match="is not a folder"):
        VideoFolderDataset(tmp_path / "none")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=r"no video file in the class folders empty .*allow_empty=True"):
        VideoFolderDataset(tmp_path)
    assert len(VideoFolderDataset(tmp_path, allow_empty=True)) == 0
