"""Checks for a loaded state: a crafted or foreign state is a ValueError naming the field, never a
silent wrong position.

    check_keys(state, ("seed", "epoch"), "GroupedBatchSampler")
    epoch = check_int(state["epoch"], "epoch", "GroupedBatchSampler", *EPOCH_RANGE)

Samplers, streams and loaders check every field of a state before they change anything, so a
refused state leaves them as they were.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable
from typing import Any

SEED_RANGE = (-(2**63), 2**64 - 1)  # what a seed may be: it is folded to 64 bits
EPOCH_RANGE = (0, 2**63 - 1)
CURSOR_FIELDS = ("seed", "epoch", "slots", "position")  # a StreamCursor's state


def check_keys(state: Any, keys: Iterable[str], owner: str) -> None:
    """Refuse a loaded state that is not a dict with exactly ``keys``, naming what is missing or extra."""
    if not isinstance(state, dict):
        raise ValueError(f"{owner} state must be a dict, got {type(state).__name__}")
    expected = set(keys)
    missing, extra = sorted(expected - set(state)), sorted(map(repr, set(state) - expected))
    if missing or extra:
        raise ValueError(
            f"{owner} state: missing keys {missing}, unknown keys [{', '.join(extra)}]; a state of this object has "
            f"exactly {sorted(expected)} (a state of something else?)"
        )


def check_int(value: Any, field: str, owner: str, low: int = 0, high: int | None = None) -> int:
    """``value`` as an int, or a ValueError naming ``field``, the value and the allowed range ``[low, high]``."""
    integer = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if not integer or value < low or (high is not None and value > high):
        shown_value = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
        allowed = f"[{low:,}, {'...' if high is None else f'{high:,}'}]"
        raise ValueError(f"{owner} state: {field} = {shown_value} is not an integer in {allowed}")
    return int(value)


def check_source(state: Any, source: str | None, owner: str) -> dict[str, Any]:
    """The cursor's part of a stream's state, once its ``"source"`` (what the stream reads, in a few
    words: ``"4 shards 1a2b3c4d"``) is this stream's; a state of other data is a ValueError. A state
    with no source, as version 0.1.0 saved them, is read as this stream's: it still loads."""
    if isinstance(state, dict) and "source" not in state:
        check_keys(state, CURSOR_FIELDS, owner)
        return dict(state)
    check_keys(state, (*CURSOR_FIELDS, "source"), owner)
    if not (isinstance(state["source"], str) and state["source"] == source):
        raise ValueError(
            f"{owner} state: source = {str(state['source'])[:60]!r} is not this one's {source!r}: a state of other data"
        )
    return {name: value for name, value in state.items() if name != "source"}
