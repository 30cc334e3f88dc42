"""Numeric parameters checked when a dataset, plan or loader is built: a ValueError names the parameter.

    sample_rate = check_count("sample_rate", sample_rate, owner="SpeechDataset", low=1_000, high=768_000)
    max_seconds = check_positive("max_seconds", max_seconds, owner="audio_loader")   # None passes

A value that is not finite, out of range or of the wrong kind fails at the call that took it, with
the parameter's name and the range, instead of far later as a decoder's message, a batch of one or
an allocation of gigabytes (``sample_rate=10**9`` resamples half a second into 500 M samples).
"""

from __future__ import annotations

import math
import numbers
from typing import Any


def check_count(name: str, value: Any, *, owner: str, low: int = 1, high: int | None = None,
                none: bool = True) -> int | None:
    """``value`` as an int in ``[low, high]``, None as None (unless ``none`` is False); else a
    ValueError naming ``name``. A bool or a float (even a whole one) is refused: a count is an int
    (numpy's included)."""
    if value is None and none:
        return None
    integer = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if not integer or value < low or (high is not None and value > high):
        raise ValueError(f"{owner}: {name} must be an int in [{low:,}, {'...' if high is None else f'{high:,}'}]"
                         f"{' or None' if none else ''}, got {_shown(value)}")
    return int(value)


def check_positive(name: str, value: Any, *, owner: str, high: float | None = None, zero: bool = False) -> float | None:
    """``value`` as a finite float > 0 (``>= 0`` with ``zero``) and ``<= high``, None as None; else a
    ValueError naming ``name``."""
    if value is None:
        return None
    number = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if not number or not math.isfinite(value) or not (value >= 0 if zero else value > 0) or (high is not None and value > high):
        bound = f"{'>= 0' if zero else '> 0'}{'' if high is None else f' and <= {high:g}'}"
        raise ValueError(f"{owner}: {name} must be a finite number {bound}, or None; got {_shown(value)}")
    return float(value)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
