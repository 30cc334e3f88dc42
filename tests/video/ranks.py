"""One rank's view of video_loader, run by torchrun (tests/video/test_ranks.py) or alone.

    python -m torch.distributed.run --standalone --nproc_per_node=3 -m tests.video.ranks OUT CONFIG

Run alone (no process group) the same ``report`` is the single-process reference.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from recipes.video import VideoFolderDataset, eval_transform, train_transform, video_loader
from tests.harness import rank_main, sample_passes, train_passes


def build(fixtures: Path, folder: Path, size: int = 19) -> dict[str, Any]:
    """``size`` classes of one video each, copied round-robin from the fixture folder (every container,
    rate and rotation), so a label names its video; two clips a video."""
    folder_of_videos = fixtures / "video" / "folder"
    videos = sorted(path for path in folder_of_videos.rglob("*") if path.suffix != ".txt" and path.is_file())
    for number in range(size):
        source = videos[number % len(videos)]
        (folder / f"c{number:03d}").mkdir()
        shutil.copy(source, folder / f"c{number:03d}" / f"video{source.suffix}")
    return {"root": str(folder)}


def report(config: dict[str, Any]) -> dict[str, Any]:
    common = {"frames_per_clip": 4, "frame_step": 2, "clips_per_video": 2}
    train = VideoFolderDataset(config["root"], transform=train_transform(24), **common)
    evaluate = VideoFolderDataset(config["root"], transform=eval_transform(24), **common)
    return {
        "train": train_passes(video_loader(train, 3, device="cpu", seed=7, num_workers=2),
                              lambda batch: (2 * batch["label"] + batch["clip"]).tolist()),
        "eval": sample_passes(
            video_loader(evaluate, 4, train=False, device="cpu", num_workers=0),
            lambda batch: [(int(index), video) for index, video in zip(batch["index"], batch["video"])],
        )[0],
        "drawn_seed": video_loader(train, 3, device="cpu", num_workers=0).batch_sampler.seed,
    }


if __name__ == "__main__":
    rank_main(report)
