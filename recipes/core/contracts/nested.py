"""Walk a nested batch: dicts, lists, tuples and namedtuples, down to tensors and other leaves.

    batch = map_tensors(batch, lambda t: t.to("cuda"))   # same structure, every tensor replaced
    tensors_in(batch)                                    # [images, labels, ...] in order
    leaves(batch)                                        # [("[0]", images), ("[1]", labels)]
    samples_in(batch)                                    # 32

Batches are whatever a collate function returns, so every recipe that moves, converts or
inspects them needs the same walk; this is the one walk they share. tv_tensors are tensors here
and keep their class through :func:`map_tensors` as long as the function keeps it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


def map_tensors(batch: Any, function: Callable[[torch.Tensor], Any]) -> Any:
    """``batch`` rebuilt with ``function(tensor)`` in place of every tensor; other leaves kept."""
    return map_leaves(batch, lambda leaf: function(leaf) if isinstance(leaf, torch.Tensor) else leaf)


def map_leaves(batch: Any, function: Callable[[Any], Any]) -> Any:
    """``batch`` rebuilt with ``function(leaf)`` in place of every leaf, tensor or not."""
    return _walk(batch, "", lambda _, leaf: function(leaf))


def tensors_in(batch: Any) -> list[torch.Tensor]:
    """Every tensor in ``batch``, in the order :func:`map_tensors` visits them."""
    return [leaf for _, leaf in leaves(batch) if isinstance(leaf, torch.Tensor)]


def leaves(batch: Any) -> list[tuple[str, Any]]:
    """Every leaf with its path in index notation: ``"[0]"``, ``"['pixel_values']"``, ``"[1][0]['boxes']"``."""
    found: list[tuple[str, Any]] = []
    _walk(batch, "", lambda path, leaf: found.append((path, leaf)))
    return found


def samples_in(batch: Any) -> int:
    """Samples in a batch: the length of its first field, ``images`` of ``(images, labels)`` or
    the list of images of a detection batch; 1 for a batch without a length."""
    first = next(iter(batch.values())) if isinstance(batch, dict) and batch else batch
    if isinstance(first, (list, tuple)) and first:
        first = first[0]
    return len(first) if hasattr(first, "__len__") else 1


def _walk(batch: Any, path: str, leaf: Callable[[str, Any], Any]) -> Any:
    if isinstance(batch, dict):
        return {key: _walk(value, f"{path}[{key!r}]", leaf) for key, value in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # a namedtuple takes positional fields
        return type(batch)(*(_walk(value, f"{path}[{i}]", leaf) for i, value in enumerate(batch)))
    if isinstance(batch, (list, tuple)):
        return type(batch)(_walk(value, f"{path}[{i}]", leaf) for i, value in enumerate(batch))
    return leaf(path, batch)
