"""Clips decode to TorchCodec's own decode of the same frames, in any container, rate or rotation; decoders
stay open within their bound; the size limit and a changed file are named."""

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from torchcodec.decoders import VideoDecoder
from torchcodec.transforms import Resize

from recipes.core.contracts.errors import DataError
from recipes.video import VideoFolderDataset, VideoOptions, decode_clip, probe
from recipes.video.decoding import DECODER_BYTES_PER_PIXEL, DECODER_OVERHEAD, DECODERS, DecoderCache
from recipes.video.fixtures import FOLDER_CLIPS
from recipes.video.loader import clips_drawn


@pytest.fixture(scope="module")
def folder(fixtures: Path) -> Path:
    return fixtures / "video" / "folder"


@pytest.fixture(scope="module")
def dataset(folder: Path) -> VideoFolderDataset:
    return VideoFolderDataset(folder, frames_per_clip=8, frame_step=2, clips_per_video=3)


@pytest.mark.parametrize("name", sorted(FOLDER_CLIPS))
def test_evenly_spaced_and_random_clips_equal_torchcodecs_own_decode_of_their_frames(folder, dataset, name):
    path = str(folder / name)
    video = [v for v in range(dataset.clips.videos) if dataset.path(v) == path][0]
    oracle = VideoDecoder(path)  # exact seeking: what TorchCodec itself decodes for those indices
    drawing = clips_drawn(dataset, random=True)
    for index in range(3 * video, 3 * video + 3):
        for source in (dataset, drawing):
            torch.manual_seed(index)
            item = source[index]
            expected = oracle.get_frames_at(item["frames"].tolist()).data
            assert torch.equal(item["video"], expected), (name, index)
            assert item["video"].dtype == torch.uint8 and item["frames"].dtype == torch.int64


def test_repeated_and_unordered_frames_decode_once_each_and_come_back_in_order(folder):
    path = str(folder / "left/l1_vp9.webm")
    info = probe(path, path)
    frames = np.array([30, 7, 7, 39, 0, 30], dtype=np.int64)
    ours = decode_clip(path, path, frames, info, VideoOptions())
    assert torch.equal(ours, VideoDecoder(path).get_frames_at(frames.tolist()).data)


def test_a_constant_rate_seeks_by_time_and_gives_the_frames_a_scan_gives(folder):
    for name, (_, count, _, _, special) in FOLDER_CLIPS.items():
        path = str(folder / name)
        info = probe(path, path)
        assert info.constant == (special != "vfr")
        every = np.arange(count - 1, -1, -3, dtype=np.int64)  # backwards: each one a seek
        assert torch.equal(decode_clip(path, path, every, info, VideoOptions()),
                           VideoDecoder(path).get_frames_at(every.tolist()).data), name


def test_the_decoders_resize_equals_torchcodecs_resize(folder):
    path = str(folder / "left/l0_h264.mp4")
    info = probe(path, path)
    frames = np.arange(3, 20, 4, dtype=np.int64)
    ours = decode_clip(path, path, frames, info, VideoOptions(decoder_size=(24, 40)))
    theirs = VideoDecoder(path, transforms=[Resize((24, 40))]).get_frames_at(frames.tolist()).data
    assert ours.shape == (5, 3, 24, 40) and torch.equal(ours, theirs)


def test_decoders_stay_open_for_the_video_met_again_within_the_bound(folder):
    options = VideoOptions(open_decoders=3)
    paths = sorted(str(path) for path in folder.rglob("*.mp4"))
    infos = [probe(path, path) for path in paths]
    DECODERS.clear()
    for path, info in zip(paths, infos):
        decode_clip(path, path, np.array([0]), info, options)
    assert len(DECODERS.decoders) == 3
    held = list(DECODERS.decoders.values())[-1][0]
    decode_clip(paths[-1], paths[-1], np.array([1]), infos[-1], options)
    assert list(DECODERS.decoders.values())[-1][0] is held  # reused, not opened again
    two = VideoOptions(decoder_memory=2 * (DECODER_OVERHEAD + DECODER_BYTES_PER_PIXEL * 48 * 64))
    for path, info in zip(paths, infos):
        decode_clip(path, path, np.array([0]), info, two)
    assert len(DECODERS.decoders) == 2 and DECODERS.held == two.decoder_memory


def test_a_process_keeps_only_the_decoders_it_opened():
    cache = DecoderCache()
    first = cache.get(("a",), 1, (4, 10), object)
    assert cache.get(("a",), 1, (4, 10), object) is first
    cache.pid = -1  # as a forked worker finds its parent's
    assert cache.get(("a",), 1, (4, 10), object) is not first


def test_a_clip_over_the_size_limit_is_refused_before_decoding(folder, recwarn):
    limit = VideoOptions(max_clip_bytes=8 * 48 * 64 * 3 - 1)
    with pytest.raises(DataError, match=r"l2_mpeg4.avi: a clip of 8 frames of 64x48 decodes to 73,728 bytes, over "
                                        r"max_clip_bytes=73,727; raise it"):
        VideoFolderDataset(folder / "left", frames_per_clip=8, options=limit)
    assert len(VideoFolderDataset(folder, frames_per_clip=8, options=limit, on_error="skip")) == 0
    assert len(recwarn) == len(FOLDER_CLIPS)
    assert len(VideoFolderDataset(folder, frames_per_clip=8, options=VideoOptions(max_clip_bytes=8 * 48 * 64 * 3)))


def test_a_file_changed_since_it_was_indexed_is_named(folder, tmp_path):
    shutil.copytree(folder / "left", tmp_path / "left")
    dataset = VideoFolderDataset(tmp_path, frames_per_clip=4)
    shutil.copy(folder / "still/s0_rotated.mp4", tmp_path / "left/l0_h264.mp4")  # now 48x64
    with pytest.raises(DataError, match=r"l0_h264.mp4: decoded 4 frames of 48x64, the index says 64x48: the file "
                                        "changed since it was indexed"):
        dataset[0]
    os.remove(tmp_path / "left/l0_h264.mp4")
    DECODERS.clear()
    with pytest.raises(DataError, match=r"l0_h264.mp4: cannot open the video"):
        dataset[0]


def test_bad_options_are_refused_with_what_is_allowed():
    with pytest.raises(ValueError, match=r"VideoOptions.max_clip_bytes must be an int >= 1, got 0"):
        VideoOptions(max_clip_bytes=0)
    with pytest.raises(ValueError, match=r"decoder_size must be \(height, width\)"):
        VideoOptions(decoder_size=(112,))
    with pytest.raises(ValueError, match=r"VideoOptions.decode must be one of \('worker', 'device', 'auto'\)"):
        VideoOptions(decode="gpu")
