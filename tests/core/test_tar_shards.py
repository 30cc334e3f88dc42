"""The WebDataset sample layout shared by the shard reader and writer: keys, caption members."""

import pytest

from recipes.core.errors import DataError
from recipes.core.tar_shards import caption_member, read_captions, split_key


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("000042.jpg", ("000042", "jpg")),
        ("part1/000042.json", ("part1/000042", "json")),
        ("a.b/000.tar.gz.jpg", ("a.b/000", "tar.gz.jpg")),  # the key ends at the file name's first dot
        ("noext", ("noext", "")),
    ],
)
def test_the_key_ends_at_the_first_dot_of_the_file_name(name, expected):
    assert split_key(name) == expected


@pytest.mark.parametrize("captions", [["a cat"], ["a cat", "un chat noir", "猫"]], ids=["one", "several"])
def test_captions_written_as_a_member_read_back_the_same(captions):
    extension, data = caption_member(captions)
    assert extension == ("txt" if len(captions) == 1 else "json")
    assert read_captions({"jpg": b"", extension: data}, "s.tar:000") == captions


def test_a_txt_caption_wins_over_json_metadata():
    assert read_captions({"txt": b" a dog\n", "json": b'{"caption": "ignored"}'}, "s.tar:000") == ["a dog"]
    assert read_captions({"json": b'{"caption": "a dog", "url": "x"}'}, "s.tar:000") == ["a dog"]


@pytest.mark.parametrize(
    ("files", "reason"),
    [
        ({"jpg": b""}, "no caption"),
        ({"txt": b"\xff\xfe"}, "unreadable caption"),
        ({"json": b"{"}, "unreadable caption"),
        ({"json": b"[1]"}, "empty or missing caption"),
        ({"json": b'{"captions": []}'}, "empty or missing caption"),
        ({"txt": b"  "}, "empty or missing caption"),
        ({"json": b'{"captions": ["\\ud800"]}'}, "caption .* is not valid UTF-8"),
    ],
    ids=["none", "bad-utf8", "bad-json", "not-an-object", "empty-list", "blank", "lone-surrogate"],
)
def test_a_bad_caption_member_names_the_sample(files, reason):
    with pytest.raises(DataError, match=f"s.tar:000: {reason}"):
        read_captions(files, "s.tar:000")
