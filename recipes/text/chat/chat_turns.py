"""Where a conversation's assistant turns lie in its rendered text, from that one render.

    skeletons = TurnSkeletons(template)
    spans = skeletons.spans(messages, text)   # text: template.render(messages)[0]; None: render the prefixes

Assistant turn ``i`` spans from the end of the conversation before it, rendered with the
generation prompt, to the end of the conversation through it (:mod:`recipes.text.chat.instruction_labels`).
Rendering those 2k+1 prefixes of every conversation is most of a build's Python time. Here each
conversation *shape* (its messages without the text of their ``content``) is rendered once, prefixes
included, with a unique placeholder for each message's content; a conversation of that shape reads
its spans off that skeleton, moved by its contents' lengths. That holds when the template writes
each content verbatim, once, whatever it says, so it is checked on each conversation: its one real
render must equal the skeleton filled with its contents. A template that trims, escapes or
branches on the text fails the check, and the caller renders the prefixes instead. The check sees
the whole render only: a template whose prefix renders branch on a content's text where the whole
render does not would be read wrongly (tests/text/test_chat_turns.py holds the shipped styles).
"""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple

from recipes.text.chat.chat_template import ChatTemplate
from recipes.text.chat.template_budget import TemplateBudgetError

# Private-use characters around the message number: no template writes or transforms them
PLACEHOLDER = "\ue000{}\ue001"
_PLACEHOLDER = re.compile("\ue000([0-9]+)\ue001")
# Shapes remembered per template: a handful in practice (roles, with or without a system turn);
# data whose every conversation has its own shape (tool calls) renders its prefixes past this many.
MAX_SHAPES = 4096


class Skeleton(NamedTuple):
    """A shape's render: the text between its contents (``pieces``, one more than ``slots``), the
    message whose content fills each slot, and each assistant turn's span as ``(position in the
    placeholder render, slots before it)`` pairs."""

    pieces: list[str]
    slots: list[int]
    bounds: list[tuple[tuple[int, int], tuple[int, int]]]


class TurnSkeletons:
    """The assistant spans of ``template``'s conversations, one skeleton per shape (module docstring).

    Args:
        template: a template without ``{% generation %}`` blocks (those give their spans directly).
    """

    def __init__(self, template: ChatTemplate) -> None:
        self.template = template
        self._skeletons: dict[str, Skeleton | None] = {}

    def spans(self, messages: list[dict[str, Any]], text: str) -> list[tuple[int, int]] | None:
        """Each assistant turn's ``(start, end)`` characters in ``text`` (the render of ``messages``),
        or None: no skeleton holds for this conversation, render its prefixes."""
        if not all(isinstance(message.get("content"), str) for message in messages):
            return None  # content parts (lists) have no single text to stand in for
        skeleton = self._skeleton(messages)
        if skeleton is None:
            return None
        contents = [messages[slot]["content"] for slot in skeleton.slots]
        filled = [None] * (2 * len(contents) + 1)
        filled[0::2], filled[1::2] = skeleton.pieces, contents
        if "".join(filled) != text:  # the template did not write every content verbatim
            return None
        moved = [0]  # how far the contents before slot k move a position of the placeholder render
        for slot, content in zip(skeleton.slots, contents):
            moved.append(moved[-1] + len(content) - len(PLACEHOLDER.format(slot)))
        return [(start + moved[start_slots], end + moved[end_slots])
                for (start, start_slots), (end, end_slots) in skeleton.bounds]

    def _skeleton(self, messages: list[dict[str, Any]]) -> Skeleton | None:
        shape = json.dumps([{k: v for k, v in message.items() if k != "content"} for message in messages],
                           sort_keys=True, default=repr)
        if shape in self._skeletons:
            return self._skeletons[shape]
        skeleton = self._build(messages)
        if len(self._skeletons) < MAX_SHAPES:
            self._skeletons[shape] = skeleton
        return skeleton

    def _build(self, messages: list[dict[str, Any]]) -> Skeleton | None:
        """Render the shape with placeholders: the whole, and the prefixes around each assistant turn."""
        held = [{**message, "content": PLACEHOLDER.format(number)} for number, message in enumerate(messages)]
        try:
            text, _ = self.template.render(held)
            ends = []
            for turn, message in enumerate(messages):
                if message["role"] != "assistant":
                    continue
                before, _ = self.template.render(held[:turn], add_generation_prompt=True)
                through = text if turn == len(messages) - 1 else self.template.render(held[: turn + 1])[0]
                if not (text.startswith(through) and through.startswith(before)):
                    return None  # the prefixes render differently alone: the caller says so
                ends.append((len(before), len(through)))
        except TemplateBudgetError:
            raise  # the row's budget is spent: its render would fail the same way
        except Exception:
            return None  # the real render raises it again, with the row it came from
        parts = _PLACEHOLDER.split(text)
        slots = [int(number) for number in parts[1::2]]
        if sorted(slots) != list(range(len(messages))):
            return None  # a content left out or written twice
        starts = [match.start() for match in _PLACEHOLDER.finditer(text)]
        stops = [match.end() for match in _PLACEHOLDER.finditer(text)]
        bounds = []
        for start, end in ends:
            located = [_locate(position, starts, stops) for position in (start, end)]
            if None in located:
                return None  # a turn boundary inside a content
            bounds.append(((start, located[0]), (end, located[1])))
        return Skeleton(parts[0::2], slots, bounds)


def _locate(position: int, starts: list[int], stops: list[int]) -> int | None:
    """How many placeholders end at or before ``position``; None when it falls inside one."""
    count = sum(stop <= position for stop in stops)
    if count < len(starts) and starts[count] < position:
        return None
    return count
