"""Checks for a loaded state: a crafted or foreign state is a ValueError naming the field, never a
silent wrong position.

    check_keys(state, ("seed", "epoch"), "GroupedBatchSampler")
    epoch = check_int(state["epoch"], "epoch", "GroupedBatchSampler", *EPOCH_RANGE)

Samplers, streams and loaders check every field of a state before they change anything, so a
refused state leaves them as they were.
"""

from __future__ import annotations

import numbers
import warnings
import zlib
from collections.abc import Iterable
from typing import Any

from recipes.core.contracts.protocols import NamesItsData

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


def check_belongs(state: dict[str, Any], mine: dict[str, Any], owner: str, what: str = "this one") -> None:
    """Refuse a state saved for other data or another batching: each of ``mine``'s fields
    (``num_samples``, ``source``, ``batch_size``, ``plan``) the state also holds must be equal. A
    state without them (saved by version 0.1.0) is read as this one's. The ValueError names every
    field that differs: ``saved with batch_size=16, this loader has 12``."""
    differs = [
        f"saved with {name}={_shown(state[name])}, {what} has {_shown(value)}"
        for name, value in mine.items()
        if name in state and state[name] != value
    ]
    if differs:
        raise ValueError(
            f"{owner} state: {'; '.join(differs)}: a state is a position in the batches of the data and batching it "
            "was saved with; build the loader as it was saved, or start the run afresh"
        )


def _shown(value: Any) -> str:
    text = repr(value) if not isinstance(value, str) else value
    return text if len(text) <= 80 else text[:77] + "..."


def sampled_digest(values: Any, count: int = 4096) -> str:
    """A cheap fingerprint of a long sequence (an array of lengths, a list of file names): crc32 of
    its length and of ``count`` evenly spaced entries, 8 hex digits. O(count), whatever the length."""
    total = len(values)
    picks = range(total) if total <= count else (index * (total - 1) // (count - 1) for index in range(count))
    crc = zlib.crc32(str(total).encode())
    for index in picks:
        crc = zlib.crc32(str(values[index]).encode() + b"\n", crc)
    return f"{crc:08x}"


def warn_replaced_seed(owner: str, given: int | None, saved: int) -> None:
    """The state's seed wins: say so when the object was built with another explicit ``seed=``."""
    if given is not None and int(given) != int(saved):
        warnings.warn(
            f"{owner}: the loaded state's seed {saved} replaces seed={given} given to this object: a resumed run "
            "keeps the seed it began with (drop seed= or pass the saved one to silence this)",
            UserWarning,
            stacklevel=3,
        )


def source_of(dataset: Any) -> str:
    """``dataset.state_source()`` (:class:`NamesItsData`), else its type and size."""
    if isinstance(dataset, NamesItsData):
        return dataset.state_source()
    try:
        size = f"{len(dataset)} samples"
    except TypeError:  # a stream without a length
        size = "no length"
    return f"{type(dataset).__name__}, {size}"
