"""The hooks a dataset offers the core, as protocols, and how the core reads them: the collate a
dataset asks for, its pad id, and the check that holds each hook to its protocol.

``from recipes.core import hooks``, then ``hooks.collate_of(...)``: one name of the facade for these, each
documented on the reference page and loaded on first use.
"""

# ruff: noqa: F401  (the TYPE_CHECKING block below imports each name for static readers)
from __future__ import annotations

from typing import TYPE_CHECKING

from recipes.core.contracts.lazy import lazy_names

# public name -> the module of recipes.core that defines it
HOMES = {
    "ChecksStates": "contracts.protocols",
    "Described": "contracts.protocols",
    "DrawsCropBoxes": "contracts.protocols",
    "DrawsEpochs": "contracts.protocols",
    "KnowsAspectRatios": "contracts.protocols",
    "Mixable": "contracts.protocols",
    "NamesItsData": "contracts.protocols",
    "NeedsPersistentWorkers": "contracts.protocols",
    "PadsIds": "contracts.protocols",
    "RankPlaced": "contracts.protocols",
    "ReadsPaths": "contracts.protocols",
    "Resumable": "contracts.protocols",
    "SetsDraftSize": "contracts.protocols",
    "ShardLimited": "contracts.protocols",
    "UsualCollate": "contracts.protocols",
    "check_hooks": "contracts.protocols",
    "chosen_collate": "contracts.protocols",
    "collate_of": "contracts.protocols",
    "dataset_pad_id": "contracts.protocols",
}
__all__ = sorted(HOMES)
__getattr__, __dir__ = lazy_names(__name__, HOMES)

if TYPE_CHECKING:  # where each name lives, for static readers
    from recipes.core.contracts.protocols import (
        ChecksStates,
        Described,
        DrawsCropBoxes,
        DrawsEpochs,
        KnowsAspectRatios,
        Mixable,
        NamesItsData,
        NeedsPersistentWorkers,
        PadsIds,
        RankPlaced,
        ReadsPaths,
        Resumable,
        SetsDraftSize,
        ShardLimited,
        UsualCollate,
        check_hooks,
        chosen_collate,
        collate_of,
        dataset_pad_id,
    )
