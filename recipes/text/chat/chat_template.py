"""Chat templates as models ship them: ``chat_template.jinja`` beside a ``tokenizer_config.json``, or its
``chat_template``.

    template = ChatTemplate.from_config("model_folder")   # or its tokenizer_config.json, or a .jinja file
    text, spans = template.render([{"role": "user", "content": "Hi"}], add_generation_prompt=True)

Rendering follows transformers' ``apply_chat_template`` (``transformers.utils.chat_template_utils``),
so a model sees in training the text it is prompted with at inference: the same sandboxed Jinja
environment (``ImmutableSandboxedEnvironment`` with ``trim_blocks`` and ``lstrip_blocks``, loop
controls), the same globals (``raise_exception``, ``strftime_now``, a ``tojson`` that does not
escape HTML, ``dict``, a ``namespace`` without underscore names), the special tokens passed as
variables, messages with their ``None`` fields dropped and reasoning fields aliased. Templates
come from model repositories and are untrusted code: the sandbox is why Jinja >= 3.1.6 is required,
and each row renders within a time and an output budget (:class:`RenderBudget`,
:mod:`recipes.text.chat.template_sandbox`). A malformed config is a ValueError naming the file and field.
``{% generation %}...{% endgeneration %}`` blocks are tracked as transformers tracks them: their
character spans come back with the text.
"""

from __future__ import annotations

import json
import os
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from recipes.text.chat.template_budget import RenderBudget, bounded
from recipes.text.chat.template_sandbox import compile_template

SPECIAL_TOKEN_FIELDS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
VOCABULARY_FIELDS = ("bos_token", "eos_token", "pad_token")  # tokens a sample holds: each must be one id
REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")  # transformers' names, the first one standard
MIN_JINJA = (3, 1, 6)  # older releases have known sandbox escapes
# a model folder's files, named as transformers names them (transformers.utils.hub)
CONFIG_FILE, TEMPLATE_FILE, TEMPLATES_DIR = "tokenizer_config.json", "chat_template.jinja", "additional_chat_templates"


