"""What one row's chat template may spend, and the checks that hold a render to it.

    with bounded(RenderBudget(seconds=5.0), messages) as spent:   # a row: its renders share the deadline
        check_binop(spent, "*", "x", 10**9)      # TemplateBudgetError: a repetition over the budget

:mod:`recipes.text.chat.template_sandbox` calls these checks from the sandbox's hooks (operators, calls,
filters, loops, outputs). A value may hold at most the row's output budget in characters (nested
containers counted whole), one render may produce at most as much, and a row's renders share one
deadline. A check that can tell a result's size from its arguments refuses it before it is made.
"""

from __future__ import annotations

import math
import re
import time
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

MAX_INT_BITS = 1 << 16  # an integer a template computes: ~20,000 digits, far past any real use
MAX_JSON_INDENT = 64  # tojson(indent=...) multiplies with the depth and the lines: bounded on its own
PADDED = ("center", "ljust", "rjust", "zfill")  # string methods and filters padded to a width argument
_FORMAT_WIDTHS = re.compile(r"%[#0 +\-]*(\*|\d+)?(?:\.(\*|\d+))?")
_SPEC_NUMBERS = re.compile(r"\d+")


@dataclass(frozen=True)
class RenderBudget:
    """What one row's chat template may spend.

    Args:
        seconds: the most a row's renders may take together (a conversation and, for templates
            without ``{% generation %}`` markers, its prefixes); real templates need microseconds.
        output_factor: output characters allowed per character of the conversation (its
            messages' texts), on top of ``output_chars``.
        output_chars: output characters allowed whatever the conversation (system prompts, tool
            descriptions and the template's own text).
    """

    seconds: float = 5.0
    output_factor: float = 16.0
    output_chars: int = 65_536

    def __post_init__(self) -> None:
        for name in ("seconds", "output_factor", "output_chars"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise ValueError(f"RenderBudget.{name} must be a finite number > 0, got {value!r}")

    def chars(self, conversation_chars: int) -> int:
        """The output budget of a conversation of ``conversation_chars`` characters."""
        return int(self.output_chars + self.output_factor * conversation_chars)


class TemplateBudgetError(RuntimeError):
    """A render went over its time or output budget; ``budget`` is ``"time"`` or ``"output"``."""

    def __init__(self, message: str, budget: str) -> None:
        super().__init__(message)
        self.budget = budget


class Spending:
    """The running budget of one row: a deadline shared by its renders, and the output of the current one."""

    __slots__ = ("budget", "deadline", "limit", "produced")

    def __init__(self, budget: RenderBudget, conversation_chars: int) -> None:
        self.budget, self.limit, self.produced = budget, budget.chars(conversation_chars), 0
        self.deadline = time.monotonic() + budget.seconds

    def tick(self) -> None:
        """Raise once the deadline has passed."""
        if time.monotonic() > self.deadline:
            raise TemplateBudgetError(
                f"the chat template ran past its time budget ({self.budget.seconds:g} s a row; "
                "RenderBudget(seconds=...) sets it)", "time")

    def refuse(self, size: int, what: str) -> None:
        raise TemplateBudgetError(
            f"the chat template went over its output budget: {what} of {size:,} characters, over the "
            f"{self.limit:,} allowed for this conversation (RenderBudget(output_factor=..., output_chars=...) "
            "sets it)", "output")

    def check(self, size: int, what: str) -> None:
        """Raise if a value of ``size`` characters is more than the budget allows."""
        if size > self.limit:
            self.refuse(size, what)

    def kept(self, value: Any) -> Any:
        """``value`` if its size is within the budget (a result, checked once made)."""
        size = len(value) if type(value) is str else deep_size(value, self.limit)
        if size > self.limit:
            self.refuse(size, "a value")
        return value

    def produce(self, size: int) -> None:
        """Count ``size`` more characters of output in the current render."""
        self.produced += size
        if self.produced > self.limit:
            self.refuse(self.produced, "an output")
        self.tick()


_SPENDING: ContextVar[Spending | None] = ContextVar("recipes_render_spending", default=None)


class bounded:  # noqa: N801 (used as a function: ``with bounded(...)``)
    """``with bounded(budget, conversation) as spent``: renders inside the block spend one
    :class:`Spending`, scaled to ``conversation`` (messages, or any texts); an enclosing block's is
    kept instead (one row, one deadline). A class rather than a generator: it runs once per render."""

    __slots__ = ("budget", "conversation", "token")

    def __init__(self, budget: RenderBudget, conversation: Any) -> None:
        self.budget, self.conversation, self.token = budget, conversation, None

    def __enter__(self) -> Spending:
        spent = _SPENDING.get()
        if spent is None:
            spent = Spending(self.budget, conversation_chars(self.conversation))
            self.token = _SPENDING.set(spent)
        return spent

    def __exit__(self, *exc: Any) -> None:
        if self.token is not None:
            _SPENDING.reset(self.token)
            self.token = None


def spending() -> Spending:
    """The active :class:`Spending`; a render outside :func:`bounded` gets the default budget's."""
    active = _SPENDING.get()
    return active if active is not None else Spending(RenderBudget(), 0)


def conversation_chars(value: Any) -> int:
    """The characters of a conversation's texts (contents, roles, tool calls), what the budget scales with."""
    if type(value) is not list:
        return deep_size(value, None)
    total = len(value)
    for message in value:  # messages of text fields, the common case, without the general walk
        if type(message) is not dict:
            return deep_size(value, None)
        for key, field in message.items():
            total += 1 + len(key) + (len(field) if type(field) is str else deep_size(field, None))
    return total


def deep_size(value: Any, limit: int | None) -> int:
    """Characters of strings plus items of containers, nested containers counted whole; stops past ``limit``."""
    total, stack = 0, [value]
    while stack:
        item = stack.pop()
        if isinstance(item, (str, bytes)):
            total += len(item)
        elif isinstance(item, dict):
            total += len(item)
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple, set, frozenset)):
            total += len(item)
            stack.extend(item)
        else:  # a number, a range (held as three numbers), an object
            total += 1
        if limit is not None and total > limit:
            break
    return total


