"""Turn a command line's description of a dataset into the domain's dataset and loader.

    dataset = open_dataset(DataOptions("vision", Path("data/train"), size=224), train=True)
    loader = make_loader("vision", dataset, batch_size=64, train=True, device="cpu", seed=0)

What PATH is, per domain, is each entry's ``paths`` in recipes/domains.py, and how it is opened
the domain's ``open_path`` (``recipes/<domain>/demo.py``). The tokenizer defaults to a
``tokenizer.json`` next to PATH, if there is one.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset

from recipes.domains import DOMAINS, domain


@dataclass
class DataOptions:
    """Where a dataset is and how to read it, as the command line gives it."""

    domain: str
    path: Path
    tokenizer: Path | None = None
    image_root: Path | None = None
    size: int = 224
    max_length: int | None = None
    text_field: str = "text"
    label_field: str | None = None
    image_field: str = "image"  # Parquet columns (multimodal)
    caption_field: str = "caption"
    on_error: str = "raise"  # bench and show: stop at a bad sample, or drop it with a warning
    include_crowd: bool = False  # COCO's crowd regions kept in the targets (show draws them)
    max_seconds: float | None = None  # audio: the per-clip limit (None: recipes.audio's MAX_SECONDS)
    clip_seconds: float | None = None  # audio folders: crop each clip to this length

    def __post_init__(self) -> None:
        if self.domain not in DOMAINS:
            raise ValueError(f"domain must be one of {DOMAINS}, got {self.domain!r}")
        self.path = Path(self.path).expanduser()

    def missing(self) -> str | None:
        """What does not exist of PATH, ``--image-root`` and ``--tokenizer``, in one line; None if all do."""
        if not self.path.exists():
            return f"{self.path} does not exist"
        reads, root = domain(self.domain).reads, self.image_root
        if root is not None and "image_root" in reads and not Path(root).expanduser().is_dir():
            state = "is not a folder" if Path(root).expanduser().exists() else "does not exist"
            return f"image root {root} {state}; pass --image-root DIR, the folder the image names are relative to"
        if self.tokenizer is not None and "tokenizer" in reads and not Path(self.tokenizer).expanduser().is_file():
            return f"tokenizer file {self.tokenizer} does not exist (expected a tokenizer.json)"
        return None

    def tokenizer_path(self) -> Path:
        """``--tokenizer``, else ``tokenizer.json`` next to PATH; a clear error if neither."""
        if self.tokenizer is not None:
            return Path(self.tokenizer).expanduser()
        beside = (self.path if self.path.is_dir() else self.path.parent) / "tokenizer.json"
        if beside.is_file():
            return beside
        raise ValueError(f"{self.domain} needs a tokenizer: pass --tokenizer PATH/tokenizer.json (none next to {self.path})")


def open_dataset(options: DataOptions, *, train: bool, include_crowd: bool = False) -> Dataset:
    """The domain's dataset over ``options.path``: training augmentation if ``train``, else none;
    ``include_crowd`` keeps COCO's crowd regions in the targets (detection).

    Without ``train`` the images only get their deterministic resize (classification and
    captions, to batch them) or nothing at all (detection), so what you see is what the file holds.
    Each domain says how in its ``open_path`` (``recipes/<domain>/demo.py``, named in recipes/domains.py).
    """
    opens = domain(options.domain).load("opens")
    return opens(dataclasses.replace(options, include_crowd=include_crowd or options.include_crowd), train=train)


def sample_count(dataset: Dataset) -> int:
    """``len(dataset)``; for a stream of tar shards, the samples their index counts (``ShardStream.index``)."""
    if not isinstance(dataset, IterableDataset):
        return len(dataset)
    index = getattr(dataset, "index", None)
    if not hasattr(index, "total"):
        raise ValueError(f"a stream the command line opens is tar shards; {type(dataset).__name__} is another stream")
    return int(index.total)


def loader_function(name: str) -> Any:
    """The recipe's own ``<domain>_loader`` preset."""
    return domain(name).load("loader")


def make_loader(
    domain: str, dataset: Dataset, batch_size: int, *, train: bool, device: str | torch.device, seed: int = 0, **overrides: Any
) -> DataLoader:
    """``<domain>_loader(dataset, batch_size, train=..., device=..., seed=..., **overrides)``."""
    return loader_function(domain)(dataset, batch_size, train=train, device=device, seed=seed, **overrides)


def quiet_tokenizers_in_workers() -> None:
    """Forked workers of a process that already tokenised print a warning each; it is harmless
    here (workers never tokenise), so say so once through the variable the library reads."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