class ChatTemplate:
    """A compiled chat template and the special tokens it is rendered with.

    Args:
        source: the Jinja template text.
        special_tokens: variables the template reads besides ``messages``: ``bos_token``,
            ``eos_token``... (what transformers passes from the tokenizer's special tokens).
        name: what messages call the template (its file, or "chat template").
        budget: what rendering one row may spend (:class:`RenderBudget`: seconds, output characters).
    """

    def __init__(self, source: str, special_tokens: dict[str, str] | None = None, *, name: str = "chat template",
                 budget: RenderBudget | None = None) -> None:
        if not isinstance(source, str) or not source:
            raise ValueError(f"{name}: a chat template is a non-empty Jinja string, got {type(source).__name__}")
        if budget is not None and not isinstance(budget, RenderBudget):
            raise TypeError(f"{name}: budget must be a RenderBudget, got {type(budget).__name__}")
        self.source, self.name = source, name
        self.special_tokens = dict(special_tokens or {})
        self.budget = RenderBudget() if budget is None else budget
        self.has_generation = _has_generation(source)
        self._template = _compile(source, name)

    @classmethod
    def from_config(cls, path: str | os.PathLike, *, name: str = "default", budget: RenderBudget | None = None) -> ChatTemplate:
        """The template a model ships, read as transformers' ``AutoTokenizer.from_pretrained`` reads it.

        ``path`` is a model folder, its ``tokenizer_config.json`` or a ``.jinja`` template file. The
        special tokens (``bos_token``, ``eos_token``...) come from the ``tokenizer_config.json`` of
        that folder. The template is the folder's ``chat_template.jinja`` (what ``save_pretrained``
        writes) and ``additional_chat_templates/*.jinja``, which win over the config's
        ``chat_template``, as in transformers; a ``.jinja`` path is its own text. Of several templates
        (``[{"name": ..., "template": ...}]`` or extra files) the one called ``name`` is given.
        ``budget``: the time and output each row may take to render (:class:`RenderBudget`).

        Raises:
            ValueError: the config is not a JSON object, or a field has the wrong shape (named).
        """
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"chat template {path} does not exist (expected a model folder, its "
                                    f"{CONFIG_FILE} or a .jinja file)")
        folder = path if path.is_dir() else path.parent
        config_path = path if path.is_file() and path.suffix != ".jinja" else folder / CONFIG_FILE
        config = _read_config(config_path) if config_path.is_file() else {}
        if path.suffix == ".jinja":
            template, where = _read_text(path), path
        elif shipped := _shipped_templates(folder):
            template, where = shipped, folder
        else:
            template, where = config.get("chat_template"), config_path
        if isinstance(template, list):
            template = _named_template(where, template, name)
        elif isinstance(template, dict):
            if name not in template:
                raise ValueError(f"{where}: no chat template called {name!r}; it has {sorted(map(str, template))}")
            template = template[name]
        if template is None:
            raise ValueError(f"{where}: no chat template (a 'chat_template' string in {CONFIG_FILE} or a "
                             f"{TEMPLATE_FILE}); pass the template text as template=... instead")
        if not isinstance(template, str):
            raise ValueError(f"{where}: field 'chat_template' is a {type(template).__name__}, not a template string; "
                             "pass the template text as template=... instead")
        tokens = {field: _token_text(config_path, field, config[field]) for field in SPECIAL_TOKEN_FIELDS
                  if config.get(field) is not None}
        return cls(template, tokens, name=str(where), budget=budget)

    @property
    def eos_token(self) -> str | None:
        """The end-of-sequence token the config names, or None."""
        return self.special_tokens.get("eos_token")

    def render(self, messages: list[dict[str, Any]], *, add_generation_prompt: bool = False) -> tuple[str, list[tuple[int, int]]]:
        """``(text, spans)``: the rendered conversation and the ``(start, end)`` characters of each
        ``{% generation %}`` block in it (none without such blocks).

        Raises:
            jinja2.TemplateError: the template raised (``raise_exception``) or failed.
            recipes.text.chat.template_sandbox.TemplateBudgetError: past the time or output budget.
            Exception: any other error the template's code raised (``{{ 1/0 }}``).
        """
        chat = [_plain_message(message) for message in messages]
        variables = {**self.special_tokens, "messages": chat, "tools": None, "documents": None,
                     "add_generation_prompt": add_generation_prompt}
        with bounded(self.budget, chat) as spent:  # a row's own block, where one is open
            spent.produced = 0  # the output budget is each render's
            if not self.has_generation:
                return self._template.render(**variables), []
            blocks: list[str] = []
            spans: list[tuple[int, int]] = []
            token = _TRACKING.set((blocks, spans))
            try:
                for block in self._template.generate(**variables):
                    blocks.append(block)
            finally:
                _TRACKING.reset(token)
            return "".join(blocks), spans

    def bounded(self, messages: Any) -> Any:
        """A block whose renders share one row's budget, scaled to ``messages`` (a conversation, or a
        prompt and completion): :func:`recipes.text.chat.template_sandbox.bounded`."""
        return bounded(self.budget, messages)

    def __repr__(self) -> str:
        return f"ChatTemplate({self.name}, {len(self.source)} characters)"

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_template")  # compiled Jinja does not pickle; workers compile it again
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._template = _compile(self.source, self.name)


def load_template(template: ChatTemplate | str | os.PathLike | None) -> ChatTemplate | None:
    """A :class:`ChatTemplate` as is, Jinja text compiled, or a path read by :meth:`ChatTemplate.from_config`
    (a model folder, its ``tokenizer_config.json`` or a ``.jinja`` file)."""
    if template is None or isinstance(template, ChatTemplate):
        return template
    if isinstance(template, str) and ("{%" in template or "{{" in template):
        return ChatTemplate(template)
    if isinstance(template, (str, os.PathLike)):
        return ChatTemplate.from_config(template)
    raise TypeError("template must be a model folder, a tokenizer_config.json or .jinja path, Jinja text or a "
                    f"ChatTemplate, got {type(template).__name__}")


def _read_config(path: Path) -> dict[str, Any]:
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as error:  # JSONDecodeError is a ValueError
        raise ValueError(f"{path}: not a JSON tokenizer config ({type(error).__name__}: {str(error)[:120]}); a "
                         "template file ends in .jinja") from None
    if not isinstance(config, dict):
        raise ValueError(f"{path}: a tokenizer config is a JSON object, got a {type(config).__name__}")
    return config


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not UTF-8 text") from None


