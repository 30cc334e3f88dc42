"""Hypothesis strategies that break good data files the way real ones break, and the verdict.

    path.write_bytes(mutated_file(data, fixtures / "detection" / "instances.json"))
    load_or_data_error(lambda: read_instances(path, masks=False), path)

A parser given such a file must either load it or raise a DataError (a ValueError subclass)
that names the file. Anything else (TypeError, KeyError, IndexError, AttributeError,
OverflowError, RecursionError, a bare ValueError from numpy or json...) is a parser leaking its
internals, and fails the test.
"""

from __future__ import annotations

import copy
import json
import os
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from recipes.core.contracts.errors import DataError


def fuzz_settings(examples: int) -> settings:
    """Bounded runs (the suite stays fast); RECIPES_FUZZ_SCALE=10 runs ten times as many examples."""
    scale = float(os.environ.get("RECIPES_FUZZ_SCALE", "1"))
    return settings(max_examples=max(1, int(examples * scale)), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# Placeholders replaced in the serialized text: json.dumps cannot write these itself.
HUGE_INT, DEEP_NEST = "\x00huge-int\x00", "\x00deep-nest\x00"

VALUES = st.sampled_from([
    None, True, False, 0, -1, 3, 1.5, -7.25, float("nan"), float("inf"), float("-inf"),
    2**63, -(2**63) - 1, 10**30, HUGE_INT, DEEP_NEST,
    "", " ", "x", "Zoë\u202eevil\u0000", "\ud800", "../escape.jpg", "/etc/passwd", "C:\\x.jpg",
    [], {}, [1, 2, 3], [[1, 2]], {"a": 1}, {"id": 1}, ["a", None],
])
MUTATION = st.sampled_from(["descend", "descend", "descend", "delete", "replace"])
SNIPPETS = [b"", b",", b'"', b"\n", b"\r\n", b"\x00", b"\xff\xfe", b"\xc3", b"{", b"]", b"\\", b'""', b"\t", b" "]


def _mutate(node: Any, data: st.DataObject) -> Any:
    if isinstance(node, (dict, list)) and node:
        key = data.draw(st.sampled_from(list(node) if isinstance(node, dict) else range(len(node))))
        action = data.draw(MUTATION)
        if action == "descend":
            node[key] = _mutate(node[key], data)
        elif action == "delete":
            del node[key]
        else:
            node[key] = copy.deepcopy(data.draw(VALUES))  # never share one list between draws
        return node
    return copy.deepcopy(data.draw(VALUES))


def mutated_json(data: st.DataObject, doc: Any, most: int = 3) -> Any:
    """``doc`` (freshly parsed, so it may be edited in place) with 1..``most`` mutations."""
    for _ in range(data.draw(st.integers(1, most), label="mutations")):
        doc = _mutate(doc, data)
    return doc


def _dumps(value: Any, ascii_only: bool) -> bytes:
    text = json.dumps(value, ensure_ascii=ascii_only)  # NaN / Infinity as Python writes them
    text = text.replace(json.dumps(HUGE_INT), "9" * 5000).replace(json.dumps(DEEP_NEST), "[" * 50_000 + "]" * 50_000)
    return text.encode("utf-8", "surrogatepass")  # a lone surrogate becomes invalid UTF-8


def serialized(data: st.DataObject, doc: Any, *, lines: bool = False) -> bytes:
    """``doc`` as JSON (``lines=True``: a list as JSONL), then maybe cut short or spliced."""
    ascii_only = data.draw(st.booleans(), label="ascii")
    if lines and isinstance(doc, list):
        raw = b"".join(_dumps(row, ascii_only) + b"\n" for row in doc)
    else:
        raw = _dumps(doc, ascii_only)
    return spliced(data, raw)


def spliced(data: st.DataObject, raw: bytes) -> bytes:
    """``raw`` unchanged, truncated, or with a stray snippet inserted / a range deleted."""
    edit = data.draw(st.sampled_from(["none", "none", "truncate", "insert", "delete"]), label="edit")
    if edit == "none" or not raw:
        return raw
    at = data.draw(st.integers(0, len(raw) - 1), label="at")
    if edit == "truncate":
        return raw[:at]
    if edit == "insert":
        return raw[:at] + data.draw(st.sampled_from(SNIPPETS)) + raw[at:]
    return raw[:at] + raw[at + data.draw(st.integers(1, 40)) :]


def mutated_file(data: st.DataObject, source: Path) -> bytes:
    """The bytes of ``source`` broken by type: JSON and JSONL documents are mutated then serialized
    (and maybe cut), any other file gets 1..3 byte-level splices."""
    if source.suffix == ".jsonl":
        rows = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines()]
        return serialized(data, mutated_json(data, rows), lines=True)
    if source.suffix == ".json":
        return serialized(data, mutated_json(data, json.loads(source.read_bytes())))
    raw = source.read_bytes()
    for _ in range(data.draw(st.integers(1, 3), label="splices")):
        raw = spliced(data, raw)
    return raw


def load_or_data_error(load: Callable[[], Any], path: Path) -> Any:
    """Run ``load``; a DataError must name ``path``; any other exception propagates (the test fails)."""
    try:
        return load()
    except DataError as error:
        assert path.name in str(error), f"the error does not name the file: {error}"
        return None


@contextmanager
def quiet() -> Iterator[None]:
    """Silence warnings: skip warnings are expected here, and not what is being tested."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
