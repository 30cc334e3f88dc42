"""ReadOptions and StreamOrder refuse bad values by field."""

import re

import pytest

from recipes.core import ReadOptions, StreamOrder
from recipes.core.contracts.read_options import read_options_or_default


@pytest.mark.parametrize("field", ["cache_limit_bytes", "max_row_group_bytes", "max_line_chars", "vocab_size"])
@pytest.mark.parametrize("value", [0, -1, 1.5, True])
def test_a_size_bound_must_be_a_positive_int(field, value):
    with pytest.raises(ValueError, match=rf"ReadOptions.{field} must be a positive int"):
        ReadOptions(**{field: value})


def test_a_truncation_must_be_one_the_tokens_module_knows():
    from recipes.core.tokens.truncation import TRUNCATIONS

    assert ReadOptions(truncation="slice").truncation == "slice"
    with pytest.raises(ValueError, match=re.escape(f"ReadOptions.truncation must be one of {TRUNCATIONS}, got 'cut'")):
        ReadOptions(truncation="cut")


def test_durations_come_from_the_headers_or_the_manifest():
    assert ReadOptions().durations == "headers" and ReadOptions(durations="manifest").durations == "manifest"
    with pytest.raises(ValueError, match=r"ReadOptions.durations must be one of \('headers', 'manifest'\), got 'guess'"):
        ReadOptions(durations="guess")


@pytest.mark.parametrize("value", [-1, 2.0, False])
def test_a_shuffle_buffer_must_be_an_int_of_at_least_zero(value):
    with pytest.raises(ValueError, match=r"StreamOrder.shuffle_buffer must be an int >= 0"):
        StreamOrder(shuffle_buffer=value)


def test_options_are_frozen_and_a_field_a_reader_ignores_is_refused():
    options = ReadOptions(strict_decode=True)
    with pytest.raises(AttributeError):
        options.strict_decode = False
    assert read_options_or_default(None, "Reader", ("strict_decode",)) == ReadOptions()
    assert read_options_or_default(options, "Reader", ("strict_decode",)) is options
    with pytest.raises(ValueError, match=r"Reader does not read read_options.strict_decode; it reads only truncation"):
        read_options_or_default(options, "Reader", ("truncation",))
    with pytest.raises(TypeError, match="read_options must be a recipes.core.ReadOptions, got dict"):
        read_options_or_default({"strict_decode": True}, "Reader", ("strict_decode",))

