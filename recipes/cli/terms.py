"""The library's messages in the command line's terms.

    in_cli_terms("a.jsonl line 1: no 'txt' field ...; pass text_field=... to name another")
    # -> "a.jsonl line 1: no 'txt' field ...; pass --text-field NAME to name another"

A message written for Python callers names keyword arguments (``text_field=...``,
``on_error='skip'``); under ``recipes`` the same hint names the flag that sets that argument.
"""

from __future__ import annotations

import re
import sys
from typing import Any, TextIO

# keyword argument -> the flag that sets it (recipes/__main__.py); arguments without a flag stay as they are
FLAGS = {
    "text_field": "--text-field NAME",
    "label_field": "--label-field NAME",
    "image_field": "--image-field NAME",
    "caption_field": "--caption-field NAME",
    "image_root": "--image-root DIR",
    "max_length": "--max-length N",
    "tokenizer": "--tokenizer FILE",
}
_KEYWORD = re.compile(r"\b([a-z_]+)=\.\.\.")
_ON_ERROR = re.compile(r"""\bon_error=["']skip["']""")


def in_cli_terms(message: str) -> str:
    """``message`` with each ``keyword=...`` that has a flag replaced by the flag, and
    ``on_error='skip'`` by ``--on-error skip``."""
    message = _ON_ERROR.sub("--on-error skip", message)
    return _KEYWORD.sub(lambda match: FLAGS.get(match[1], match[0]), message)


def show_warning(command: str) -> Any:
    """A ``warnings.showwarning`` that prints ``recipes COMMAND: warning: ...`` in the CLI's terms,
    without the file and line of the library code that warned."""

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: TextIO | None = None, line: str | None = None) -> None:
        print(f"recipes {command}: warning: {in_cli_terms(str(message))}", file=file or sys.stderr)

    return show
