"""Rows of instruction data, checked: chat messages, prompt/completion pairs or plain text.

    for row in read_records("chat.jsonl"):
        row.where, row.record    # "chat.jsonl line 3", {"messages": [...]}
    check_record(row.record, row.where)   # -> Sample("chat", messages, None) or a DataError

The formats are TRL's (``SFTTrainer``): ``{"messages": [{"role", "content"}, ...]}``,
``{"prompt", "completion"}`` as two strings or as two lists of messages (conversational), and
``{"text"}``. Sources: ``.jsonl`` (a JSON object a line), ``.csv`` (``prompt``/``completion`` or
``text`` columns), Parquet files, lists and globs of them, and a Hugging Face ``datasets.Dataset``.
A problem with a row is a :class:`recipes.core.DataError` naming the file and line (or row).
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from recipes.core import DataError, parquet, storage
from recipes.text.chat.template_budget import conversation_chars

FORMATS = (".jsonl", ".csv", ".parquet")
ROLES = ("system", "developer", "user", "assistant", "tool")  # the OpenAI / transformers message roles
FIELDS = ("messages", "prompt", "completion", "text")  # what a row may hold; Parquet reads only these
SKIP_HINT = "or pass on_error='skip' to drop the row"


@dataclass
class Row:
    """One raw row: where it is (``"chat.jsonl line 3"``), its line or row number, and its fields."""

    where: str
    number: int
    record: Any


@dataclass
class Sample:
    """A checked row: its ``kind`` ("chat", "prompt", "text"), messages or texts, and for a
    conversational prompt/completion the completion's messages."""

    kind: str
    prompt: Any  # chat: the messages; prompt: the prompt (text or messages); text: the text
    completion: Any = None  # prompt: the completion (text or messages)


def source_name(source: Any) -> str:
    """What messages call ``source``: a file (no credentials), or the Dataset."""
    if isinstance(source, (str, os.PathLike)):
        return storage.shown(source)
    return f"datasets.Dataset ({source.num_rows} rows)" if hasattr(source, "num_rows") else type(source).__name__


def read_records(source: Any, storage_options: dict[str, Any] | None = None) -> tuple[str, Iterator[Row]]:
    """``(line name, rows)``: "line" or "row", and the rows of a JSONL, CSV or Parquet source in order.

    Raises:
        ValueError: a suffix that is none of :data:`FORMATS`.
        FileNotFoundError: a local file that does not exist.
    """
    if parquet.is_parquet(source):
        return "row", _parquet_rows(source, storage_options)
    kind = storage.suffix(source)
    if kind not in (".jsonl", ".csv"):
        raise ValueError(f"{storage.shown(source)}: instruction data is read from {', '.join(FORMATS)} or a datasets.Dataset, "
                         f"not {kind or 'a file without a suffix'}")
    data = storage.read_bytes(source, storage_options)
    name = storage.basename(source)
    return "line", (_jsonl_rows(name, data) if kind == ".jsonl" else _csv_rows(name, data))


def _jsonl_rows(name: str, data: bytes) -> Iterator[Row]:
    for number, raw in enumerate(data.split(b"\n"), start=1):
        where = f"{name} line {number}"
        try:
            line = raw.removesuffix(b"\r").decode("utf-8").removeprefix("\ufeff")
        except UnicodeDecodeError as error:
            yield Row(where, number, DataError(f"{where}: not valid UTF-8 (at column {error.start}); re-encode "
                                               "the file as UTF-8", skip_hint=SKIP_HINT))
            continue
        if not line.strip():
            continue  # blank lines hold no sample
        try:
            yield Row(where, number, json.loads(line))
        except (ValueError, RecursionError) as error:  # JSONDecodeError is a ValueError
            yield Row(where, number, DataError(f"{where}: not valid JSON ({str(error)[:120]})", skip_hint=SKIP_HINT))


