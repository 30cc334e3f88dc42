"""``python -m recipes demo audio``: the fixture clip folder through the training preset.

    from recipes.audio.demo import build
    dataset, loader = build(fixtures_dir())
"""

from __future__ import annotations

from pathlib import Path

from torch.utils.data import DataLoader

from recipes.audio import AudioFolderDataset, audio_loader


def build(fixtures: Path) -> tuple[AudioFolderDataset, DataLoader]:
    """An AudioFolderDataset over ``audio/folder/`` (3 classes, 11 clips: WAV, float WAV, FLAC,
    MP3, Ogg Vorbis and Opus at 8 to 48 kHz, mono and stereo, a nested folder and an ignored text
    file), mono at 16 kHz, seeded random 0.5 s crops, and a seeded CPU loader of duration-grouped
    batches of 4 (training drops the last 3 clips)."""
    dataset = AudioFolderDataset(fixtures / "audio" / "folder", sample_rate=16000, clip_seconds=0.5)
    return dataset, audio_loader(dataset, 4, device="cpu", seed=0, num_workers=0)
