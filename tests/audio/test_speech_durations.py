"""SpeechDataset's durations: from the headers (read from threads for a large manifest, kept in
index_dir for the next build and read again for a changed clip) or from the manifest (no clip
opened at build, each decode checked against its row); num_channels moved into ReadOptions."""

import json
import os
import shutil
from pathlib import Path

import pytest
import torch

from recipes.audio import ManifestDurationWarning, SpeechDataset, audio_loader
from recipes.audio import speech_index
from recipes.core import ReadOptions
from recipes.core.contracts.errors import DataError
from tests.harness import with_skip_warnings

MANIFEST = ReadOptions(durations="manifest")


@pytest.fixture
def speech(fixtures: Path, tmp_path: Path) -> Path:
    """A copy of the speech fixtures (clips and manifests) that a test may change."""
    shutil.copytree(fixtures / "audio" / "speech", tmp_path / "speech", ignore=shutil.ignore_patterns("shards"))
    return tmp_path / "speech"


def _rows(speech: Path) -> list[dict]:
    return [json.loads(line) for line in (speech / "manifest.jsonl").read_text(encoding="utf-8").splitlines()]


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def test_manifest_durations_open_no_clip_at_build_and_give_the_items_of_the_headers(speech):
    by_headers = SpeechDataset(speech / "manifest.jsonl")
    by_manifest = SpeechDataset(speech / "manifest.jsonl", read_options=MANIFEST)
    assert by_manifest.durations.tolist() == [row["duration"] for row in _rows(speech)]
    for index in range(len(by_headers)):
        assert torch.equal(by_manifest[index]["audio"], by_headers[index]["audio"])
    for clip in (speech / "clips").iterdir():
        clip.unlink()
    gone = SpeechDataset(speech / "manifest.jsonl", read_options=MANIFEST)  # built from the manifest alone
    assert len(gone) == 8
    with pytest.raises(DataError, match=r"manifest\.jsonl line 1 \(clips/s0\.flac\): cannot read audio"):
        gone[0]


def test_a_wrong_manifest_duration_is_named_by_row_and_clip_or_skipped_with_a_warning(speech):
    rows = _rows(speech)
    rows[2]["duration"] = 5.0  # s2.mp3 decodes to 1.5 s
    path = _write(speech / "wrong.jsonl", rows)
    dataset = SpeechDataset(path, read_options=MANIFEST)
    message = r"wrong\.jsonl line 3 \(clips/s2\.mp3\): decodes to 1\.500 s, the manifest said 5\.000 s when indexed"
    with pytest.raises(DataError, match=message):
        dataset[2]
    skipping = SpeechDataset(path, read_options=MANIFEST, on_error="skip")
    batches, messages = with_skip_warnings(
        lambda: list(audio_loader(skipping, batch_size=8, train=False, device="cpu", num_workers=0)))
    assert len(messages) == 1 and "wrong.jsonl line 3 (clips/s2.mp3): decodes to 1.500 s" in messages[0]
    assert sorted(batches[0]["index"].tolist()) == [0, 1, 3, 4, 5, 6, 7]


def test_a_row_without_a_usable_duration_is_named_at_build(speech):
    rows = _rows(speech)
    del rows[1]["duration"]
    rows[4]["duration"] = "long"
    rows[6]["duration"] = 700.0  # over the default max_seconds
    path = _write(speech / "partial.jsonl", rows)
    with pytest.raises(DataError, match=r"partial\.jsonl line 2 \(clips/s1\.wav\): the manifest's duration is None"):
        SpeechDataset(path, read_options=MANIFEST)
    dataset, messages = with_skip_warnings(lambda: SpeechDataset(path, read_options=MANIFEST, on_error="skip"))
    assert len(dataset) == 5 and len(messages) == 3
    assert "line 5 (clips/s4.flac): the manifest's duration is 'long'" in messages[1]
    assert "line 7 (clips/s6.flac): 700.00 s is over max_seconds=600" in messages[2]


