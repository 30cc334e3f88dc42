"""Loader states saved to disk by earlier commits still resume with exactly the batches they had to come.

Each ``tests/states/<commit>/<case>.pt`` holds ``{"state", "rest", "built_at"}``: a loader's
``state_dict()`` taken mid-pass in epoch 1, a summary of the batches that pass still had to
give (indices, labels, image ids, caption ids: no pixels) and the commit that wrote it
(``tests/states/make_states.py``). A fresh loader of today's code, given the state, must give
the same summaries. One builder per case below: a changed signature is adapted there, never
in the saved files.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
from torchvision.transforms import v2

from recipes.core import ByGroup, MixedDataset, MixedStream, SeededBatchSampler
from recipes.detection import CocoDataset, detection_loader
from recipes.multimodal import ImageTextDataset, ImageTextShards, multimodal_loader, write_shards
from recipes.text import StreamingTextDataset, TokenizedTextDataset, streaming_loader, text_loader
from recipes.vision import ImageFolderDataset, train_transform, vision_loader
from recipes.core.sampling.stream_order import StreamOrder

STATES = Path(__file__).resolve().parents[1] / "states"
OPTIONS = {"stateful": True, "num_workers": 0, "device": "cpu"}
CROP = v2.Compose([v2.RandomResizedCrop(16, scale=(0.3, 1.0), antialias=True), v2.RandomHorizontalFlip()])
# a mean of 16x16x3 uint8 pixels tells images and crops apart; a resize kernel's rounding moves it by far less
MEAN_TOLERANCE = 1.0


def _tokenizer(fixtures: Path) -> Path:
    return fixtures / "text" / "tokenizer.json"


# -- builders: today's API, the same loaders the saved states came from ---------------------------


def folder(fixtures: Path, scratch: Path) -> Any:
    dataset = ImageFolderDataset(fixtures / "vision", train_transform(16))
    return vision_loader(dataset, 4, train=True, seed=7, **OPTIONS)


def tokenized(fixtures: Path, scratch: Path) -> Any:
    dataset = TokenizedTextDataset(fixtures / "text" / "labeled.jsonl", _tokenizer(fixtures), label_field="label")
    return text_loader(dataset, 4, train=True, seed=3, **OPTIONS)


def budget(fixtures: Path, scratch: Path) -> Any:
    dataset = TokenizedTextDataset(fixtures / "text" / "corpus.txt", _tokenizer(fixtures))
    return text_loader(dataset, None, max_tokens=512, train=True, seed=3, **OPTIONS)


def coco(fixtures: Path, scratch: Path) -> Any:
    dataset = CocoDataset(fixtures / "detection" / "images", fixtures / "detection" / "instances.json",
                          v2.RandomHorizontalFlip())  # the flips show in the boxes
    return detection_loader(dataset, 2, train=True, seed=11, **OPTIONS)


def pairs(fixtures: Path, scratch: Path) -> Any:
    dataset = ImageTextDataset(fixtures / "multimodal" / "captions.json", _tokenizer(fixtures), transform=CROP,
                               captions="random")
    return multimodal_loader(dataset, 4, train=True, seed=5, **OPTIONS)


def mixture(fixtures: Path, scratch: Path) -> Any:
    sources = [TokenizedTextDataset(fixtures / "text" / "corpus.txt", _tokenizer(fixtures)),
               TokenizedTextDataset(fixtures / "text" / "labeled.jsonl", _tokenizer(fixtures))]
    return text_loader(MixedDataset(sources, [1, 3], samples_per_epoch=80), 4, train=True, seed=4, **OPTIONS)


def stream(fixtures: Path, scratch: Path) -> Any:
    lines = StreamingTextDataset(fixtures / "text" / "corpus.txt", _tokenizer(fixtures),
                                 order=StreamOrder(shuffle_buffer=16, seed=3))
    return streaming_loader(lines, 4, train=True, seed=3, **OPTIONS)


def stream_mixture(fixtures: Path, scratch: Path) -> Any:
    small = StreamingTextDataset(fixtures / "text" / "labeled.jsonl", _tokenizer(fixtures),
                                 order=StreamOrder(shuffle_buffer=8, seed=1))
    big = StreamingTextDataset(fixtures / "text" / "corpus.txt", _tokenizer(fixtures),
                               order=StreamOrder(shuffle_buffer=8, seed=2))
    mixed = MixedStream([small, big], [3, 1], samples_per_epoch=96, seed=5)
    return streaming_loader(mixed, 8, train=True, seed=3, **OPTIONS)


def shards(fixtures: Path, scratch: Path) -> Any:
    written = write_shards(fixtures / "multimodal" / "captions.json", scratch, samples_per_shard=2)  # 4 shards of 2
    dataset = ImageTextShards([str(path) for path in written], _tokenizer(fixtures), transform=CROP, captions="random",
                              order=StreamOrder(shuffle_buffer=3, seed=2))
    return multimodal_loader(dataset, 2, train=True, seed=2, **OPTIONS)


def sampler(fixtures: Path, scratch: Path) -> Any:
    # saved as GroupedBatchSampler(100, 8, shuffle=True, seed=3, groups=..., keyed=True) at d2ce733
    return SeededBatchSampler(100, 8, shuffle=True, seed=3, plan=ByGroup([index % 3 for index in range(100)]))


# -- what is recorded of each batch ----------------------------------------------------------------


def _ids(batch: dict[str, Any]) -> list[list[int]]:
    return [row[:length].tolist() for row, length in zip(batch["input_ids"], batch["lengths"].tolist())]


def images_and_labels(batch: tuple[torch.Tensor, torch.Tensor]) -> dict[str, list]:
    images, labels = batch
    means = images.float().mean(dim=(1, 2, 3))
    return {"labels": labels.tolist(), "mean": [round(float(m), 2) for m in means]}


def rows(batch: dict[str, Any]) -> dict[str, list]:
    return {"index": batch["index"].tolist(), **({"labels": batch["labels"].tolist()} if "labels" in batch else {})}


def rows_and_lengths(batch: dict[str, Any]) -> dict[str, list]:
    return {"index": batch["index"].tolist(), "lengths": batch["lengths"].tolist()}


def boxes(batch: tuple[list[torch.Tensor], list[dict[str, Any]]]) -> dict[str, list]:
    targets = batch[1]
    return {"image_id": [t["image_id"] for t in targets], "boxes": [t["boxes"].tolist() for t in targets]}


def captions(batch: dict[str, Any]) -> dict[str, list]:
    return {"index": batch["index"].tolist(), "input_ids": _ids(batch)}


def keyed_captions(batch: dict[str, Any]) -> dict[str, list]:
    return {"key": list(batch["key"]), "input_ids": _ids(batch)}


def drawn(batch: list[tuple[int, int]]) -> dict[str, list]:
    return {"batch": [[int(index), int(seed)] for index, seed in batch]}


@dataclass(frozen=True)
class Case:
    build: Callable[[Path, Path], Any]
    summary: Callable[[Any], dict[str, list]]
    taken: int  # batches taken in epoch 1 before the state is saved (make_states.py)


CASES = {
    "folder": Case(folder, images_and_labels, 1),
    "tokenized": Case(tokenized, rows, 15),
    "budget": Case(budget, rows, 6),
    "coco": Case(coco, boxes, 2),
    "pairs": Case(pairs, captions, 1),
    "mixture": Case(mixture, rows, 10),
    "stream": Case(stream, rows_and_lengths, 25),
    "stream-mixture": Case(stream_mixture, rows_and_lengths, 6),
    "shards": Case(shards, keyed_captions, 2),
    "sampler": Case(sampler, drawn, 6),
}


def shards_digest(folder: Path) -> str:
    """One sha1 over the tar shards in ``folder``: equal bytes give equal offsets in a state."""
    sha = hashlib.sha1()
    for path in sorted(folder.glob("*.tar")):
        sha.update(path.name.encode() + path.read_bytes())
    return sha.hexdigest()


def assert_same_rest(got: list[dict[str, list]], expected: list[dict[str, list]]) -> None:
    assert len(got) == len(expected), f"{len(got)} batches instead of {len(expected)}"
    for position, (mine, saved) in enumerate(zip(got, expected)):
        assert mine.keys() == saved.keys(), f"batch {position}"
        for key, value in saved.items():
            if key == "mean":
                assert mine[key] == pytest.approx(value, abs=MEAN_TOLERANCE), f"batch {position}: {key}"
            else:
                assert mine[key] == value, f"batch {position}: {key}"


SAVED = sorted(STATES.glob("*/*.pt"))  # d2ce733: before the keyed order; 32dcb14: before keyed draws and
# windows; 44e328e: states that name what they belong to (belongs_to)


def test_every_commits_states_cover_every_case():
    for folder in {path.parent for path in SAVED}:
        assert sorted(path.stem for path in folder.glob("*.pt")) == sorted(CASES), folder.name


@pytest.mark.parametrize("path", SAVED, ids=lambda path: f"{path.parent.name}-{path.stem}")
def test_a_state_saved_by_an_earlier_commit_resumes_with_the_batches_still_to_come(path, fixtures, tmp_path):
    case = path.stem
    saved = torch.load(path, weights_only=True)
    loader = CASES[case].build(fixtures, tmp_path)
    if "shards" in saved:  # the writer's bytes, checked first: a changed writer is not a broken resume
        assert shards_digest(tmp_path) == saved["shards"], (
            "write_shards writes other bytes than when the state was saved, whose offsets point into those")
    loader.load_state_dict(saved["state"])
    assert saved["rest"], "a saved state with nothing still to come checks nothing"
    assert_same_rest([CASES[case].summary(batch) for batch in loader], saved["rest"])
