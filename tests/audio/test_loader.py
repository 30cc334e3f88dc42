"""audio_collate pads with lengths; audio_loader batches by duration, by a seconds budget, resumes
exactly, runs under spawn, and takes a MixedDataset of audio folders."""

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from recipes.audio import AudioFolderDataset, audio_collate, audio_loader
from recipes.core import MixedDataset
from recipes.core.loading.loader import SET_VITAL_WARNING
from tests.harness import assert_same_batches, resume_suite


@pytest.fixture(scope="module")
def folder(fixtures: Path) -> Path:
    return fixtures / "audio" / "folder"


@pytest.fixture(scope="module")
def dataset(folder):
    return AudioFolderDataset(folder)


@pytest.fixture(scope="module")
def many(folder, tmp_path_factory):
    """33 clips: the fixture folder three times over, so epochs hold several batches."""
    root = tmp_path_factory.mktemp("many")
    for copy in range(3):
        shutil.copytree(folder, root / "x", dirs_exist_ok=True, copy_function=shutil.copy)
        for path in sorted((root / "x").rglob("*")):
            if path.is_file():
                path.rename(path.with_name(f"{copy}_{path.name}"))
        shutil.copytree(root / "x", root / "all", dirs_exist_ok=True)
        shutil.rmtree(root / "x")
    return AudioFolderDataset(root / "all", clip_seconds=0.6)


def test_collate_pads_with_zeros_and_reports_lengths_and_mask(dataset):
    items = [dataset[i] for i in (0, 3, 8)]
    batch = audio_collate(items)
    lengths = [item[0].shape[-1] for item in items]
    assert batch["audio"].shape == (3, max(lengths)) and batch["audio"].dtype == torch.float32
    assert batch["audio_lengths"].tolist() == lengths and batch["audio_lengths"].dtype == torch.int64
    assert batch["labels"].tolist() == [item[1] for item in items]
    for row, (audio, _), length in zip(range(3), items, lengths):
        assert torch.equal(batch["audio"][row, :length], audio[0])
        assert not batch["audio"][row, length:].any()
        assert batch["attention_mask"][row].tolist() == [True] * length + [False] * (max(lengths) - length)
    assert batch["attention_mask"].dtype == torch.bool  # a byte a sample: docs/audio.md, "Batches"


@pytest.mark.parametrize("multiple", [None, 256])
def test_collate_pads_and_masks_as_the_wav2vec2_feature_extractor_does(dataset, multiple):
    pytest.importorskip("transformers")
    from transformers import Wav2Vec2FeatureExtractor

    items = [dataset[i] for i in (0, 3, 8)]
    extractor = Wav2Vec2FeatureExtractor(feature_size=1, sampling_rate=16000, padding_value=0.0,
                                         do_normalize=False, return_attention_mask=True)
    expected = extractor([audio[0].numpy() for audio, _ in items], sampling_rate=16000, padding=True,
                         pad_to_multiple_of=multiple, return_tensors="pt")
    batch = audio_collate(items, pad_to_multiple_of=multiple)
    assert torch.equal(batch["audio"], expected["input_values"])
    assert torch.equal(batch["attention_mask"], expected["attention_mask"].bool())  # the extractor's is int32


def test_a_wav2vec2_model_reads_the_bool_mask_as_the_extractors_int32_one(dataset):
    pytest.importorskip("transformers")
    from transformers import Wav2Vec2Config, Wav2Vec2FeatureExtractor, Wav2Vec2ForCTC

    items = [dataset[i] for i in (0, 3, 8)]
    extractor = Wav2Vec2FeatureExtractor(feature_size=1, sampling_rate=16000, padding_value=0.0,
                                         do_normalize=False, return_attention_mask=True)
    expected = extractor([audio[0].numpy() for audio, _ in items], sampling_rate=16000, padding=True,
                         return_tensors="pt")
    batch = audio_collate(items)
    torch.manual_seed(0)
    config = Wav2Vec2Config(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                            conv_dim=(8,) * 7, vocab_size=8, feat_extract_norm="layer", do_stable_layer_norm=True,
                            num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2)
    model = Wav2Vec2ForCTC(config).eval()
    with torch.no_grad():
        ours = model(batch["audio"], attention_mask=batch["attention_mask"]).logits
        theirs = model(expected["input_values"], attention_mask=expected["attention_mask"]).logits
    assert torch.equal(ours, theirs)


def test_collate_pads_to_a_multiple_drops_skipped_and_keeps_stereo(folder):
    stereo = AudioFolderDataset(folder, num_channels=2)
    batch = audio_collate([stereo[0], None, stereo[2]], pad_to_multiple_of=256)
    assert batch["audio"].shape == (2, 2, 9728) and batch["audio_lengths"].tolist() == [9600, 8000]
    assert batch["attention_mask"].shape == (2, 9728)
    assert audio_collate([])["audio"].shape == (0, 0)


