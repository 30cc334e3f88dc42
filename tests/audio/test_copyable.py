"""The audio folder is the unit to copy: `recipes copy` makes a package that runs on its own files."""

from pathlib import Path

import recipes
from tests.harness import assert_domain_imports, copy_and_run

FOLDER = Path(recipes.__file__).resolve().parent / "audio"


def test_every_file_imports_only_the_core_and_its_own_folder():
    paths = sorted(FOLDER.glob("*.py"))
    assert len(paths) >= 5
    for path in paths:
        assert_domain_imports(path)


def test_the_copied_folder_builds_the_datasets_and_collates_from_its_own_files(tmp_path, fixtures):
    script = f"""
from pathlib import Path
import torch
from torchcodec.decoders import AudioDecoder
from audio import AudioFolderDataset, LogMel, SpeechDataset, audio_collate
from audio.demo import build

F = Path({str(fixtures)!r})
folder = AudioFolderDataset(F / "audio" / "folder", sample_rate=16000)
clip, label = folder[0]
oracle = AudioDecoder(folder.path(0), sample_rate=16000).get_all_samples().data.mean(dim=0, keepdim=True)
assert torch.allclose(clip, oracle.clamp(-1, 1), atol=1e-6), (clip.shape, oracle.shape)
speech = SpeechDataset(F / "audio" / "speech" / "manifest.jsonl")
batch = audio_collate([speech[0], speech[1]])
assert batch["audio"].dtype == torch.float32 and batch["audio"].shape[0] == 2
assert batch["audio_lengths"].tolist() == [speech[0]["audio"].shape[-1], speech[1]["audio"].shape[-1]]
assert batch["text"] == [speech.texts[0], speech.texts[1]]
features = LogMel(16000, n_fft=400, hop_length=160, n_mels=40)(batch["audio"])
assert features.shape == (2, 40, 1 + batch["audio"].shape[-1] // 160), features.shape
_, loader = build(F)
batch = next(iter(loader))
assert batch["audio"].shape == (4, 8000) and batch["labels"].shape == (4,), batch["audio"].shape
"""
    report = copy_and_run("audio", tmp_path, script)
    assert f"-> {tmp_path / 'audio'}" in report["printed"] and "it needs recipes.core: " in report["printed"]
    print(f"copy: {report['files']} files, {report['lines']} lines; "
          f"recipes.core imported: {report['core_modules']} modules, {report['core_lines']} lines")
