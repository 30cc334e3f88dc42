"""Shared test set-up: the ``-k <domain>`` rule, the gpu marker, the fixtures folder, quick retries.

``pytest -k text`` must select exactly tests/text/. pytest's ``-k`` matches substrings of the
whole test id, so a test in tests/multimodal/ named ``test_text_...`` (or ``test_context``) would
leak into it. Collection therefore refuses any test whose id names a domain other than its own;
tests/core/ may name none.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from recipes.domains import DOMAINS
TESTS = Path(__file__).resolve().parent


def _own_domain(path: Path) -> str | None:
    parts = path.resolve().relative_to(TESTS).parts
    return parts[0] if parts and parts[0] in DOMAINS else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    offenders = []
    for item in items:
        own = _own_domain(Path(item.path))
        foreign = [d for d in DOMAINS if d != own and d in item.nodeid.lower()]
        # "multimodal" contains no other domain name, but guard the reverse anyway
        if foreign:
            offenders.append(f"{item.nodeid}  (names {', '.join(foreign)})")
    if offenders:
        raise pytest.UsageError(
            "test ids must not name another domain, or `pytest -k <domain>` selects them:\n  "
            + "\n  ".join(offenders)
        )
    if not torch.cuda.is_available():
        skip = pytest.mark.skip(reason="needs a CUDA device")
        for item in items:
            if item.get_closest_marker("gpu") is not None:
                item.add_marker(skip)


@pytest.fixture(scope="session")
def fixtures() -> Path:
    """The fixtures folder (the repo's, or one generated for a wheel install)."""
    from recipes.fixtures import fixtures_dir

    return fixtures_dir()


@pytest.fixture
def quick_retries(monkeypatch):
    """Transient faults are still retried, without the real backoff's seconds (0.1 s doubling with
    each fault in a row: ~3 s for one read that keeps failing). Forked workers inherit it."""
    from recipes.core.sources import storage

    for function in vars(storage).values():
        if "backoff" in (getattr(function, "__kwdefaults__", None) or {}):
            monkeypatch.setitem(function.__kwdefaults__, "backoff", 0.0001)


@pytest.fixture(scope="session")
def tokenizer(fixtures: Path):
    """The fixture BPE tokenizer (``fixtures/text/tokenizer.json``)."""
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(fixtures / "text" / "tokenizer.json"))