def check_binop(spent: Spending, operator: str, left: Any, right: Any) -> None:
    """Refuse an operation whose result would be over the budget, before it is computed."""
    if operator == "*":
        count, sequence = (left, right) if isinstance(left, int) else (right, left)
        if isinstance(count, int) and not isinstance(sequence, (int, float)):
            spent.check(max(count, 0) * deep_size(sequence, spent.limit), "a repetition")
        elif isinstance(left, int) and isinstance(right, int):
            _check_bits(spent, left.bit_length() + right.bit_length())
    elif operator == "**" and isinstance(left, int) and isinstance(right, int) and right > 0:
        _check_bits(spent, max(left.bit_length() - 1, 1) * right)
    elif operator == "+" and type(left) is str and type(right) is str:
        spent.check(len(left) + len(right), "a concatenation")
    elif operator == "+" and not isinstance(left, (int, float)):
        spent.check(deep_size(left, spent.limit) + deep_size(right, spent.limit), "a concatenation")
    elif operator == "%" and isinstance(left, str):
        spent.check(printf_size(left, right), "a formatted string")
    spent.tick()


def _check_bits(spent: Spending, bits: int) -> None:
    if bits > MAX_INT_BITS:
        raise TemplateBudgetError(f"the chat template computes an integer of about {bits:,} bits, over the "
                                  f"{MAX_INT_BITS:,} allowed", "output")


def printf_size(template: str, values: Any) -> int:
    """At least the length of ``template % values``: its widest field (``%*d`` takes a value's) or its
    text and values."""
    values = values if isinstance(values, tuple) else (values,)
    numbers = [value for value in values if isinstance(value, int)]
    widths = [max(numbers, default=0) if part == "*" else int(part or 0)
              for match in _FORMAT_WIDTHS.finditer(template) for part in match.groups()]
    return max(max(widths, default=0), len(template) + deep_size(values, None))


def check_call(spent: Spending, function: Any, args: tuple, kwargs: dict) -> tuple:
    """Refuse a string method call whose result would be over the budget; the ``args`` to call it with."""
    target = getattr(function, "__wrapped__", function)  # the sandbox wraps str.format
    owner = getattr(target, "__self__", None)
    if isinstance(owner, str):
        args = _check_string_method(spent, owner, getattr(target, "__name__", ""), args, kwargs)
    spent.tick()
    return args


