"""AudioFolderDataset against its oracles: torchvision's folder walk and TorchCodec's own decode.

Classes, order and labels are DatasetFolder's with the audio extensions; each item equals
``AudioDecoder(path, sample_rate=...).get_all_samples()`` (mono: the mean of its channels);
durations from headers equal the decoded length (exactly for WAV and FLAC); hostile files are
named, raised or skipped.
"""

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from torchcodec.decoders import AudioDecoder
from torchvision.datasets import DatasetFolder

from recipes.audio import AUDIO_EXTENSIONS, AudioFolderDataset
from recipes.audio.decoding import DURATION_TOLERANCE
from recipes.core.contracts.errors import DataError, SkippedSampleWarning
from tests.harness import with_skip_warnings

HOSTILE = ("truncated.flac", "empty.wav", "not_audio.mp3", "bad_rate.wav", "bad_channels.wav", "unsupported.wav")


@pytest.fixture(scope="module")
def folder(fixtures: Path) -> Path:
    return fixtures / "audio" / "folder"


def _oracle(path: str, sample_rate: int, mono: bool = True) -> torch.Tensor:
    samples = AudioDecoder(path, sample_rate=sample_rate).get_all_samples().data
    return (samples.mean(0, keepdim=True) if mono else samples).clamp(-1, 1)


def test_classes_and_sample_order_are_the_dataset_folder_walk(folder):
    dataset = AudioFolderDataset(folder)
    reference = DatasetFolder(str(folder), loader=str, extensions=AUDIO_EXTENSIONS)
    assert dataset.classes == reference.classes == ["chirp", "noise", "tone"]
    assert dataset.class_to_idx == reference.class_to_idx
    assert dataset.samples == reference.samples
    assert dataset.targets == reference.targets
    assert len(dataset) == 11  # notes.txt left out, T3_8K.WAV and nested/ taken


@pytest.mark.parametrize("rate", [8000, 16000, 48000])
def test_items_equal_the_decoders_own_resampled_mono_decode(folder, rate):
    dataset = AudioFolderDataset(folder, sample_rate=rate)
    for index, (path, label) in enumerate(dataset.samples):
        audio, got_label = dataset[index]
        assert audio.dtype == torch.float32 and audio.ndim == 2 and audio.shape[0] == 1
        assert got_label == label
        assert torch.equal(audio, _oracle(path, rate)), path


def test_kept_channels_equal_the_decode_and_stereo_stays_stereo(folder):
    dataset = AudioFolderDataset(folder, sample_rate=44100, num_channels=None)
    channels = {}
    for index, (path, _) in enumerate(dataset.samples):
        audio, _ = dataset[index]
        assert torch.equal(audio, _oracle(path, 44100, mono=False)), path
        channels[Path(path).name] = audio.shape[0]
    assert channels["c2_44k_stereo.mp3"] == channels["n1_48k_stereo.opus"] == 2
    assert channels["c0_16k.wav"] == 1
    assert all(abs(float(x)) <= 1 for x in (dataset[0][0].min(), dataset[0][0].max()))


def test_header_durations_equal_the_decoded_lengths(folder):
    dataset = AudioFolderDataset(folder, sample_rate=48000)
    for index, (path, _) in enumerate(dataset.samples):
        decoded = AudioDecoder(path).get_all_samples()
        seconds = decoded.data.shape[-1] / decoded.sample_rate
        exact = Path(path).suffix.lower() in (".wav", ".flac")
        assert abs(dataset.durations[index] - seconds) <= (1e-9 if exact else DURATION_TOLERANCE), path
        assert abs(dataset[index][0].shape[-1] / 48000 - seconds) < 1e-3, path


def test_centre_crop_is_the_middle_window_and_short_clips_stay_whole(folder):
    dataset = AudioFolderDataset(folder, clip_seconds=0.45, random_crop=False)
    length = round(0.45 * 16000)
    for index, (path, _) in enumerate(dataset.samples):
        whole = _oracle(path, 16000)
        audio, _ = dataset[index]
        if whole.shape[-1] <= length:
            assert torch.equal(audio, whole)
        else:
            start = (whole.shape[-1] - length) // 2
            assert torch.equal(audio, whole[:, start : start + length]), path
    assert dataset.durations.max() == 0.45 and dataset.durations.min() == 0.1


def test_random_crop_is_a_window_of_the_clip_drawn_from_the_generator(folder):
    dataset = AudioFolderDataset(folder, clip_seconds=0.2)
    path = dataset.path(8)  # t0_16k.mp3, 1 s
    whole = _oracle(path, 16000)
    starts = set()
    for seed in range(6):
        torch.manual_seed(seed)
        audio, _ = dataset[8]
        assert audio.shape == (1, 3200)
        matches = [s for s in range(whole.shape[-1] - 3200 + 1) if torch.equal(whole[:, s : s + 3200], audio)]
        assert matches, "the crop is not a window of the decoded clip"
        starts.add(matches[0])
    assert len(starts) > 3


