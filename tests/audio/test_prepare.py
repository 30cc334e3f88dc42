"""recipes.audio.prepare and `recipes prepare audio`: a speech manifest's clips decoded once, resampled,
rounded to 16 bits and written as FLAC or WAV beside their transcripts, in the shards AudioShards reads;
byte-identical whatever the workers, a clip whose duration disagrees with its row named or skipped and
counted. The oracles are TorchCodec's own decode of each original, the manifest, and tarfile."""

import io
import json
import tarfile
from pathlib import Path

import pytest
import soundfile
import torch
from torchcodec.decoders import AudioDecoder

from recipes.__main__ import main
from recipes.audio import AudioShards, audio_loader, prepare
from recipes.core import DataError, SkippedSampleWarning
from recipes.core.loading.loader import SET_VITAL_WARNING

pytestmark = pytest.mark.filterwarnings(f"ignore:{SET_VITAL_WARNING}:UserWarning")


@pytest.fixture(scope="module")
def speech(fixtures: Path) -> Path:
    return fixtures / "audio" / "speech"


def rows_of(manifest: Path) -> list[dict]:
    return [json.loads(line) for line in manifest.read_text(encoding="utf-8").splitlines()]


def rounded(data: bytes, sample_rate: int, mono: bool = True) -> torch.Tensor:
    """TorchCodec's decode of ``data`` at ``sample_rate`` (mixed to mono), rounded to 16 bits."""
    audio = AudioDecoder(data, sample_rate=sample_rate).get_all_samples().data
    audio = audio.mean(0, keepdim=True) if mono else audio
    return (audio.clamp(-1, 1) * 32768).round().clamp(-32768, 32767) / 32768


def written(dest: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(dest.iterdir()) if path.is_file()}


def test_each_clip_is_its_decode_at_the_rate_in_16_bits_beside_its_transcript_whatever_the_workers(
        speech, tmp_path):
    one = prepare(speech / "manifest.jsonl", tmp_path / "one", sample_rate=16000, samples_per_shard=3, workers=1,
                  progress=False)
    two = prepare(speech / "manifest.jsonl", tmp_path / "two", sample_rate=16000, samples_per_shard=3, workers=2,
                  progress=False)
    assert written(tmp_path / "one") == written(tmp_path / "two")
    assert (one.samples, len(one.shards), one.skipped) == (8, 3, [])
    # s1.wav alone is 16-bit PCM at 16 kHz already: its samples are kept, the seven others rounded
    assert one.reencoded == 7 and one.psnr_median > 80
    items = sorted(AudioShards(tmp_path / "one", sample_rate=16000), key=lambda item: item["key"])
    rows = rows_of(speech / "manifest.jsonl")
    assert [item["text"] for item in items] == [row["text"] for row in rows]
    for item, row in zip(items, rows):
        expected = rounded((speech / row["audio_filepath"]).read_bytes(), 16000)
        assert item["audio"].shape == expected.shape, row
        torch.testing.assert_close(item["audio"], expected, atol=1 / 32768 + 1e-7, rtol=0)
    with tarfile.open(tmp_path / "one" / "shard-000000.tar") as tar:
        names = tar.getnames()
        flac = tar.extractfile(names[0]).read()
    assert names[:2] == ["000000000.flac", "000000000.txt"]
    info = soundfile.info(io.BytesIO(flac))
    assert (info.format, info.subtype, info.samplerate, info.channels) == ("FLAC", "PCM_16", 16000, 1)
    assert two.reused == 0 and len(json.loads((tmp_path / "one" / "manifest.json").read_text())["shards"]) == 3


