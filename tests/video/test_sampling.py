"""Clip rules: evenly spaced clips as TorchCodec's clips_at_regular_indices places them, random starts
as its clips_at_random_indices draws them, and a short video filled by TorchCodec's policies."""

import numpy as np
import pytest
import torch
from torchcodec.decoders import VideoDecoder
from torchcodec.samplers import clips_at_random_indices, clips_at_regular_indices

from recipes.video import ClipSampling

LONG, SHORT = "left/l0_h264.mp4", "still/s1_short.mp4"  # 40 and 10 frames


def _frames(batch) -> list[list[int]]:
    """The frame numbers of a TorchCodec clip batch, from its frames' times (25 fps fixtures)."""
    return (batch.pts_seconds * 25).round().long().tolist()


@pytest.mark.parametrize("clips, length, step", [(1, 16, 1), (5, 8, 2), (3, 16, 1), (7, 4, 3)])
@pytest.mark.parametrize("name", [LONG, SHORT])
@pytest.mark.parametrize("policy", ["repeat_last", "wrap"])
def test_evenly_spaced_clips_are_the_ones_torchcodec_places(fixtures, name, clips, length, step, policy):
    decoder = VideoDecoder(str(fixtures / "video" / "folder" / name))
    sampling = ClipSampling(length, step, clips, policy)
    ours = [sampling.positions(len(decoder), clip, random=False).tolist() for clip in range(clips)]
    theirs = clips_at_regular_indices(decoder, num_clips=clips, num_frames_per_clip=length,
                                      num_indices_between_frames=step, policy=policy)
    assert ours == _frames(theirs)


@pytest.mark.parametrize("name", [LONG, SHORT])
def test_random_starts_are_drawn_as_torchcodec_draws_them_from_the_same_seed(fixtures, name):
    decoder = VideoDecoder(str(fixtures / "video" / "folder" / name))
    sampling = ClipSampling(8, 2)
    for seed in range(20):
        torch.manual_seed(seed)
        ours = sampling.positions(len(decoder), 0, random=True).tolist()
        torch.manual_seed(seed)
        assert [ours] == _frames(clips_at_random_indices(decoder, num_clips=1, num_frames_per_clip=8,
                                                         num_indices_between_frames=2))


def test_random_starts_cover_every_start_and_stay_inside():
    sampling = ClipSampling(16, 1)
    torch.manual_seed(0)
    starts = [int(sampling.positions(40, 0, random=True)[0]) for _ in range(2000)]
    assert set(starts) == set(range(25))


def test_a_short_video_repeats_its_last_frame_or_wraps():
    assert ClipSampling(6, 2, short="repeat_last").positions(5, 0, random=False).tolist() == [0, 2, 4, 4, 4, 4]
    assert ClipSampling(6, 2, short="wrap").positions(5, 0, random=False).tolist() == [0, 2, 4, 0, 2, 4]
    assert ClipSampling(4).positions(1, 0, random=True).tolist() == [0, 0, 0, 0]


def test_bad_numbers_and_policies_are_refused_with_the_choices():
    with pytest.raises(ValueError, match="frames_per_clip must be an int >= 1, got 0"):
        ClipSampling(0)
    with pytest.raises(ValueError, match="frame_step must be an int >= 1, got True"):
        ClipSampling(4, True)
    with pytest.raises(ValueError, match=r"short must be one of \('repeat_last', 'wrap', 'skip', 'raise'\)"):
        ClipSampling(4, short="loop")
    assert ClipSampling(16, 2).span == 31 and np.array_equal(ClipSampling(3).positions(3, 0, False), [0, 1, 2])
