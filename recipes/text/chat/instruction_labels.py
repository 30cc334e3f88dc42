"""Render an instruction sample to text, tokenise it, and label the tokens the model should learn.

    rendered = render_sample(sample, template, where="chat.jsonl line 3")
    encoded = LabelEncoder(tokenizer)([rendered])[0]   # (ids, learned): learned[t] = token t is trained

The learned part of a sample is a set of character spans of its rendered text: the assistant's
turns with their end-of-turn token (chat), everything after the prompt (prompt/completion), or all
of it (plain text, ``completion_only=False``). Tokens are labelled from their character offsets,
so a token that the tokenizer merges across a boundary is learned when any of its characters is
(transformers' ``return_assistant_tokens_mask`` rule; TRL's prompt-prefix rule gives the same).

A chat's assistant spans come from the template's ``{% generation %}`` blocks where it has them,
else from rendering: turn ``i`` spans from the end of the conversation before it, rendered with
the generation prompt, to the end of the conversation through it (read off one render per
conversation where the template writes contents verbatim: :mod:`recipes.text.chat.chat_turns`). Templates that render an
earlier part differently once later turns follow (some drop past reasoning) need the markers:
such a conversation is a DataError that says so.
"""

from __future__ import annotations

import weakref
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from itertools import chain
from typing import NamedTuple, TypeVar

import numpy as np
from tokenizers import Encoding, Tokenizer

from recipes.core import DataError
from recipes.text.chat.chat_template import ChatTemplate
from recipes.text.chat.chat_turns import TurnSkeletons
from recipes.text.chat.instruction_rows import SKIP_HINT, Sample
from recipes.text.chat.template_budget import TemplateBudgetError

T = TypeVar("T")
_SKELETONS: weakref.WeakKeyDictionary[ChatTemplate, TurnSkeletons] = weakref.WeakKeyDictionary()


class Rendered(NamedTuple):
    """A sample's text, its learned character spans, and whether the tokenizer's post-processor
    adds its special tokens (plain text: yes; a chat template writes its own: no)."""

    text: str
    spans: list[tuple[int, int]]
    special: bool


class Encoded(NamedTuple):
    """A sample's ids, which of them are learned, and how many post-processor tokens close it."""

    ids: list[int]
    learned: np.ndarray  # bool, one per id
    tail: int


def render_sample(sample: Sample, template: ChatTemplate | None, *, where: str, completion_only: bool = True) -> Rendered:
    """The text of ``sample`` and its learned spans (see the module docstring)."""
    if template is None or sample.kind == "text":
        rendered = _render(sample, template, where)
    else:
        rendered = _rendered_by(template, sample, where)
    if not completion_only or sample.kind == "text":
        return rendered._replace(spans=[(0, len(rendered.text))])
    if not any(end > start for start, end in rendered.spans):
        raise DataError(f"{where}: nothing to learn (no assistant turn, or an empty completion)", skip_hint=SKIP_HINT)
    return rendered


def _rendered_by(template: ChatTemplate, sample: Sample, where: str) -> Rendered:
    """``sample`` rendered within one row's budget; whatever the template's code raises is a DataError naming the row."""
    import jinja2

    try:
        with template.bounded((sample.prompt, sample.completion)):
            return _render(sample, template, where)
    except DataError:
        raise
    except TemplateBudgetError as error:
        raise DataError(f"{where}: {error}", skip_hint=SKIP_HINT) from None
    except jinja2.TemplateError as error:  # raise_exception in the template, or a failure it hit
        raise DataError(f"{where}: the chat template raised: {error}", skip_hint=SKIP_HINT) from None
    except Exception as error:  # the template's own code: {{ 1/0 }}, {{ 'a' + 1 }}, a recursion too deep
        raise DataError(f"{where}: the chat template raised {type(error).__name__}: {str(error)[:200]}",
                        skip_hint=SKIP_HINT) from None


def _render(sample: Sample, template: ChatTemplate | None, where: str) -> Rendered:
    if sample.kind == "text":
        return Rendered(sample.prompt, [], True)
    if sample.kind == "prompt" and isinstance(sample.prompt, str):
        completion = sample.completion
        eos = None if template is None else template.eos_token
        if eos and not completion.endswith(eos):  # as TRL does: the model learns to stop
            completion += eos
        return Rendered(sample.prompt + completion, [(len(sample.prompt), len(sample.prompt) + len(completion))], True)
    if template is None:
        raise ValueError(f"{where}: conversations need a chat template: pass template= a model folder, its "
                         "tokenizer_config.json or chat_template.jinja, or the Jinja text")
    if sample.kind == "prompt":  # conversational: the completion follows the prompt's generation prompt
        prompt, _ = template.render(sample.prompt, add_generation_prompt=True)
        text, _ = template.render(sample.prompt + sample.completion)
        return Rendered(text, [(_common_prefix(prompt, text), len(text))], False)
    messages = sample.prompt
    text, spans = template.render(messages)
    if template.has_generation:
        return Rendered(text, spans, False)
    found = _skeletons(template).spans(messages, text)
    if found is not None:
        return Rendered(text, found, False)
    for turn, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        before, _ = template.render(messages[:turn], add_generation_prompt=True)
        through = text if turn == len(messages) - 1 else template.render(messages[: turn + 1])[0]
        if not (text.startswith(through) and through.startswith(before)):
            raise DataError(
                f"{where}: the chat template renders the conversation through assistant turn {turn} differently "
                "alone than within the whole, so its span cannot be told; use a template with {% generation %} "
                "markers around the assistant's text", skip_hint=SKIP_HINT)
        spans.append((len(before), len(through)))
    return Rendered(text, spans, False)


