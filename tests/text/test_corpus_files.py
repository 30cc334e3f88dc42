"""recipes.text.corpus_files: line numbers, blank lines, BOM and CRLF, CSV records, label numbering."""

import numpy as np
import pytest

from recipes.core.contracts.errors import DataError
from recipes.text.corpus_files import label_ids, parse_line, read_rows


def test_plain_lines_skip_blanks_and_keep_true_line_numbers(tmp_path):
    (tmp_path / "d.txt").write_bytes(b"\xef\xbb\xbfone\r\n\r\n \t\ntwo\nthree")
    rows = read_rows(tmp_path / "d.txt")
    assert rows.texts == ["one", "two", "three"] and rows.lines == [1, 4, 5] and rows.labels is None


def test_json_lines_read_the_named_fields(tmp_path):
    (tmp_path / "d.jsonl").write_text('{"body": "a", "y": 3}\n\n{"body": "b", "y": "4"}\n', encoding="utf-8")
    rows = read_rows(tmp_path / "d.jsonl", text_field="body", label_field="y")
    assert rows.texts == ["a", "b"] and rows.labels == [3, "4"] and rows.lines == [1, 3]


def test_csv_records_may_span_lines_and_are_numbered_where_they_start(tmp_path):
    (tmp_path / "d.csv").write_text('body,y\n"x, ""quoted""\nmore",a\nplain,b\n', encoding="utf-8")
    rows = read_rows(tmp_path / "d.csv", text_field="body", label_field="y")
    assert rows.texts == ['x, "quoted"\nmore', "plain"] and rows.lines == [2, 4]


def test_parse_line_returns_none_for_blank_lines_and_names_bad_json():
    assert parse_line(b"  \r\n", "f line 1", json_row=False) is None
    assert parse_line(b'{"text": "hi"}\n', "f line 2", json_row=True) == ("hi", None)
    with pytest.raises(DataError, match="f line 3: not valid JSON"):
        parse_line(b"{oops", "f line 3", json_row=True)


def test_integer_labels_stay_and_names_are_numbered_in_sorted_order():
    ids, names = label_ids([2, "7", -1])
    assert ids.tolist() == [2, 7, -1] and ids.dtype == np.int64 and names is None
    ids, names = label_ids(["pos", "neg", "pos", 3])
    assert names == ["3", "neg", "pos"] and ids.tolist() == [2, 1, 2, 0]


def test_a_wrong_label_field_lists_the_fields_in_json_lines_and_the_csv_header(tmp_path):
    (tmp_path / "d.jsonl").write_text('{"body": "a", "y": 3}\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"line 1: no 'z' field \(fields: \['body', 'y'\]\); pass label_field="):
        read_rows(tmp_path / "d.jsonl", text_field="body", label_field="z")
    (tmp_path / "d.csv").write_text("body,y\na,3\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"no column \['z'\] \(columns: \['body', 'y'\]\); pass label_field="):
        read_rows(tmp_path / "d.csv", text_field="body", label_field="z")
