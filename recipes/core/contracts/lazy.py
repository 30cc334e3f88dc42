"""Names loaded on first use (PEP 562), for the facade and its namespaces: ``HOMES`` maps each public
name to the module of ``recipes.core`` that defines it, and that module is imported when the name is
first read, so importing a namespace costs nothing until a name of it is used.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any


def lazy_names(
    module: str, homes: dict[str, str], *, modules: tuple[str, ...] = ()
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``module``, a module of ``recipes.core`` (or of a vendored copy),
    whose public names are ``homes``, ``{name: "room.module"}`` under the core package, and
    ``modules``, its own submodules (the facade's namespaces)."""
    core = module if module.endswith(".core") else module.rpartition(".")[0]
    namespace = sys.modules[module].__dict__

    def __getattr__(name: str) -> Any:
        if name in modules:
            value = importlib.import_module(f"{module}.{name}")
        elif name in homes:
            value = getattr(importlib.import_module(f"{core}.{homes[name]}"), name)
        else:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        namespace[name] = value  # later lookups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *homes, *modules})

    return __getattr__, __dir__
