"""`recipes check|show|bench audio PATH`: what the command line says about a clip folder or a speech manifest.

- check: every clip's header (TorchCodec's metadata is the oracle) and decoded length, bad files and
  rows named.
- show: a row per clip of the first batch, its padding shaded exactly where the batch padded it.
- open_path: a folder is an AudioFolderDataset, a manifest a SpeechDataset with the tokenizer beside it.
"""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from torchcodec.decoders import AudioDecoder

from recipes.__main__ import main
from recipes.audio import AudioFolderDataset, SpeechDataset
from recipes.audio.demo import open_path
from recipes.cli.check import check
from recipes.cli.datasets import DataOptions
from recipes.cli.show import TITLE_HEIGHT
from recipes.cli.waveforms import MEL_HEIGHT, PADDING_SHADE, WAVE_HEIGHT, WIDTH, render_clips


def test_a_clean_folder_is_summarised_from_what_torchcodec_reads(fixtures):
    root = fixtures / "audio" / "folder"
    report = check(DataOptions("audio", root), workers=1, progress=False)
    assert report.clean, report.render()
    metadata = [AudioDecoder(str(path)).metadata for path in sorted(root.rglob("*")) if path.suffix.lower() != ".txt"
                and path.is_file()]
    rates = {}
    for meta in metadata:
        rates[f"{meta.sample_rate} Hz"] = rates.get(f"{meta.sample_rate} Hz", 0) + 1
    assert report.summary["decoded"] == f"{len(metadata)} of {len(metadata)} clips"
    assert report.summary["sample rates"] == rates
    assert sum(report.summary["channels"].values()) == len(metadata)
    assert report.summary["classes"] == {"chirp": 4, "tone": 4, "noise": 3}
    for row in report.files:  # each clip: its header as TorchCodec gives it, its decoded length close to it
        meta = AudioDecoder(row["name"]).metadata
        assert row["header_seconds"] == pytest.approx(meta.duration_seconds)
        decoded = AudioDecoder(row["name"]).get_all_samples().data.shape[-1] / meta.sample_rate
        assert row["decoded_seconds"] == pytest.approx(decoded, abs=1e-6)


def test_every_bad_clip_and_row_is_named_with_its_reason(fixtures):
    hostile = fixtures / "audio" / "hostile"
    report = check(DataOptions("audio", hostile), workers=1, progress=False)
    named = {Path(problem.path).name: problem.reason for problem in report.problems}
    assert "out of range [1, 64]" in named["bad_channels.wav"]
    assert "sample rate 2000000 is out of range" in named["bad_rate.wav"]
    for name in ("empty.wav", "not_audio.mp3", "truncated.flac", "unsupported.wav"):
        assert name in named, report.render()
    assert "no class folder" in report.render()
    rows = check(DataOptions("audio", hostile / "bad_transcript.jsonl"), workers=1, progress=False)
    assert any(p.path.endswith("bad_transcript.jsonl line 2") and "not UTF-8" in p.reason for p in rows.problems)


