"""SpeechDataset: NeMo, plain JSONL, CSV, Parquet with Audio structs and datasets.Dataset give the
same clips (TorchCodec's own decode) and transcripts (the tokenizer's own ids); bad rows named."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer
from torchcodec.decoders import AudioDecoder

from recipes.audio import SpeechDataset, audio_loader
from recipes.core.contracts.errors import DataError
from tests.harness import with_skip_warnings


@pytest.fixture(scope="module")
def speech(fixtures: Path) -> Path:
    return fixtures / "audio" / "speech"


def _rows(speech: Path) -> list[dict]:
    return [json.loads(line) for line in (speech / "manifest.jsonl").read_text(encoding="utf-8").splitlines()]


def _check_items(dataset: SpeechDataset, speech: Path, tokenizer: Tokenizer | None = None) -> None:
    rows = _rows(speech)
    assert len(dataset) == len(rows) == 8
    for index, row in enumerate(rows):
        item = dataset[index]
        path = str(speech / row["audio_filepath"])
        expected = AudioDecoder(path, sample_rate=16000).get_all_samples().data.mean(0, keepdim=True)
        assert torch.equal(item["audio"], expected.clamp(-1, 1)), path
        assert item["text"] == row["text"] and item["index"] == index
        if tokenizer is not None:
            assert item["input_ids"].tolist() == tokenizer.encode(row["text"]).ids
            assert item["input_ids"].dtype == torch.int64
        assert abs(dataset.durations[index] - row["duration"]) < 0.1


@pytest.mark.parametrize("name", ["manifest.jsonl", "plain.jsonl", "manifest.csv"])
def test_manifests_give_the_decoded_clips_and_the_tokenizers_ids(speech, tokenizer, name):
    _check_items(SpeechDataset(speech / name, tokenizer), speech, tokenizer)


def test_parquet_with_audio_structs_and_a_hub_dataset_give_the_same_items(speech, tokenizer, tmp_path):
    pyarrow = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    rows = _rows(speech)
    audio = [{"bytes": (speech / row["audio_filepath"]).read_bytes(), "path": row["audio_filepath"]} for row in rows]
    table = pyarrow.table({"audio": audio, "text": [row["text"] for row in rows]})
    pq.write_table(table, tmp_path / "train.parquet")
    _check_items(SpeechDataset(tmp_path / "train.parquet", tokenizer), speech, tokenizer)
    datasets = pytest.importorskip("datasets")
    hub = datasets.Dataset(table).cast_column("audio", datasets.Audio())
    _check_items(SpeechDataset(hub, tokenizer), speech, tokenizer)
    picked = SpeechDataset(hub.select([5, 2]), tokenizer)  # an index mapping: rows as the dataset shows them
    assert [picked[i]["text"] for i in range(2)] == [rows[5]["text"], rows[2]["text"]]


def test_truncation_keeps_the_special_tokens(speech, tokenizer):
    dataset = SpeechDataset(speech / "manifest.jsonl", tokenizer, max_length=4)
    cut = Tokenizer.from_str(tokenizer.to_str())
    cut.enable_truncation(4)
    for index, row in enumerate(_rows(speech)):
        assert dataset[index]["input_ids"].tolist() == cut.encode(row["text"]).ids
        assert dataset[index]["input_ids"].tolist()[-1] == tokenizer.token_to_id("[SEP]")


def test_without_a_tokenizer_items_carry_the_transcript_only(speech):
    item = SpeechDataset(speech / "plain.jsonl")[2]
    assert set(item) == {"audio", "text", "index"} and item["text"] == "a river runs to the sea in the morning"


def test_the_loader_pads_clips_and_transcripts_under_a_seconds_budget(speech, tokenizer):
    dataset = SpeechDataset(speech / "manifest.jsonl", tokenizer)
    batches = list(audio_loader(dataset, max_seconds=2.5, train=False, num_workers=0))
    assert sum(len(b["index"]) for b in batches) == 8
    for batch in batches:
        assert batch["input_ids"].shape[0] == batch["audio"].shape[0] == len(batch["text"])
        assert batch["lengths"].tolist() == [len(tokenizer.encode(t).ids) for t in batch["text"]]
        assert batch["audio"].shape[0] * batch["audio"].shape[1] <= 2.5 * 16000 + 16 or len(batch["index"]) == 1


def test_a_transcript_that_is_not_utf8_is_named_by_line_or_skipped(fixtures):
    hostile = fixtures / "audio" / "hostile" / "bad_transcript.jsonl"
    with pytest.raises(DataError, match=r"bad_transcript\.jsonl line 2: not UTF-8"):
        SpeechDataset(hostile, audio_root=fixtures / "audio")
    dataset, messages = with_skip_warnings(
        lambda: SpeechDataset(hostile, audio_root=fixtures / "audio", on_error="skip"))
    assert len(dataset) == 1 and dataset[0]["text"] == "hot water" and len(messages) == 1


def test_an_unknown_source_or_suffix_says_what_is_read(speech):
    with pytest.raises(ValueError, match=r"or a datasets\.Dataset, not a list"):
        SpeechDataset([speech / "manifest.jsonl"])
    with pytest.raises(ValueError, match=r"SpeechDataset reads \.jsonl, \.csv, \.parquet"):
        SpeechDataset(speech / "README.md")


def test_paths_that_leave_the_audio_root_are_refused(speech, tmp_path):
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"audio": "../escape.wav", "text": "x"}) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match="escapes the dataset root"):
        SpeechDataset(manifest)
    outside = str((speech / "clips/s1.wav").resolve())
    manifest.write_text(json.dumps({"audio_filepath": outside, "text": "x"}) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match="outside audio_root"):
        SpeechDataset(manifest)
    assert len(SpeechDataset(manifest, audio_root=speech)) == 1  # absolute paths inside the root are fine


def test_missing_transcripts_bad_clips_and_long_clips_are_named(speech, tmp_path):
    manifest = tmp_path / "m.jsonl"
    rows = [{"audio": "clips/s0.flac"}, {"audio": "clips/nothing.wav", "text": "x"},
            {"audio": "clips/s2.mp3", "text": "y"}]
    rows.append({"audio": "clips/s1.wav", "text": "kept"})
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    dataset, messages = with_skip_warnings(
        lambda: SpeechDataset(manifest, audio_root=speech, max_seconds=1.0, on_error="skip"))
    assert len(dataset) == 1 and len(messages) == 3
    assert "m.jsonl line 1: the transcript 'text' is missing" in messages[0]
    assert "m.jsonl line 2 (clips/nothing.wav): cannot read audio" in messages[1]
    assert "m.jsonl line 3 (clips/s2.mp3): 1.58 s is over max_seconds=1" in messages[2]


def test_manifests_mix_and_batch_by_their_laid_out_durations(speech, tokenizer):
    from recipes.core import MixedDataset

    nemo, plain = SpeechDataset(speech / "manifest.jsonl", tokenizer), SpeechDataset(speech / "plain.jsonl", tokenizer)
    mixed = MixedDataset([nemo, plain], weights=[1, 1])
    assert np.array_equal(mixed.durations, np.concatenate([nemo.durations, plain.durations]))
    batches = list(audio_loader(mixed, 4, seed=0, num_workers=0))
    assert len(batches) == 4 and sorted(i for b in batches for i in b["index"].tolist()) == list(range(16))
    assert all(b["input_ids"].shape[0] == 4 for b in batches)
