"""Label columns read from Arrow buffers give the rows that Python lists give, nulls included."""

import numpy as np
import pyarrow as pa
import pytest

from recipes.text.chat.instruction_ids import _lists

ROWS = [[1, -100, 3], None, [], [4, None, 6], [-100] * 5, [7]]


def _expected(rows):
    return [None if row is None or None in row else np.asarray(row, dtype=np.int64) for row in rows]


def _same(got, expected):
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        assert (a is None and b is None) or (a is not None and b is not None and np.array_equal(np.asarray(a), b))


@pytest.mark.parametrize("kind", [pa.list_(pa.int64()), pa.list_(pa.int32()), pa.large_list(pa.int16()),
                                  pa.list_(pa.uint8())])
def test_list_columns_of_any_integer_type_read_as_the_python_rows(kind):
    rows = ROWS if not pa.types.is_unsigned_integer(kind.value_type) else [[1, 0, 3], None, [], [4, None, 6]]
    array = pa.array(rows, type=kind)
    _same(_lists(array), _expected(rows))
    _same(_lists(array.slice(2)), _expected(rows[2:]))  # a sliced array keeps its own offset
    chunked = pa.chunked_array([array.slice(0, 3), array.slice(3)])
    _same(_lists(chunked), _expected(rows))


def test_masks_of_booleans_and_labels_of_floats_read_as_their_values():
    _same(_lists(pa.array([[True, False], None, [False]])), _expected([[1, 0], None, [0]]))
    floats = _lists(pa.array([[1.0, -100.0], [2.0, None]]))
    assert floats[0] == [1.0, -100.0] and floats[1] is None
