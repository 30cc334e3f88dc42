"""One rank's view of audio_loader, run by torchrun (tests/audio/test_ranks.py) or alone.

    python -m torch.distributed.run --standalone --nproc_per_node=3 -m tests.audio.ranks OUT CONFIG

Run alone (no process group) the same ``report`` is the single-process reference.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from recipes.audio import AudioFolderDataset, audio_loader
from tests.harness import rank_main, sample_passes, train_passes


def build(fixtures: Path, folder: Path, size: int = 41) -> dict[str, Any]:
    """``size`` classes of one clip each, copied round-robin from the fixture folder (every
    container and rate), so a label names its sample."""
    clips = sorted(p for p in (fixtures / "audio" / "folder").rglob("*") if p.suffix.lower() != ".txt" and p.is_file())
    for number in range(size):
        source = clips[number % len(clips)]
        (folder / f"c{number:03d}").mkdir()
        shutil.copy(source, folder / f"c{number:03d}" / f"clip{source.suffix}")
    return {"root": str(folder)}


def report(config: dict[str, Any]) -> dict[str, Any]:
    train = AudioFolderDataset(config["root"], clip_seconds=0.3)
    evaluate = AudioFolderDataset(config["root"], clip_seconds=0.3, random_crop=False)
    return {
        "train": train_passes(
            audio_loader(train, 3, device="cpu", seed=7, num_workers=2), lambda batch: batch["labels"].tolist()
        ),
        "eval": sample_passes(
            audio_loader(evaluate, 4, train=False, device="cpu", num_workers=0),
            lambda batch: [(int(label), audio[:length]) for audio, length, label
                           in zip(batch["audio"], batch["audio_lengths"], batch["labels"])],
        )[0],
        "drawn_seed": audio_loader(train, 3, device="cpu", num_workers=0).batch_sampler.seed,
    }


if __name__ == "__main__":
    rank_main(report)