@pytest.fixture
def hostile_folder(fixtures: Path, tmp_path: Path) -> Path:
    (tmp_path / "good").mkdir()
    (tmp_path / "bad").mkdir()
    shutil.copy(fixtures / "audio/folder/chirp/c0_16k.wav", tmp_path / "good/c0.wav")
    for name in HOSTILE:
        shutil.copy(fixtures / "audio/hostile" / name, tmp_path / "bad" / name)
    return tmp_path


@pytest.mark.parametrize("name", HOSTILE)
def test_a_bad_file_is_a_data_error_naming_it(hostile_folder, name):
    (hostile_folder / "bad").rename(hostile_folder / "all_bad")
    (hostile_folder / "bad").mkdir()
    shutil.move(hostile_folder / "all_bad" / name, hostile_folder / "bad" / name)
    shutil.rmtree(hostile_folder / "all_bad")
    with pytest.raises(DataError, match=name.replace(".", r"\.")):
        AudioFolderDataset(hostile_folder)


def test_skip_mode_drops_every_bad_file_with_a_warning_naming_it(hostile_folder):
    dataset, messages = with_skip_warnings(lambda: AudioFolderDataset(hostile_folder, on_error="skip"))
    assert [Path(path).name for path, _ in dataset.samples] == ["c0.wav"]
    assert sorted(name for name in HOSTILE if any(name in message for message in messages)) == sorted(HOSTILE)
    assert len(messages) == len(HOSTILE)


def test_reasons_say_what_is_wrong(fixtures):
    hostile = fixtures / "audio/hostile"
    reasons = {}
    for name in ("bad_rate.wav", "bad_channels.wav", "empty.wav"):
        with pytest.raises(DataError) as error:
            from recipes.audio import probe

            probe(str(hostile / name), name)
        reasons[name] = str(error.value)
    assert "sample rate 2000000 is out of range" in reasons["bad_rate.wav"]
    assert "channel count 200 is out of range" in reasons["bad_channels.wav"]
    assert "cannot read audio" in reasons["empty.wav"] and "/__w/" not in reasons["empty.wav"]


def test_a_header_claiming_hours_costs_only_what_the_file_holds(fixtures, tmp_path):
    (tmp_path / "a").mkdir()
    shutil.copy(fixtures / "audio/hostile/hours.wav", tmp_path / "a/hours.wav")
    dataset = AudioFolderDataset(tmp_path, sample_rate=8000)
    audio, _ = dataset[0]
    assert audio.shape == (1, 800) and dataset.durations[0] == pytest.approx(0.1)


def test_the_duration_limit_refuses_long_files_by_name_and_skip_leaves_them_out(folder):
    with pytest.raises(DataError, match=r"t0_16k\.mp3: 1\.08 s is over max_seconds=0\.9; raise max_seconds"):
        AudioFolderDataset(folder, max_seconds=0.9)
    dataset, messages = with_skip_warnings(lambda: AudioFolderDataset(folder, max_seconds=0.9, on_error="skip"))
    assert len(dataset) == 10 and len(messages) == 1 and "t0_16k.mp3" in messages[0]


def test_a_file_that_changed_after_indexing_is_refused_or_skipped(folder, tmp_path):
    shutil.copytree(folder, tmp_path / "data")
    dataset = AudioFolderDataset(tmp_path / "data", on_error="skip")
    index = dataset.samples.index((str(tmp_path / "data/tone/T3_8K.WAV"), 2))
    shutil.copy(folder / "tone/t0_16k.mp3", tmp_path / "data/tone/T3_8K.WAV")  # 1 s where 0.25 s was
    with pytest.warns(SkippedSampleWarning, match=r"T3_8K\.WAV: decodes to 1\.000 s, its header said 0\.250 s"):
        assert dataset[index] is None
    strict = AudioFolderDataset(folder)
    strict.header_durations = np.full(len(strict), 5.0)
    with pytest.raises(DataError, match="its header said 5.000 s"):
        strict[0]


def test_the_decode_stops_at_the_limit_whatever_the_header_claimed(folder):
    dataset = AudioFolderDataset(folder)
    dataset.max_seconds = 0.5  # as if the header had understated a long file
    index = [Path(p).name for p, _ in dataset.samples].index("t0_16k.mp3")
    with pytest.raises(DataError, match=r"t0_16k\.mp3: 1\.08 s is over max_seconds=0\.5"):
        dataset[index]


def test_an_empty_root_or_class_folder_says_how_to_fix_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="no class folder"):
        AudioFolderDataset(tmp_path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="allow_empty=True"):
        AudioFolderDataset(tmp_path)
    with pytest.raises(ValueError, match="clip_seconds must be a finite number > 0"):
        AudioFolderDataset(tmp_path, clip_seconds=0, allow_empty=True)
