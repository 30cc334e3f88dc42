"""Without FFmpeg's libraries (pip does not install them) audio says how to install them: no file is
blamed, the demo skips the domain, and generated fixtures are not cached without their clips."""

from types import SimpleNamespace

import pytest

from recipes import fixtures
from recipes.audio import AudioFolderDataset, decoding
from recipes.cli.demo import run_demo

# what TorchCodec 0.17 raises when no FFmpeg 4-9 is found, first line
NOT_LOADED = "Could not load libtorchcodec. Likely causes:\n  1. FFmpeg is not properly installed in your environment."


class NoFFmpeg:
    def __init__(self, *args, **kwargs):
        raise RuntimeError(NOT_LOADED)


def test_a_missing_ffmpeg_is_an_import_error_that_says_how_to_install_it(fixtures, monkeypatch):
    monkeypatch.setattr(decoding, "AudioDecoder", NoFFmpeg)
    with pytest.raises(ImportError, match="apt-get install ffmpeg") as raised:
        AudioFolderDataset(fixtures / "audio" / "folder", on_error="skip")  # not a skipped file each
    assert "Could not load libtorchcodec" in str(raised.value.__cause__)


def test_a_bad_file_is_still_named_as_one(tmp_path):
    (tmp_path / "clips").mkdir()
    (tmp_path / "clips" / "bad.wav").write_bytes(b"RIFF not really")
    with pytest.raises(Exception, match="bad.wav") as raised:
        AudioFolderDataset(tmp_path)
    assert not isinstance(raised.value, ImportError)


def test_the_demo_skips_audio_without_ffmpeg_and_says_why(fixtures, monkeypatch, capsys):
    monkeypatch.setattr(decoding, "AudioDecoder", NoFFmpeg)
    assert run_demo(["audio"]) == 0
    out = capsys.readouterr().out
    assert "== audio ==" in out and "skipped: TorchCodec's audio decoder" in out and "apt-get install ffmpeg" in out


def test_generated_fixtures_without_ffmpeg_are_marked_and_not_cached(tmp_path, monkeypatch):
    def no_encoder(folder):
        raise ImportError(decoding.FFMPEG_MISSING)  # what write_audio raises through recipes.audio.fixtures.encode

    monkeypatch.setattr(fixtures, "REGISTRY", [SimpleNamespace(name="audio", load=lambda piece: no_encoder)])
    first = fixtures._cached_fixtures(tmp_path)
    assert "apt-get install ffmpeg" in (first / "audio" / fixtures.UNAVAILABLE).read_text()
    assert (first / "VERSION").is_file() and not first.name.endswith(fixtures._generator_hash())
    second = fixtures._cached_fixtures(tmp_path)
    assert second != first  # written again: a later run with FFmpeg installed gets the whole tree
