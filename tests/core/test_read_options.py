"""ReadOptions and StreamOrder refuse bad values by field; moved_keywords keeps an old keyword
working with one DeprecationWarning and shows the constructor as it is now."""

import inspect
import re
import warnings

import pytest

from recipes.core import ReadOptions, StreamOrder
from recipes.core.contracts.moved_keywords import moved_keywords
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


class Reader:
    def _init_other(self, path: str, *, other: int, read_options: ReadOptions | None = None) -> None:
        self.path, self.options, self.mode = path, read_options, f"other {other}"

    @moved_keywords("Reader", groups={"read_options": (ReadOptions, {"strict": "strict_decode"})},
                    mode=("from_other", _init_other, ("other",)))
    def __init__(self, path: str, *, read_options: ReadOptions | None = None) -> None:
        self.path, self.options, self.mode = path, read_options, "plain"


def test_an_old_keyword_goes_to_its_group_or_its_mode_with_one_warning_at_the_caller():
    assert list(inspect.signature(Reader.__init__).parameters) == ["self", "path", "read_options"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        reader = Reader("a", strict=True)
        line = inspect.currentframe().f_lineno - 1
    assert [(w.category, w.filename, w.lineno) for w in caught] == [(DeprecationWarning, __file__, line)]
    assert str(caught[0].message) == "Reader(strict=...) is deprecated: pass read_options=ReadOptions(strict_decode=...)"
    assert reader.options == ReadOptions(strict_decode=True) and reader.mode == "plain"
    with pytest.warns(DeprecationWarning) as both:
        other = Reader("b", other=3, strict=True)
    assert [str(w.message) for w in both] == [
        "Reader(strict=...) is deprecated: pass read_options=ReadOptions(strict_decode=...)",
        "Reader(..., other=...) is deprecated: use Reader.from_other(..., other=...)",
    ]
    assert other.mode == "other 3" and other.options == ReadOptions(strict_decode=True)
    with pytest.raises(TypeError, match=r"strict=\.\.\. and read_options=\.\.\. both given"):
        Reader("c", strict=True, read_options=ReadOptions())
    with pytest.raises(TypeError, match="unexpected keyword argument 'unknown'"):
        Reader("d", unknown=1)
    with pytest.raises(TypeError, match="takes the initialiser itself, not its name '_init_other'"):
        moved_keywords("Reader", mode=("from_other", "_init_other", ("other",)))  # called by no string