def test_collate_refuses_mixed_channel_counts_and_says_the_fix(folder):
    kept = AudioFolderDataset(folder, num_channels=None)
    with pytest.raises(ValueError, match=r"\[1, 2\] channels in one batch; pass num_channels=1"):
        audio_collate([kept[0], kept[2]])


def test_dict_items_carry_transcripts_ids_and_index():
    items = [{"audio": torch.ones(1, 5), "input_ids": torch.tensor([4, 5, 6]), "text": "abc", "index": 7},
             {"audio": torch.ones(1, 3), "input_ids": torch.tensor([9]), "text": "d", "index": 2}]
    batch = audio_collate(items, pad_id=3)
    assert batch["input_ids"].tolist() == [[4, 5, 6], [9, 3, 3]] and batch["lengths"].tolist() == [3, 1]
    assert batch["text"] == ["abc", "d"] and batch["index"].tolist() == [7, 2]
    assert batch["audio_lengths"].tolist() == [5, 3]


def _padding(batches) -> float:
    padded = sum(int((~b["attention_mask"]).sum()) for b in batches)
    return padded / sum(b["attention_mask"].numel() for b in batches)


def test_training_batches_group_similar_durations_and_pad_less_than_a_shuffle(many):
    grouped = list(audio_loader(many, 4, seed=0, num_workers=0))
    plain = [audio_collate([many[int(i)] for i in chunk])
             for chunk in np.array_split(np.random.default_rng(0).permutation(len(many))[:32], 8)]
    assert len(grouped) == len(many) // 4
    assert _padding(grouped) < 0.5 * _padding(plain)


def test_a_seconds_budget_bounds_every_padded_batch(many):
    for train in (True, False):
        batches = list(audio_loader(many, max_seconds=1.5, train=train, seed=0, num_workers=0))
        for batch in batches:
            assert len(batch["audio"]) * batch["audio"].shape[-1] <= 1.5 * 16000 + 16 or len(batch["audio"]) == 1
        if not train:
            assert sum(len(b["labels"]) for b in batches) == len(many)


def test_evaluation_keeps_every_clip_in_order(dataset):
    batches = list(audio_loader(dataset, 4, train=False, num_workers=0))
    assert torch.cat([b["labels"] for b in batches]).tolist() == dataset.targets


def test_workers_and_spawn_give_the_batches_of_the_main_process(many):
    alone = list(audio_loader(many, 4, seed=3, num_workers=0))
    forked = list(audio_loader(many, 4, seed=3, num_workers=2))
    assert_same_batches(forked, alone)


@pytest.mark.slow
def test_spawned_workers_give_the_same_batches(many):
    alone = list(audio_loader(many, 4, seed=3, num_workers=0))
    spawned = list(audio_loader(many, 4, seed=3, num_workers=2, multiprocessing_context="spawn"))
    assert_same_batches(spawned, alone)


def test_a_mixture_of_folders_batches_by_its_laid_out_durations(folder, many):
    small = AudioFolderDataset(folder, clip_seconds=0.6)
    mixed = MixedDataset([small, many], weights=[1, 1], samples_per_epoch=20)
    assert np.array_equal(mixed.durations, np.concatenate([small.durations, many.durations]))
    batches = list(audio_loader(mixed, 4, seed=0, num_workers=0))
    assert len(batches) == 5 and all(b["audio"].shape[0] == 4 for b in batches)


# 33 clips, batch 4, the last partial batch dropped: 8 batches an epoch
resume_reference, test_resumed_loader_yields_exactly_the_batches_still_to_come = resume_suite(8)


@pytest.fixture(scope="module")
def make_loader(many):
    return lambda workers: audio_loader(many, 4, device="cpu", seed=7, stateful=True, num_workers=workers)


pytestmark = pytest.mark.filterwarnings(f"ignore:{SET_VITAL_WARNING}:UserWarning")


def test_a_loader_state_names_its_clips_and_is_refused_by_other_clips(fixtures, tmp_path):
    from recipes.audio import SpeechDataset

    root = fixtures / "audio" / "folder"
    loader = audio_loader(AudioFolderDataset(root), 2, device="cpu", seed=0, stateful=True, num_workers=0)
    next(iter(loader))
    state = loader.state_dict()
    again = audio_loader(AudioFolderDataset(root), 2, device="cpu", seed=0, stateful=True, num_workers=0)
    again.load_state_dict(state)  # the same clips: accepted
    shutil.copytree(root, tmp_path / "other")
    (tmp_path / "other" / "tone" / "t0_16k.mp3").rename(tmp_path / "other" / "tone" / "t9_16k.mp3")
    other = audio_loader(AudioFolderDataset(tmp_path / "other"), 2, device="cpu", seed=0, stateful=True, num_workers=0)
    with pytest.raises(ValueError, match="ResumableLoader state"):
        other.load_state_dict(state)
    manifest = SpeechDataset(fixtures / "audio" / "speech" / "manifest.jsonl")
    assert manifest.state_source().startswith("manifest.jsonl: 8 clips, durations ")
