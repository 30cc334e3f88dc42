"""Keep a constructor keyword that moved working, with a DeprecationWarning naming its new spelling.

    @moved_keywords("CocoDataset", groups={"read_options": (ReadOptions, {"strict": "strict_annotations"})})
    def __init__(self, image_root, ann_file, ..., read_options=None): ...

    CocoDataset(root, ann, strict=True)   # works; DeprecationWarning: pass read_options=ReadOptions(strict_annotations=...)

A moved keyword goes into its group's frozen object, or, where it selects another mode, the call
goes to that mode's initialiser (the function its classmethod runs, passed itself, not its name). ``inspect.signature`` shows the
constructor as it is now (``functools.wraps``), as transformers' ``deprecate_kwarg`` does.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from dataclasses import replace
from typing import Any


def moved_keywords(
    owner: str,
    *,
    groups: dict[str, tuple[type, dict[str, str]]] | None = None,
    mode: tuple[str, Callable[..., None], tuple[str, ...]] | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate ``owner.__init__`` (or a classmethod's function, whose result it returns) so that its
    moved keywords still work, each with one warning.

    Args:
        owner: the class name, for messages.
        groups: ``{group keyword: (its frozen dataclass, {old keyword: field})}``: an old keyword's
            value becomes that field of the group object (of the one passed, or of the defaults).
        mode: ``(classmethod name, initialiser, old keywords)``: a call with any of these keywords is
            passed whole to ``initialiser(self, ...)``, the function ``owner.<classmethod>`` runs (in a
            class body, defined above ``__init__``).
    """
    groups = groups or {}
    if mode is not None and not callable(mode[1]):
        raise TypeError(f"{owner}: moved_keywords(mode=...) takes the initialiser itself, not its name {mode[1]!r}")

    def decorate(init: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(init)
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            for group, (kind, moves) in groups.items():
                values = {moves[name]: kwargs.pop(name) for name in list(kwargs) if name in moves}
                if not values:
                    continue
                spelled = ", ".join(f"{field}=..." for field in values)
                old = ", ".join(f"{name}=..." for name in moves if moves[name] in values)
                given = kwargs.get(group)
                if given is not None:
                    raise TypeError(f"{owner}: {old} and {group}=... both given; pass {group}={kind.__name__}({spelled}) only")
                warnings.warn(
                    f"{owner}({old}) is deprecated: pass {group}={kind.__name__}({spelled})",
                    DeprecationWarning,
                    stacklevel=2,
                )
                kwargs[group] = replace(kind(), **values)
            if mode is not None and any(name in kwargs for name in mode[2]):
                method, initialiser, names = mode
                old = ", ".join(f"{name}=..." for name in names if name in kwargs)
                warnings.warn(
                    f"{owner}(..., {old}) is deprecated: use {owner}.{method}(..., {old})",
                    DeprecationWarning,
                    stacklevel=2,
                )
                return initialiser(self, *args, **kwargs)
            return init(self, *args, **kwargs)

        return wrapper

    return decorate