def _skeletons(template: ChatTemplate) -> TurnSkeletons:
    """The template's skeletons, kept as long as the template is (one render per conversation)."""
    skeletons = _SKELETONS.get(template)
    if skeletons is None:
        skeletons = _SKELETONS[template] = TurnSkeletons(template)
    return skeletons


def _common_prefix(a: str, b: str) -> int:
    size = min(len(a), len(b))
    if a[:size] == b[:size]:
        return size
    return next(k for k in range(size) if a[k] != b[k])


class LabelEncoder:
    """Tokenise rendered samples with offsets and mark the learned tokens (``encode_batch``, all cores).

    Args:
        tokenizer: the ``tokenizers.Tokenizer``; one with truncation or padding is copied without them.
    """

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer
        if tokenizer.truncation is not None or tokenizer.padding is not None:  # the caller's stays as it is
            self.tokenizer = Tokenizer.from_str(tokenizer.to_str())
            self.tokenizer.no_truncation()
            self.tokenizer.no_padding()

    def __call__(self, samples: Sequence[Rendered]) -> list[Encoded]:
        return self.label(samples, self.tokenize(samples))

    def tokenize(self, samples: Sequence[Rendered]) -> list[Encoding]:
        """The samples' encodings, in order (``encode_batch``: Rust's threads, without the GIL)."""
        out: list[Encoding | None] = [None] * len(samples)
        for special in (True, False):
            chosen = [k for k, sample in enumerate(samples) if sample.special == special]
            if chosen:
                encodings = self.tokenizer.encode_batch([samples[k].text for k in chosen], add_special_tokens=special)
                for k, encoding in zip(chosen, encodings):
                    out[k] = encoding
        return out  # type: ignore[return-value]

    def label(self, samples: Sequence[Rendered], encodings: Sequence[Encoding]) -> list[Encoded]:
        return [_label(encoding, sample) for encoding, sample in zip(encodings, samples)]

    def pipelined(self, chunks: Iterable[list[tuple[T, Rendered]]]) -> Iterator[tuple[list[tuple[T, Rendered]], list[Encoded]]]:
        """``(chunk, encoded)`` for each chunk of ``(key, rendered)`` pairs, in order. A chunk is
        tokenised in a thread while the caller renders the next one and this labels the one before:
        ``encode_batch`` lets go of the GIL, so the Python half of a build runs beside the Rust half
        (wall time, at most two chunks' encodings alive)."""
        with ThreadPoolExecutor(1, thread_name_prefix="tokenize") as pool:
            waiting: deque = deque()
            for chunk in chunks:
                waiting.append((chunk, pool.submit(self.tokenize, [rendered for _, rendered in chunk])))
                if len(waiting) == 2:
                    done, future = waiting.popleft()
                    yield done, self.label([rendered for _, rendered in done], future.result())
            for done, future in waiting:
                yield done, self.label([rendered for _, rendered in done], future.result())


def _label(encoding: Encoding, sample: Rendered) -> Encoded:
    """Mark each token whose characters overlap a learned span; the post-processor's tokens: the
    closing ones are learned when a span reaches the text's end, the opening ones when the whole text is."""
    ids = encoding.ids
    offsets = np.fromiter(chain.from_iterable(encoding.offsets), dtype=np.int64, count=2 * len(ids)).reshape(-1, 2)
    if sample.special:  # the post-processor's tokens have no sequence
        content = np.array([sequence is not None for sequence in encoding.sequence_ids], dtype=bool)
    else:
        content = np.ones(len(ids), dtype=bool)
    spans = np.array(sorted(sample.spans), dtype=np.int64).reshape(-1, 2)
    # the first span that ends after the token starts; the token overlaps it when it starts before the token ends
    first = np.searchsorted(spans[:, 1], offsets[:, 0], side="right")
    found = first < len(spans)
    learned = found & (spans[np.minimum(first, len(spans) - 1), 0] < offsets[:, 1]) & content
    head = int(np.argmax(content)) if content.any() else len(ids)
    tail = len(ids) - head - int(content.sum())
    if len(spans) and not content.all():
        to_end = int(spans[:, 1].max()) >= len(sample.text)
        whole = to_end and int(spans[:, 0].min()) == 0
        learned[:head] = whole
        learned[len(ids) - tail :] = to_end
    return Encoded(ids, learned, tail)


def cut(encoded: Encoded, max_length: int) -> tuple[list[int], np.ndarray]:
    """``encoded`` cut to ``max_length`` ids from the end of its content, its closing post-processor
    tokens kept; a closing token after a cut-off learned part is not learned (the model would learn
    to stop mid-answer)."""
    ids, learned, tail = encoded
    if len(ids) <= max_length:
        return ids, learned
    keep = max(max_length - tail, 0)
    lost = bool(learned[keep : len(ids) - tail].any())
    ids = ids[:keep] + ids[len(ids) - tail :][: max_length - keep]
    learned = np.concatenate([learned[:keep], learned[len(learned) - tail :][: max_length - keep] & (not lost)])
    return ids, learned
