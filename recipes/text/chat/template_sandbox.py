"""Chat templates are untrusted code: Jinja's sandbox, with a time and an output budget for each row.

    template = compile_template(source, "tokenizer_config.json", extensions=[...])
    with bounded(RenderBudget(), messages):   # one row: its renders share the deadline
        text = "".join(template.generate(messages=messages))

Templates come from model repositories. Jinja's ``ImmutableSandboxedEnvironment`` keeps them from
Python's internals, but not from the machine: ``{{ 'x' * 10**9 }}`` asks for a gigabyte and two
nested ``range(100000)`` loops run for hours. Here every step that can make a template slow or
large is metered against the row's :class:`RenderBudget`:

- binary operators (``*``, ``**``, ``+``, ``%``: the sandbox's ``intercepted_binops``), every call
  (``range``, string methods, macros) and every filter check their result's size beforehand where it
  can be told (a repetition, a padding width, a join) and afterwards always;
- every loop item, every ``~`` concatenation and every ``{{ }}`` output (also into a ``{% set %}``
  block or a macro) counts against the clock and the characters, through nodes added to the
  parsed template before it is compiled (Jinja's ``nodes`` API, as extensions write them).

A value may hold at most the row's output budget in characters (nested lists counted whole), and
one render may produce at most as much output; a row's renders (a conversation and its prefixes)
share one deadline. Past either, a :class:`TemplateBudgetError` says which budget; the dataset turns
it into a DataError naming the row. Metering costs microseconds a conversation, against the
milliseconds of its tokenisation (benchmarks/README.md, instruction data).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from recipes.text.chat.template_budget import (
    Spending,
    check_binop,
    check_call,
    check_filter,
    deep_size,
    spending,
)

# Filter names no template can write (they hold a space): the hooks added to the parsed template.
EMIT, LOOP, CONCAT = "recipes emit", "recipes loop", "recipes concat"


def compile_template(source: str, name: str, extensions: list[Any]) -> Any:
    """``source`` compiled in transformers' sandboxed environment, metered (see the module docstring).

    Raises:
        ValueError: the template is not valid Jinja (its line and message).
    """
    import jinja2
    from jinja2 import nodes

    env = _environment(extensions)
    try:
        tree = env.parse(source)
    except jinja2.exceptions.TemplateSyntaxError as error:
        raise ValueError(f"{name}: the chat template is not valid Jinja (line {error.lineno}: {error.message})") from None
    for loop in tree.find_all(nodes.For):
        loop.iter = _hook(nodes, LOOP, loop.iter)
    return env.from_string(_rewrite(tree))


def _hook(nodes: Any, name: str, node: Any) -> Any:
    return nodes.Filter(node, name, [], [], None, None).set_lineno(node.lineno or 1)


def _environment(extensions: list[Any]) -> Any:
    """transformers' sandboxed environment and globals (:mod:`recipes.text.chat.chat_template`), metered."""
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class Metered(ImmutableSandboxedEnvironment):
        """The sandbox, with its binary operators and calls checked against the row's budget."""

        intercepted_binops = frozenset({"*", "**", "+", "%"})

        def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
            spent = spending()
            if operator == "+" and type(left) is str and type(right) is str:  # most of a template's work
                spent.check(len(left) + len(right), "a concatenation")
                return left + right
            check_binop(spent, operator, left, right)
            return spent.kept(self.binop_table[operator](left, right))

        def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805 (Jinja's signature)
            spent = spending()
            args = check_call(spent, __obj, args, kwargs)
            return spent.kept(ImmutableSandboxedEnvironment.call(__self, __context, __obj, *args, **kwargs))

    env = Metered(trim_blocks=True, lstrip_blocks=True, extensions=[*extensions, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.filters = {name: _metered_filter(name, function) for name, function in env.filters.items()}
    env.filters.update({EMIT: jinja2.pass_context(emit), LOOP: jinja2.pass_context(loop_items),
                        CONCAT: jinja2.pass_context(concat)})
    env.globals.update(raise_exception=raise_exception, strftime_now=strftime_now, dict=TemplateDict(),
                       namespace=_namespace_class())
    return env


def _metered_filter(name: str, function: Any) -> Any:
    """``function`` as a filter checked against the budget. It takes the context, so Jinja never
    runs it while compiling (a constant argument would otherwise be filtered then, unmetered)."""
    import jinja2

    passes = getattr(function, "jinja_pass_arg", None)
    first = {_marker(jinja2.pass_context): lambda context: context,
             _marker(jinja2.pass_eval_context): lambda context: context.eval_ctx,
             _marker(jinja2.pass_environment): lambda context: context.environment}.get(passes)

    def metered(context: Any, value: Any, *args: Any, **kwargs: Any) -> Any:
        spent = spending()
        check_filter(spent, name, value, args, kwargs)
        result = function(first(context), value, *args, **kwargs) if first else function(value, *args, **kwargs)
        return spent.kept(result)

    return jinja2.pass_context(metered)


def _marker(decorator: Any) -> Any:
    return decorator(lambda: None).jinja_pass_arg


def emit(context: Any, parts: list[Any]) -> str:
    """An output statement's parts as the text it writes, counted against the render's output budget."""
    spent = spending()
    for part in parts:
        if type(part) is not str:
            spent.check(deep_size(part, spent.limit), "an output")
            parts = [part if type(part) is str else str(part) for part in parts]
            break
    text = "".join(parts)
    spent.produce(len(text))
    return text


def concat(context: Any, parts: list[Any]) -> str:
    """``a ~ b``: its parts joined, checked against the budget before they are."""
    spent = spending()
    spent.check(sum(deep_size(part, spent.limit) for part in parts), "a concatenation")
    return "".join([part if type(part) is str else str(part) for part in parts])


def loop_items(context: Any, items: Any) -> Timed:
    """A loop's items, each counted against the row's clock."""
    return Timed(items, spending())


class Timed:
    """``items`` for a ``{% for %}``: the same items and length, the clock checked at each one."""

    __slots__ = ("items", "spent")

    def __init__(self, items: Any, spent: Spending) -> None:
        self.items, self.spent = items, spent

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[Any]:
        tick = self.spent.tick
        for item in self.items:
            tick()
            yield item


def _rewrite(tree: Any) -> Any:
    """``tree`` with each ``{{ }}`` output through :func:`emit` and each ``~`` through :func:`concat`."""
    from jinja2 import nodes
    from jinja2.visitor import NodeTransformer

    class Rewrite(NodeTransformer):
        def visit_Output(self, node: Any) -> Any:  # noqa: N802 (Jinja's visitor names)
            self.generic_visit(node)
            node.nodes = [_hook(nodes, EMIT, nodes.List(node.nodes).set_lineno(node.lineno or 1))]
            return node

        def visit_Concat(self, node: Any) -> Any:  # noqa: N802
            self.generic_visit(node)
            return _hook(nodes, CONCAT, nodes.List(node.nodes).set_lineno(node.lineno or 1))

    return Rewrite().visit(tree)


def raise_exception(message: str) -> None:
    """``raise_exception(...)`` in a template: a TemplateError with the template's message."""
    import jinja2

    raise jinja2.exceptions.TemplateError(message)


def tojson(value: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None,
           sort_keys: bool = False) -> str:
    """transformers' ``tojson``: ``json.dumps`` without escaping HTML."""
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(format: str) -> str:
    """transformers' ``strftime_now``: the current local time, formatted."""
    return datetime.now().strftime(format)


class TemplateDict:
    """``dict(...)`` in a template, without the class itself (no attribute escapes)."""

    def __call__(self, *args: Any, **kwargs: Any) -> dict:
        return dict(*args, **kwargs)

    def fromkeys(self, *args: Any, **kwargs: Any) -> dict:
        return dict.fromkeys(*args, **kwargs)


def _namespace_class() -> type:
    import jinja2

    class TemplateNamespace(jinja2.utils.Namespace):
        """``namespace(...)`` that refuses underscore names, which reach Python internals."""

        def __init__(*args: Any, **kwargs: Any) -> None:
            self, args = args[0], args[1:]
            attrs = dict(*args, **kwargs)
            for key in attrs:
                TemplateNamespace.check(key)
            jinja2.utils.Namespace.__init__(self, attrs)

        def __setitem__(self, key: str, value: Any) -> None:
            TemplateNamespace.check(key)
            jinja2.utils.Namespace.__setitem__(self, key, value)

        @staticmethod
        def check(key: Any) -> None:
            if isinstance(key, str) and key.startswith("_"):
                raise jinja2.exceptions.SecurityError(f"a chat template cannot set the namespace attribute {key!r}")

    return TemplateNamespace
