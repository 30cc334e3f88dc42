"""LineIndex: files listed and sized, equal shares by line count, and the lines each share reads."""

import pytest

from recipes.text.line_index import LineIndex


@pytest.fixture
def files(tmp_path):
    (tmp_path / "a.txt").write_bytes(b"one\n\ntwo\nthree")  # a blank line, a last line without a newline
    (tmp_path / "b.jsonl").write_bytes(b'{"t": "x"}\n{"t": "y"}\n')
    return tmp_path


@pytest.mark.parametrize("slots", [1, 3, 7])
def test_the_shares_read_every_line_once_in_order_at_its_byte_offset(files, slots):
    paths, sizes, index = LineIndex.of_files([files / "*.*"])
    assert [path.name for path in paths] == ["a.txt", "b.jsonl"] and sizes == [14, 22]
    expected, base = [], 0  # the oracle: Python's own split of each file, offsets in the files laid end to end
    for path in paths:
        data = path.read_bytes()
        for line in data.splitlines(keepends=True):
            expected.append((base, line))
            base += len(line)
    shares = [[(offset, raw) for offset, _, _, raw in index.share_lines(slot, slots, paths)] for slot in range(slots)]
    assert [line for share in shares for line in share] == expected
    assert max(map(len, shares)) - min(map(len, shares)) <= 1  # equal by count, give or take one


def test_a_resumed_offset_inside_a_line_is_refused_by_file_and_byte(files):
    paths, _, index = LineIndex.of_files([files / "a.txt"])
    assert [raw for _, _, _, raw in index.share_lines(0, 1, paths, begin=4)] == [b"\n", b"two\n", b"three"]
    with pytest.raises(ValueError, match=r"^Reader state: position\[1\] \(offset\) = 2 is not where a line of .*a.txt"):
        list(index.share_lines(0, 1, paths, begin=2, owner="Reader"))
