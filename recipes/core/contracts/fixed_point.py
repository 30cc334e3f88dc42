"""Integer samples that stand for floats in [-1, 1), marked so that the device makes them float.

    batch["samples"] = int16_batch.as_subclass(FixedPoint)    # in a collate, in a worker
    floats = fixed_to_float(batch)                              # where they are; DevicePrefetcher: on its device

A worker hands its batch to the main process through shared memory, and the main process to the
device: at float32's four bytes a value, for data stored in two (16-bit PCM, the common case of
recorded sound). Left as the integers it was stored as and marked with :class:`FixedPoint`, the
batch crosses in half the bytes, and the float batch is made on the device, exactly:
``x / 2**(bits - 1)``, a power-of-two scale, as a float decode computes it. A ``FixedPoint`` is a
field that decodes itself (:class:`recipes.core.contracts.protocols.DecodesOnDevice`), so
:class:`recipes.core.loading.device.DevicePrefetcher` copies its integers to its device and scales
them there (on the CPU, in the main process), as it decodes any such field.
"""

from __future__ import annotations

from typing import Any

import torch

from recipes.core.contracts.nested import map_tensors


class FixedPoint(torch.Tensor):
    """A signed integer tensor that stands for floats in [-1, 1): ``x / 2**(bits - 1)`` (int16: Q15).

    Mark only integers that are the data as stored (see the module docstring). Torch operations keep
    the class, as they keep tv_tensors': make floats with :func:`fixed_to_float`, not ``.float()``.
    """

    def decode_on(self, device: str | torch.device) -> torch.Tensor:
        """The float32 tensor it stands for, on ``device`` (the integers copied there, then scaled):
        what :class:`recipes.core.contracts.protocols.DecodesOnDevice` asks of a batch field."""
        plain = self.as_subclass(torch.Tensor)
        if plain.is_floating_point() or plain.is_complex():  # not integers (a float op kept the class)
            return plain
        device = torch.device(device)
        moved = plain.to(device, non_blocking=device.type == "cuda" and plain.is_pinned())
        out = torch.empty(moved.shape, dtype=torch.float32, device=device)
        # exact: an integer of up to 24 bits is a float32, and the scale is a power of two
        return torch.mul(moved, 2.0 ** (1 - 8 * moved.element_size()), out=out)


def fixed_to_float(batch: Any) -> Any:
    """Every :class:`FixedPoint` tensor in a nested batch as a new float32 tensor on its own device,
    ``x / 2**(bits - 1)`` computed in one pass; other leaves are kept."""
    return map_tensors(batch, lambda tensor: tensor.decode_on(tensor.device) if isinstance(tensor, FixedPoint)
                       else tensor)
