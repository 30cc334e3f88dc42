"""Parameters are checked when a clip dataset or its loader is built (a ValueError names the parameter),
a manifest's duration that disagrees with the header is named, and a manifest whose every row was
skipped is an error."""

import json
import math
import warnings
from pathlib import Path

import pytest

from recipes.audio import AudioFolderDataset, AudioShards, LogMel, ManifestDurationWarning, SpeechDataset, audio_loader
from recipes.core import ReadOptions
from recipes.core.contracts.errors import DataError, SkippedSampleWarning

BAD = [("sample_rate", 10**9), ("sample_rate", 0), ("sample_rate", math.nan), ("sample_rate", 16000.5),
       ("sample_rate", None), ("num_channels", 0), ("num_channels", -1), ("num_channels", 1000),
       ("max_seconds", math.nan), ("max_seconds", math.inf), ("max_seconds", 0), ("max_seconds", -1)]


@pytest.fixture(scope="module")
def speech(fixtures: Path) -> Path:
    return fixtures / "audio" / "speech"


def _builders(fixtures: Path) -> dict:
    speech = fixtures / "audio" / "speech"
    return {"folder": lambda **kw: AudioFolderDataset(fixtures / "audio" / "folder", **kw),
            "manifest": lambda **kw: SpeechDataset(speech / "manifest.jsonl", **_channels_read(kw)),
            "shards": lambda **kw: AudioShards(sorted(str(p) for p in (speech / "shards").glob("*.tar")), **kw)}


def _channels_read(keywords: dict) -> dict:
    """SpeechDataset reads num_channels from its ReadOptions."""
    if "num_channels" not in keywords:
        return keywords
    return {"read_options": ReadOptions(num_channels=keywords.pop("num_channels")), **keywords}


@pytest.mark.parametrize("builder", ["folder", "manifest", "shards"])
@pytest.mark.parametrize("name, value", BAD, ids=[f"{name}={value}" for name, value in BAD])
def test_a_parameter_out_of_range_is_a_value_error_naming_it(fixtures, builder, name, value):
    with pytest.raises(ValueError, match=f": {name} must be "):
        _builders(fixtures)[builder](**{name: value})


@pytest.mark.parametrize("value", [math.nan, math.inf, 0, -1.0])
def test_clip_seconds_and_the_loaders_seconds_budget_are_checked(fixtures, value):
    with pytest.raises(ValueError, match="AudioFolderDataset: clip_seconds must be a finite number > 0"):
        AudioFolderDataset(fixtures / "audio" / "folder", clip_seconds=value)
    dataset = AudioFolderDataset(fixtures / "audio" / "folder")
    with pytest.raises(ValueError, match="audio_loader: max_seconds must be a finite number > 0"):
        audio_loader(dataset, max_seconds=value)  # 0 or -1 used to give one clip a batch


def test_the_features_take_counts():
    with pytest.raises(ValueError, match="LogMel: n_mels must be an int in"):
        LogMel(16000, 400, 160, 0)
    with pytest.raises(ValueError, match="LogMel: hop_length must be an int in"):
        LogMel(16000, 400, math.nan, 80)


def _manifest(speech: Path, tmp_path: Path, durations: list) -> Path:
    rows = [json.loads(line) for line in (speech / "manifest.jsonl").read_text(encoding="utf-8").splitlines()]
    lines = []
    for row, duration in zip(rows, durations):
        row = dict(row, audio_filepath=str(speech / row["audio_filepath"]))
        lines.append(json.dumps(row if duration == "same" else dict(row, duration=duration)))
    path = tmp_path / "stated.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_a_stated_duration_that_disagrees_with_the_header_is_named_and_strict_makes_it_an_error(speech, tmp_path):
    path = _manifest(speech, tmp_path, ["same", 100.0, "same", "long"])
    with pytest.warns(ManifestDurationWarning) as caught:
        dataset = SpeechDataset(path, audio_root=speech)
    messages = [str(w.message) for w in caught]
    assert len(messages) == 2 and "stated.jsonl line 2 (" in messages[0] and "duration 100.0 disagrees" in messages[0]
    assert "stated.jsonl line 4 (" in messages[1] and "'long'" in messages[1]
    assert dataset.durations[1] < 1  # the header's length is what batches follow
    with warnings.catch_warnings():
        warnings.simplefilter("error", ManifestDurationWarning)  # strict
        with pytest.raises(ManifestDurationWarning, match="stated.jsonl line 2"):
            SpeechDataset(path, audio_root=speech)
    SpeechDataset(speech / "manifest.jsonl")  # the fixture's own durations are within the tolerance: no warning


def test_a_manifest_whose_every_row_was_skipped_is_an_error(speech, tmp_path):
    path = tmp_path / "gone.jsonl"
    path.write_text("".join(json.dumps({"audio": f"missing-{k}.wav", "text": "x"}) + "\n" for k in range(3)))
    with pytest.warns(SkippedSampleWarning), pytest.raises(DataError) as caught:
        SpeechDataset(path, audio_root=speech, on_error="skip")
    assert "gone.jsonl: every row was skipped (3 read, on_error='skip'); the first: " in str(caught.value)
    assert "gone.jsonl line 1" in str(caught.value)
