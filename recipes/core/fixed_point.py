"""Integer samples that stand for floats in [-1, 1), marked so the device makes them float.

    batch["samples"] = int16_batch.as_subclass(FixedPoint)    # in a collate, in a worker
    floats = fixed_to_float(batch)                              # on the device (DevicePrefetcher does it)

A worker hands its batch to the main process through shared memory, and the main process to the
device: at float32's four bytes a value, for data stored in two (16-bit PCM, the common case of
recorded sound). Left as the integers it was stored as and marked with :class:`FixedPoint`, the
batch crosses in half the bytes, and :func:`fixed_to_float` gives the float batch on the device,
exactly: ``x / 2**(bits - 1)`` with a power-of-two scale, as a float decode computes it.
:class:`recipes.core.device.DevicePrefetcher` runs it on every batch, as it normalises uint8 images.
"""

from __future__ import annotations

from typing import Any

import torch

from recipes.core.nested import map_tensors


class FixedPoint(torch.Tensor):
    """A signed integer tensor that stands for floats in [-1, 1): ``x / 2**(bits - 1)`` (int16: Q15).

    Mark only integers that are the data as stored (see the module docstring). Torch operations keep
    the class, as they keep tv_tensors': make floats with :func:`fixed_to_float`, not ``.float()``.
    """


def fixed_to_float(batch: Any) -> Any:
    """Every integer :class:`FixedPoint` tensor in a nested batch as a new float32 tensor,
    ``x / 2**(bits - 1)`` computed in one pass on its device; other leaves are kept."""
    return map_tensors(batch, _fixed_to_float)


def _fixed_to_float(tensor: torch.Tensor) -> torch.Tensor:
    if not isinstance(tensor, FixedPoint) or tensor.dtype.is_floating_point or tensor.dtype.is_complex:
        return tensor
    plain = tensor.as_subclass(torch.Tensor)
    out = torch.empty(plain.shape, dtype=torch.float32, device=plain.device)
    # exact: an integer of up to 24 bits is a float32, and the scale is a power of two
    return torch.mul(plain, 2.0 ** (1 - 8 * plain.element_size()), out=out)