def _csv_rows(name: str, data: bytes) -> Iterator[Row]:
    reader = csv.DictReader(io.StringIO(data.decode("utf-8", "surrogateescape"), newline=""))
    columns = reader.fieldnames or []
    if not ({"prompt", "completion"} <= set(columns) or "text" in columns):
        raise DataError(f"{name}: the header has neither 'prompt' and 'completion' nor 'text' columns "
                        f"(columns: {columns}); rename them")
    number = reader.line_num + 1
    for record in reader:
        yield Row(f"{name} line {number}", number, {key: value for key, value in record.items() if key in FIELDS})
        number = reader.line_num + 1  # a quoted field may span several physical lines


def _parquet_rows(source: Any, storage_options: dict[str, Any] | None) -> Iterator[Row]:
    entries = parquet.parquet_entries(source, storage_options)
    columns = [column for column in FIELDS if column in parquet.columns_of(entries[0], storage_options)]
    if not columns:
        found = parquet.columns_of(entries[0], storage_options)
        raise DataError(f"{source_name(source)}: no instruction column ({', '.join(FIELDS)}) among {found}")
    sizes = parquet.row_counts(entries, storage_options)
    for number, where, record in parquet.iter_rows(entries, columns, sizes, storage_options=storage_options):
        yield Row(where, number, {key: value for key, value in record.items() if value is not None})


def check_record(record: Any, where: str) -> Sample:
    """The sample a row holds, or a DataError naming ``where`` and what is wrong."""
    if isinstance(record, DataError):
        raise record
    if not isinstance(record, dict):
        raise DataError(f"{where}: a row is a JSON object, got {type(record).__name__}", skip_hint=SKIP_HINT)
    if "messages" in record:
        return Sample("chat", check_messages(record["messages"], where, "messages"))
    if "prompt" in record or "completion" in record:
        prompt, completion = record.get("prompt"), record.get("completion")
        if isinstance(prompt, str) and isinstance(completion, str):
            return Sample("prompt", prompt, completion)
        if isinstance(prompt, list) and isinstance(completion, list):
            return Sample("prompt", check_messages(prompt, where, "prompt"),
                          check_messages(completion, where, "completion"))
        raise DataError(f"{where}: 'prompt' and 'completion' must both be strings or both lists of messages, got "
                        f"{type(prompt).__name__} and {type(completion).__name__}", skip_hint=SKIP_HINT)
    if isinstance(record.get("text"), str):
        return Sample("text", record["text"])
    raise DataError(f"{where}: no instruction fields (one of 'messages', 'prompt' + 'completion', 'text'); the row "
                    f"has {sorted(record)}", skip_hint=SKIP_HINT)


def check_row_size(sample: Sample, where: str, max_chars: int | None) -> None:
    """A DataError if the texts of ``sample`` hold more than ``max_chars`` characters (None: no limit)."""
    if max_chars is None:
        return
    size = conversation_chars((sample.prompt, sample.completion))
    if size > max_chars:
        raise DataError(f"{where}: the row's texts hold {size:,} characters, over read_options.max_line_chars="
                        f"{max_chars:,}; a row is rendered and tokenised whole (about 100 bytes a character, "
                        "whatever max_length): pass read_options=ReadOptions(max_line_chars=...) to raise the limit",
                        skip_hint=SKIP_HINT)


def check_messages(messages: Any, where: str, field: str) -> list[dict[str, Any]]:
    """``messages`` if it is a non-empty list of ``{"role", "content"}`` objects with known roles."""
    if not isinstance(messages, list) or not messages:
        what = "an empty conversation" if isinstance(messages, list) else f"not a list ({type(messages).__name__})"
        raise DataError(f"{where}: {field!r} is {what}", skip_hint=SKIP_HINT)
    for position, message in enumerate(messages):
        if not isinstance(message, dict):
            raise DataError(f"{where}: {field}[{position}] is not an object", skip_hint=SKIP_HINT)
        role = message.get("role")
        if role not in ROLES:
            raise DataError(f"{where}: {field}[{position}] has the unknown role {role!r}; roles are {', '.join(ROLES)}",
                            skip_hint=SKIP_HINT)
        content = message.get("content")
        if not isinstance(content, (str, list)) and not (role == "assistant" and message.get("tool_calls")):
            got = "no 'content'" if content is None else f"a {type(content).__name__} 'content'"
            raise DataError(f"{where}: {field}[{position}] ({role}) has {got}; a message needs its text",
                            skip_hint=SKIP_HINT)
    return messages