def test_wav_with_the_channels_kept_at_another_rate_and_a_manifest_without_durations(fixtures, tmp_path):
    folder = fixtures / "audio" / "folder"
    clips = ["tone/t2_48k_stereo.flac", "noise/n0_8k.wav", "chirp/c2_44k_stereo.mp3"]
    manifest = tmp_path / "clips.jsonl"
    manifest.write_text("".join(json.dumps({"audio": name, "text": f" clip {k} "}) + "\n"
                                for k, name in enumerate(clips)), encoding="utf-8")
    summary = prepare(manifest, tmp_path / "out", sample_rate=22050, num_channels=None, format="wav",
                      audio_root=folder, workers=1, progress=False)
    assert summary.samples == 3
    items = sorted(AudioShards(tmp_path / "out", sample_rate=22050, num_channels=None), key=lambda item: item["key"])
    for item, name, k in zip(items, clips, range(3)):
        expected = rounded((folder / name).read_bytes(), 22050, mono=False)
        assert item["audio"].shape == expected.shape, name
        torch.testing.assert_close(item["audio"], expected, atol=1 / 32768 + 1e-7, rtol=0)
        assert item["text"] == f" clip {k} "  # kept as written: a .json member where .txt would strip it
    with tarfile.open(tmp_path / "out" / "shard-000000.tar") as tar:
        assert tar.getnames()[:2] == ["000000000.wav", "000000000.json"]


def test_a_clip_that_disagrees_with_its_duration_stops_the_run_named_or_is_skipped_and_counted(speech, tmp_path):
    rows = rows_of(speech / "manifest.jsonl")
    rows[2]["duration"] = 4.0  # s2.mp3 lasts 1.5 s
    manifest = tmp_path / "manifest.jsonl"
    manifest.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    with pytest.raises(DataError, match=r"manifest.jsonl line 3 \(clips/s2.mp3\): decodes to 1.500 s, the manifest "
                                        r"said 4.000 s"):
        prepare(manifest, tmp_path / "raised", audio_root=speech, workers=1, progress=False)
    assert not list((tmp_path / "raised").glob("shard-*.tar"))
    with pytest.warns(SkippedSampleWarning, match=r"line 3 \(clips/s2.mp3\)"):
        summary = prepare(manifest, tmp_path / "skipped", audio_root=speech, on_error="skip", samples_per_shard=4,
                          workers=2, progress=False)
    assert summary.samples == 7 and len(summary.skipped) == 1 and "decodes to 1.500 s" in summary.skipped[0][1]
    listed = json.loads((tmp_path / "skipped" / "manifest.json").read_text())
    assert listed["samples"] == 7 and listed["skipped"] == [list(pair) for pair in summary.skipped]
    assert "1 skipped" in str(summary)
    manifest.write_text(manifest.read_text(encoding="utf-8") + "{not json\n", encoding="utf-8")
    with pytest.warns(SkippedSampleWarning) as caught:  # a line the listing drops is counted with the rest
        summary = prepare(manifest, tmp_path / "both", audio_root=speech, on_error="skip", workers=1, progress=False)
    assert summary.samples == 7 and [where.split(" (")[0] for where, _ in summary.skipped] == [
        f"{manifest} line 9", f"{manifest} line 3"]
    assert len(caught) == 2


def test_recipes_prepare_audio_writes_what_audio_loader_reads_and_refuses_an_image_option(speech, tmp_path, capsys):
    dest = tmp_path / "prepared"
    argv = ["prepare", "audio", str(speech / "manifest.jsonl"), str(dest), "--sample-rate", "8000",
            "--samples-per-shard", "4", "--workers", "1"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "8 samples in 2 shards" in out and "AudioShards(" in out and "sample_rate=8000" in out
    loader = audio_loader(AudioShards(dest, sample_rate=8000), 3, train=False, device="cpu", num_workers=0)
    batches = list(loader)
    assert sum(len(batch["text"]) for batch in batches) == 8
    # 16-bit PCM at the loader's rate: the batches cross from the workers as int16, made float on the device
    assert all(batch["audio"].dtype == torch.int16 and batch["audio"].ndim == 2 for batch in batches)
    with pytest.raises(SystemExit):
        main(["prepare", "audio", str(speech / "manifest.jsonl"), str(tmp_path / "other"), "--max-side", "64"])
    assert "takes no --max-side" in capsys.readouterr().err
    assert main(["check", "audio", str(dest)]) == 0
    assert "2 of 2 shards as manifest.json lists them" in capsys.readouterr().out
    damaged = bytearray((dest / "shard-000001.tar").read_bytes())
    damaged[100] ^= 1  # the first member's mode, which no reader looks at: only the sha256 tells
    (dest / "shard-000001.tar").write_bytes(damaged)
    assert main(["check", "audio", str(dest)]) != 0
    assert "shard-000001.tar: its bytes are not those manifest.json lists" in capsys.readouterr().out