def _check_string_method(spent: Spending, text: str, name: str, args: tuple, kwargs: dict) -> tuple:
    if name in PADDED:
        spent.check(_int_argument(args, kwargs, 0, "width"), f"str.{name}")
    elif name == "expandtabs":
        size = _int_argument(args, kwargs, 0, "tabsize") or 8
        spent.check(len(text) + size * text.count("\t"), "str.expandtabs")
    elif name == "replace" and len(args) >= 2:
        spent.check(replaced_size(text, args[0], args[1]), "str.replace")
    elif name == "join" and args:
        items = list(args[0])
        spent.check(deep_size(items, spent.limit) + len(text) * len(items), "str.join")
        args = (items, *args[1:])
    elif name in ("format", "format_map"):
        numbers = [int(found) for found in _SPEC_NUMBERS.findall(text)]
        spent.check(max(numbers, default=0), "a formatted field")
        spent.check(len(text) + deep_size((args, kwargs), spent.limit), "a formatted string")
    return args


def _int_argument(args: tuple, kwargs: dict, position: int, name: str) -> int:
    value = args[position] if len(args) > position else kwargs.get(name, 0)
    return value if isinstance(value, int) else 0


def replaced_size(text: Any, old: Any, new: Any) -> int:
    """The length of ``text.replace(old, new)``, told without making it."""
    if not all(isinstance(part, str) for part in (text, old, new)):
        return 0
    count = len(text) + 1 if old == "" else text.count(old)
    return len(text) + count * (len(new) - len(old))


def check_filter(spent: Spending, name: str, value: Any, args: tuple, kwargs: dict) -> None:
    """Refuse a filter whose result would be over the budget, where its input and arguments tell."""
    if type(value) is not str:  # a string is within the budget already; a list may hold one many times
        spent.check(deep_size(value, spent.limit), f"the {name} filter's input")
    check = _FILTER_CHECKS.get(name)
    if check is not None:
        spent.check(check(value, args, kwargs), f"the {name} filter")


def _padded(value: Any, args: tuple, kwargs: dict) -> int:
    return _int_argument(args, kwargs, 0, "width")


def _indented(value: Any, args: tuple, kwargs: dict) -> int:
    width = args[0] if args else kwargs.get("width", 4)
    per_line = len(width) if isinstance(width, str) else width if isinstance(width, int) else 0
    lines = value.count("\n") + 1 if isinstance(value, str) else 1
    return deep_size(value, None) + per_line * lines


def _replaced(value: Any, args: tuple, kwargs: dict) -> int:
    return replaced_size(value, args[0], args[1]) if len(args) >= 2 else 0


def _wrapped(value: Any, args: tuple, kwargs: dict) -> int:
    width = max(_int_argument(args, kwargs, 0, "width") or 79, 1)
    wrap = args[2] if len(args) > 2 else kwargs.get("wrapstring", "\n")
    size = deep_size(value, None)
    return size + (size // width + 1) * (len(wrap) if isinstance(wrap, str) else 1)


def _joined(value: Any, args: tuple, kwargs: dict) -> int:
    separator = args[0] if args else kwargs.get("d", "")
    count = len(value) if isinstance(value, (list, tuple, str, dict)) else 0
    return deep_size(value, None) + count * (len(separator) if isinstance(separator, str) else 1)


def _formatted(value: Any, args: tuple, kwargs: dict) -> int:
    return printf_size(value, (*args, *kwargs.values())) if isinstance(value, str) else 0


def _json_indented(value: Any, args: tuple, kwargs: dict) -> int:
    indent = args[0] if args else kwargs.get("indent")
    if isinstance(indent, int) and indent > MAX_JSON_INDENT:
        raise TemplateBudgetError(f"tojson(indent={indent}) is over the {MAX_JSON_INDENT} allowed", "output")
    return 0


# What each filter's result may grow to, told from its input and arguments (the rest are checked once made).
_FILTER_CHECKS = {"center": _padded, "batch": _padded, "slice": _padded, "indent": _indented, "replace": _replaced,
                  "wordwrap": _wrapped, "join": _joined, "format": _formatted, "tojson": _json_indented}