def test_a_clip_cut_mid_sample_is_named_and_its_sound_twin_kept(fixtures, tmp_path):
    clean = fixtures / "audio" / "folder" / "chirp" / "c0_16k.wav"
    (tmp_path / "chirp").mkdir()
    shutil.copy(clean, tmp_path / "chirp" / "whole.wav")
    data = clean.read_bytes()
    (tmp_path / "chirp" / "cut.wav").write_bytes(data[: len(data) // 2 | 1])  # an odd byte count: half a sample
    report = check(DataOptions("audio", tmp_path), workers=1, progress=False)
    assert [Path(p.path).name for p in report.problems] == ["cut.wav"], report.render()
    assert report.problems[0].reason.startswith("cannot decode audio")
    assert report.summary["decoded"] == "1 of 2 clips"


def test_a_pool_of_workers_gives_what_one_process_gives(fixtures):
    manifest = fixtures / "audio" / "speech" / "manifest.jsonl"
    one = check(DataOptions("audio", manifest), workers=1, progress=False)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("recipes.cli.check_audio.INLINE_BELOW", 1)
        two = check(DataOptions("audio", manifest), workers=2, progress=False)
    assert one.to_json() == two.to_json() and one.clean


def test_check_prints_json_and_returns_the_exit_status(fixtures, capsys):
    assert main(["check", "audio", str(fixtures / "audio" / "speech" / "manifest.jsonl"), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["clean"] and printed["summary"]["transcripts"].startswith("8,")
    assert main(["check", "audio", str(fixtures / "audio" / "hostile")]) == 1


def test_show_draws_each_clip_with_its_padding_shaded_where_the_batch_padded(fixtures, tmp_path, capsys):
    manifest = fixtures / "audio" / "speech" / "manifest.jsonl"
    out = tmp_path / "clips.png"
    assert main(["show", "audio", str(manifest), "-o", str(out), "--batch-size", "3"]) == 0
    assert "the first evaluation batch (dataset order) of SpeechDataset" in capsys.readouterr().out
    picture = np.asarray(Image.open(out).convert("RGB"))[TITLE_HEIGHT:]
    dataset = SpeechDataset(manifest)
    lengths = [dataset[i]["audio"].shape[-1] for i in range(3)]
    row_height = picture.shape[0] // 3
    for row, length in enumerate(lengths):
        used = max(1, round(WIDTH * length / max(lengths)))
        top = row * row_height
        spectrogram = picture[top + WAVE_HEIGHT : top + WAVE_HEIGHT + MEL_HEIGHT]
        assert (spectrogram[:, used + 1 :] == PADDING_SHADE).all()
        assert not (spectrogram[:, : used - 1] == PADDING_SHADE).all(axis=-1).any()


def test_the_picture_has_a_row_per_clip_and_draws_stereo_as_its_mean():
    audio = torch.zeros(2, 2, 1600)
    audio[0, 0, :800] = 0.5  # left only: the mean is 0.25, drawn a quarter of the band above the middle
    batch = {"audio": audio, "audio_lengths": torch.tensor([1600, 800])}
    picture = np.asarray(render_clips(batch, sample_rate=16000, names=["a", "b"], captions=[["x"], ["y"]]))
    assert picture.shape[1] == WIDTH and picture.shape[0] % 2 == 0
    middle = (WAVE_HEIGHT - 1) / 2
    column = picture[:WAVE_HEIGHT, 10]
    drawn = np.flatnonzero((column != [255, 255, 255]).any(axis=-1) & (column != [200, 200, 200]).any(axis=-1))
    assert drawn.min() == round(middle - 0.25 * middle)


def test_open_path_reads_a_folder_or_a_manifest_with_the_tokenizer_beside_it(fixtures, tmp_path):
    folder = open_path(DataOptions("audio", fixtures / "audio" / "folder"), train=True)
    assert isinstance(folder, AudioFolderDataset) and len(folder) == 11
    speech = open_path(DataOptions("audio", fixtures / "audio" / "speech" / "manifest.jsonl"), train=False)
    assert isinstance(speech, SpeechDataset) and speech.tokens is None
    shutil.copytree(fixtures / "audio" / "speech", tmp_path / "speech")
    shutil.copy(fixtures / "text" / "tokenizer.json", tmp_path / "speech" / "tokenizer.json")
    tokenized = open_path(DataOptions("audio", tmp_path / "speech" / "manifest.jsonl"), train=False)
    assert tokenized.tokens is not None and tokenized[0]["input_ids"].dtype == torch.int64


def _tar(path: Path, members: dict[str, bytes]) -> Path:
    import io
    import tarfile

    with tarfile.open(path, "w") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


def test_check_reads_shards_as_the_stream_does_and_names_each_bad_sample(fixtures, tmp_path):
    shards = fixtures / "audio" / "speech" / "shards"
    report = check(DataOptions("audio", shards), workers=1, progress=False)
    assert report.clean, report.render()
    assert report.summary["shards"] == 2 and report.summary["decoded"] == "8 of 8 clips"
    assert "soundfile" in report.summary["decoders"] and "TorchCodec" in report.summary["decoders"]
    clips = fixtures / "audio" / "speech" / "clips"
    bad = _tar(tmp_path / "bad.tar", {
        "a.flac": (clips / "s0.flac").read_bytes(), "a.txt": b"fine",
        "b.txt": b"no clip",
        "c.wav": (clips / "s1.wav").read_bytes(), "c.txt": b"\xff\xfe",
        "d.flac": (fixtures / "audio" / "hostile" / "truncated.flac").read_bytes(), "d.txt": b"cut",
    })
    report = check(DataOptions("audio", bad), workers=1, progress=False)
    named = {problem.path: problem.reason for problem in report.problems}
    assert set(named) == {f"{bad}:b", f"{bad}:c", f"{bad}:d.flac"}, report.render()
    assert named[f"{bad}:b"].startswith("no audio member") and "unreadable transcript" in named[f"{bad}:c"]
    assert "cannot read audio" in named[f"{bad}:d.flac"]
    assert report.summary["decoded"] == "2 of 3 clips"


def test_check_max_seconds_names_each_longer_clip(fixtures, capsys):
    manifest = fixtures / "audio" / "speech" / "manifest.jsonl"
    assert main(["check", "audio", str(manifest), "--max-seconds", "1.0", "--json"]) == 1
    problems = json.loads(capsys.readouterr().out)["problems"]
    durations = [AudioDecoder(str(manifest.parent / row["audio_filepath"])).metadata.duration_seconds
                 for row in map(json.loads, manifest.read_text(encoding="utf-8").splitlines())]
    assert len(problems) == sum(seconds > 1.0 for seconds in durations) > 0
    assert all("max_seconds=1" in problem["reason"] for problem in problems)
    with pytest.raises(SystemExit):
        main(["check", "audio", str(manifest), "--max-seconds", "0"])


def test_show_train_draws_the_random_windows_the_loader_serves(fixtures, tmp_path, capsys):
    root = fixtures / "audio" / "folder"
    out = tmp_path / "train.png"
    assert main(["show", "audio", str(root), "--train", "--clip-seconds", "0.3", "--batch-size", "4", "-o", str(out)]) == 0
    assert "each clip is a random 0.3 s window of the file named under it" in capsys.readouterr().out
    options = DataOptions("audio", root, clip_seconds=0.3)
    train, evaluation = open_path(options, train=True), open_path(options, train=False)
    assert train.random_crop and not evaluation.random_crop and train.clip_seconds == evaluation.clip_seconds == 0.3
    assert max(train[index][0].shape[-1] for index in range(len(train))) == round(0.3 * train.sample_rate)
