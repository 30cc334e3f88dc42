"""What a copy of the audio recipe must keep doing, checked against torchvision's folder walk and TorchCodec's decode.

    python -m pytest audio/tests          # in the folder you copied the recipe into

Each test builds the fixture folder from the recipe's own ``fixtures.py`` (tones, chirps and noise
in WAV, FLAC, MP3, Ogg Vorbis and Opus; speech-like clips with transcripts, manifests and tar
shards), so they run wherever the recipe does, with or without ``dataloader-recipes`` installed.
"""

import json
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from torchcodec.decoders import AudioDecoder
from torchvision.datasets import DatasetFolder

from recipes.core import DataError, SkippedSampleWarning
from recipes.audio import AUDIO_EXTENSIONS, AudioFolderDataset, AudioShards, SpeechDataset, audio_collate, audio_loader
from recipes.audio.fixtures import write_audio


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("fixtures") / "audio"
    write_audio(folder)
    return folder


@pytest.fixture(scope="module")
def rows(root: Path) -> list[dict]:
    return [json.loads(line) for line in (root / "speech" / "manifest.jsonl").read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def tok(rows: list[dict]) -> Tokenizer:
    """A word-level tokenizer over the transcripts' words, made here."""
    words = sorted({word for row in rows for word in row["text"].split()})
    tokenizer = Tokenizer(models.WordLevel({w: i for i, w in enumerate(["<pad>", "<unk>", *words])}, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return tokenizer


def decoded(source: str | bytes, sample_rate: int, mono: bool = True) -> torch.Tensor:
    """TorchCodec's own decode at ``sample_rate``; mono is the mean of the channels."""
    samples = AudioDecoder(source, sample_rate=sample_rate).get_all_samples().data
    return (samples.mean(0, keepdim=True) if mono else samples).clamp(-1, 1)


def test_the_index_is_the_walk_of_dataset_folder(root):
    ours = AudioFolderDataset(root / "folder")
    theirs = DatasetFolder(str(root / "folder"), loader=str, extensions=AUDIO_EXTENSIONS)
    assert (ours.classes, ours.class_to_idx) == (theirs.classes, theirs.class_to_idx)
    assert ours.samples == theirs.samples and ours.targets == theirs.targets and len(ours) == 11


@pytest.mark.parametrize("mono", [True, False], ids=["mono", "kept-channels"])
def test_every_clip_is_torchcodecs_decode_at_the_target_rate(root, mono):
    dataset = AudioFolderDataset(root / "folder", sample_rate=16000, num_channels=1 if mono else None)
    for index, (path, label) in enumerate(dataset.samples):
        audio, target = dataset[index]
        assert audio.dtype == torch.float32 and target == label
        assert torch.equal(audio, decoded(path, 16000, mono)), path
    assert {dataset[i][0].shape[0] for i in range(len(dataset))} == ({1} if mono else {1, 2})


def test_collate_pads_with_zeros_and_reports_lengths_and_mask(root):
    dataset = AudioFolderDataset(root / "folder", sample_rate=8000)
    clips = [dataset[i] for i in (0, 4, 7)]
    batch = audio_collate([clips[0], None, clips[1], clips[2]], float_audio=True)  # None: a sample skipped
    longest = max(audio.shape[-1] for audio, _ in clips)
    assert batch["audio"].shape == batch["attention_mask"].shape == (3, longest)
    assert batch["audio"].dtype == torch.float32 and batch["labels"].tolist() == [label for _, label in clips]
    for row, (audio, _) in enumerate(clips):
        n = audio.shape[-1]
        assert batch["audio_lengths"][row] == batch["attention_mask"][row].sum() == n
        assert torch.equal(batch["audio"][row, :n], audio[0]) and not batch["audio"][row, n:].any()
    stereo = AudioFolderDataset(root / "folder", num_channels=None)
    with pytest.raises(ValueError, match="num_channels"):
        audio_collate([stereo[0], stereo[2]])  # a mono clip and a stereo one


def test_a_seed_gives_the_same_cropped_batches_with_or_without_workers_grouped_by_duration(root):
    dataset = AudioFolderDataset(root / "folder", sample_rate=8000, clip_seconds=0.35)

    def batches(workers: int, seed: int = 0) -> list:
        loader = audio_loader(dataset, 3, device="cpu", seed=seed, num_workers=workers)
        return [(b["audio"].as_subclass(torch.Tensor).float(), b["labels"]) for b in loader]

    first = batches(0)
    assert len(first) == 3  # 11 clips, the last 2 dropped
    for other in (batches(0), batches(2)):
        assert all(torch.equal(a, c) and torch.equal(b, d) for (a, b), (c, d) in zip(first, other, strict=True))
    assert not all(torch.equal(a, c) for (a, _), (c, _) in zip(first, batches(0, seed=1)))
    for audio, _ in first:  # a training crop is a window of the clip, at most clip_seconds long
        assert audio.shape[-1] <= round(0.35 * 8000)


def test_a_stateful_loader_resumes_mid_epoch_with_exactly_the_batches_still_to_come(root):
    def loader():
        dataset = AudioFolderDataset(root / "folder", sample_rate=8000, clip_seconds=0.2)
        return audio_loader(dataset, 2, device="cpu", seed=3, stateful=True, num_workers=0)

    def audio(batches: list) -> list:
        return [batch["audio"].as_subclass(torch.Tensor).float() for batch in batches]

    uninterrupted = loader()
    expected = audio(list(uninterrupted) + list(uninterrupted))
    interrupted = loader()
    batches = iter(interrupted)
    seen = [next(batches) for _ in range(2)]
    resumed = loader()
    resumed.load_state_dict(interrupted.state_dict())
    got = audio(seen + list(resumed) + list(resumed))  # the epoch's rest, then the next epoch
    assert len(got) == len(expected) == 10 and all(torch.equal(a, b) for a, b in zip(got, expected))


@pytest.mark.parametrize("name", ["manifest.jsonl", "plain.jsonl", "manifest.csv"])
def test_speech_manifests_give_the_decoded_clips_and_the_tokenizers_ids(root, rows, tok, name):
    dataset = SpeechDataset(root / "speech" / name, tok)
    assert len(dataset) == len(rows) == 8
    for index, row in enumerate(rows):
        item = dataset[index]
        assert torch.equal(item["audio"], decoded(str(root / "speech" / row["audio_filepath"]), 16000))
        assert item["text"] == row["text"] and item["input_ids"].tolist() == tok.encode(row["text"]).ids
        assert abs(dataset.durations[index] - row["duration"]) < 0.1


def test_shards_stream_every_clip_once_as_the_manifest_gives_it(root, rows, tok):
    shards = sorted((root / "speech" / "shards").glob("*.tar"))
    items = list(AudioShards(shards, tok))
    assert len(items) == len(rows) == 8 and len({item["key"] for item in items}) == 8
    for item, row in zip(items, rows):
        assert torch.equal(item["audio"], decoded((root / "speech" / row["audio_filepath"]).read_bytes(), 16000))
        assert item["text"] == row["text"] and item["input_ids"].tolist() == tok.encode(row["text"]).ids
    keys = [key for batch in audio_loader(AudioShards(shards, tok), 3, train=False, device="cpu", num_workers=2)
            for key in batch["key"]]
    assert sorted(keys) == sorted(item["key"] for item in items)


def test_a_bad_file_is_named_or_left_out_with_a_warning(root, tmp_path):
    (tmp_path / "tone").mkdir()
    good = root / "folder" / "chirp" / "c1_8k.flac"
    (tmp_path / "tone" / "good.flac").write_bytes(good.read_bytes())
    (tmp_path / "tone" / "broken.flac").write_bytes(good.read_bytes()[:60])
    with pytest.raises(DataError, match=r"broken\.flac"):
        AudioFolderDataset(tmp_path)
    with pytest.warns(SkippedSampleWarning, match=r"broken\.flac"):
        dataset = AudioFolderDataset(tmp_path, sample_rate=8000, on_error="skip")
    assert [Path(path).name for path, _ in dataset.samples] == ["good.flac"]
    assert torch.equal(dataset[0][0], decoded(str(good), 8000))