def test_a_second_build_reads_its_headers_from_the_index_and_a_changed_clip_again(speech, tmp_path):
    options = ReadOptions(index_dir=tmp_path / "index")
    first = SpeechDataset(speech / "manifest.jsonl", read_options=options)
    (kept,) = (tmp_path / "index").iterdir()
    second = SpeechDataset(speech / "manifest.jsonl", read_options=options)
    assert second.durations.tolist() == first.durations.tolist() == SpeechDataset(speech / "manifest.jsonl").durations.tolist()
    assert list(second.texts) == list(first.texts) and second.places.tolist() == first.places.tolist()
    assert [second.source(i) for i in range(8)] == [first.source(i) for i in range(8)]
    # the same size and modification time: taken from the index unread; a lie its decode names
    clip = speech / "clips" / "s1.wav"
    stat = clip.stat()
    clip.write_bytes(b"\0" * stat.st_size)
    os.utime(clip, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    third = SpeechDataset(speech / "manifest.jsonl", read_options=options)
    assert third.durations[1] == first.durations[1]
    with pytest.raises(DataError, match=r"manifest\.jsonl line 2 \(clips/s1\.wav\): cannot read audio"):
        third[1]
    shutil.copy(speech / "clips" / "s7.wav", clip)  # another clip (1.0 s for 0.4 s), another time: read again
    for _ in range(2):  # and kept again, in the same place
        with pytest.warns(ManifestDurationWarning, match=r"line 2 \(clips/s1\.wav\): the manifest's duration 0\.4"):
            assert SpeechDataset(speech / "manifest.jsonl", read_options=options).durations[1] == 1.0
        assert list((tmp_path / "index").iterdir()) == [kept]
    kept.write_bytes(b"not an index")  # a damaged index is read afresh and kept again
    with pytest.warns(ManifestDurationWarning):
        assert SpeechDataset(speech / "manifest.jsonl", read_options=options).durations.tolist()[:2] == [0.9, 1.0]
    assert kept.read_bytes().startswith(b"PK")


def test_a_clip_that_cannot_be_read_is_named_at_every_build_with_an_index(speech, tmp_path):
    (speech / "clips" / "s5.ogg").unlink()
    options = ReadOptions(index_dir=tmp_path / "index")
    for _ in range(2):
        with pytest.raises(DataError, match=r"manifest\.jsonl line 6 \(clips/s5\.ogg\): cannot read audio"):
            SpeechDataset(speech / "manifest.jsonl", read_options=options)
        dataset, messages = with_skip_warnings(
            lambda: SpeechDataset(speech / "manifest.jsonl", read_options=options, on_error="skip"))
        assert len(dataset) == 7 and len(messages) == 1 and "s5.ogg" in messages[0]


@pytest.mark.parametrize("slow", [0.0, 1.0], ids=["threads", "one-thread"])
def test_a_large_manifest_reads_its_headers_in_row_order_from_threads_or_not(speech, monkeypatch, slow):
    monkeypatch.setattr(speech_index, "SLOW_HEADER_S", slow)  # 0: every header is slow enough for threads
    rows = _rows(speech)
    many = [rows[k % 8] for k in range(speech_index.THREADS_FROM + 40)]
    many[100] = dict(many[100], audio_filepath="clips/missing.wav")
    many[200] = dict(many[200], audio_filepath="clips/also-missing.wav")
    path = _write(speech / "many.jsonl", many)
    with pytest.raises(DataError, match=r"many\.jsonl line 101 \(clips/missing\.wav\)"):  # the first, not the quickest
        SpeechDataset(path)
    dataset, messages = with_skip_warnings(lambda: SpeechDataset(path, on_error="skip"))
    alone = SpeechDataset(speech / "manifest.jsonl").durations.tolist()
    kept = [k for k in range(len(many)) if k not in (100, 200)]
    assert dataset.durations.tolist() == [alone[k % 8] for k in kept] and len(messages) == 2


def test_num_channels_is_a_read_option(speech):
    dataset = SpeechDataset(speech / "manifest.jsonl", read_options=ReadOptions(num_channels=None))
    assert dataset.num_channels is None
    with pytest.raises(TypeError, match="unexpected keyword argument 'num_channels'"):
        SpeechDataset(speech / "manifest.jsonl", num_channels=None)
    with pytest.raises(ValueError, match=r"SpeechDataset does not read read_options.truncation"):
        SpeechDataset(speech / "manifest.jsonl", read_options=ReadOptions(truncation="slice"))