def _shipped_templates(folder: Path) -> str | dict[str, str] | None:
    """The template files of a model folder as transformers reads them: ``chat_template.jinja`` alone is
    the template; with ``additional_chat_templates/<name>.jinja`` they are named, it ``"default"``."""
    files = {"default": folder / TEMPLATE_FILE} if (folder / TEMPLATE_FILE).is_file() else {}
    files |= {file.stem: file for file in sorted((folder / TEMPLATES_DIR).glob("*.jinja"))}
    templates = {template_name: _read_text(file) for template_name, file in files.items()}
    return templates["default"] if list(templates) == ["default"] else templates or None


def _token_text(path: Path, field: str, token: Any) -> str:
    """A config's special token: its text, or a serialised AddedToken ``{"content": ...}``."""
    if isinstance(token, dict) and isinstance(token.get("content"), str):
        return token["content"]
    if isinstance(token, str):
        return token
    raise ValueError(f"{path}: field {field!r} is {json.dumps(token)[:80]}, not a token (its text, or an object with "
                     "a 'content' string)")


def _named_template(path: Path, templates: list[Any], name: str) -> Any:
    """The template called ``name`` in a config's list of ``{"name", "template"}`` entries."""
    for position, entry in enumerate(templates):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise ValueError(f"{path}: field 'chat_template'[{position}] is not a {{\"name\", \"template\"}} object")
    named = {entry["name"]: entry.get("template") for entry in templates}
    if name not in named:
        raise ValueError(f"{path}: no chat template called {name!r}; it has {sorted(named)}")
    return named[name]


def check_special_tokens(template: ChatTemplate | None, tokenizer: Any) -> None:
    """Raise a ValueError naming the config and field for a ``bos_token``, ``eos_token`` or
    ``pad_token`` that is not one id of ``tokenizer``: a sample would hold it as text, spelled out."""
    if template is None or tokenizer is None:
        return
    for field in VOCABULARY_FIELDS:
        token = template.special_tokens.get(field)
        if token is not None and tokenizer.token_to_id(token) is None:
            raise ValueError(f"{template.name}: field {field!r} is {token!r}, which is not in the tokenizer's "
                             "vocabulary; the config and the tokenizer come from different models")


def _plain_message(message: dict[str, Any]) -> dict[str, Any]:
    """The message as transformers hands it to the template: ``None`` fields dropped (a template
    tests ``'x' in message``), reasoning under each of its names."""
    plain = {key: value for key, value in message.items() if value is not None}
    reasoning = next((plain[key] for key in REASONING_FIELDS if key in plain), None)
    if reasoning is not None:
        plain = {"thinking": reasoning, **plain, "reasoning_content": reasoning}
    return plain


def _has_generation(source: str) -> bool:
    import re

    return re.search(r"\{\%-?\s*generation\s*-?\%\}", source) is not None


# (blocks rendered so far, generation spans) of the render in progress in this thread, or None
_TRACKING: ContextVar[tuple[list[str], list[tuple[int, int]]] | None] = ContextVar("recipes_chat_tracking", default=None)


def _compile(source: str, name: str) -> Any:
    """The template compiled in transformers' sandboxed environment (see the module docstring),
    metered against each row's budget (:mod:`recipes.text.chat.template_sandbox`)."""
    import jinja2
    import jinja2.ext

    if tuple(int(part) for part in jinja2.__version__.split(".")[:3] if part.isdigit()) < MIN_JINJA:
        raise ImportError(f"chat templates need jinja2 >= 3.1.6 (sandbox fixes), found {jinja2.__version__}: "
                          "pip install -U jinja2")

    class Generation(jinja2.ext.Extension):
        """``{% generation %}``: records the block's characters, counted as transformers counts them
        (from the top-level blocks rendered before it)."""

        tags = {"generation"}

        def parse(self, parser: Any) -> Any:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_track"), [], [], body).set_lineno(lineno)

        def _track(self, caller: Any) -> str:
            text = caller()
            tracking = _TRACKING.get()
            if tracking is not None:
                blocks, spans = tracking
                start = sum(map(len, blocks))
                spans.append((start, start + len(text)))
            return text

    return compile_template(source, name, [Generation])
