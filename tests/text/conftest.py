"""Fixtures the Parquet tests of this folder share."""

import json

import pytest


@pytest.fixture(scope="module")
def quiet_datasets():
    """Hugging Face datasets without its progress bars (imported here: only its users pay for it)."""
    import datasets

    datasets.disable_progress_bars()


@pytest.fixture(scope="module")
def rows(fixtures):
    """The fixture's labeled.jsonl rows, as dicts."""
    return [json.loads(line) for line in (fixtures / "text" / "labeled.jsonl").read_text(encoding="utf-8").splitlines()]
