"""The WebDataset sample layout shared by the shard reader and writer: keys, caption members."""

import io
import tarfile
import warnings

import pytest

from recipes.core.contracts.errors import DataError, SkippedSampleWarning
from recipes.core.streams import split_key
from recipes.multimodal.tar_shards import caption_member, read_captions, read_samples


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


def _tar(path, members, *, gz=False):
    """A tar (gzipped with ``gz``) holding these (name, data) members, in order."""
    with tarfile.open(path, "w:gz" if gz else "w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return str(path)


def _keys(samples):
    return [(key, sorted(files.items())) for _, (_, key, files) in samples]


def test_a_repeated_member_of_a_sample_is_refused_not_overwritten(tmp_path):
    shard = _tar(tmp_path / "dup.tar", [("000.jpg", b"i0"), ("000.txt", b"first"), ("000.TXT", b"second"),
                                       ("001.jpg", b"i1"), ("001.txt", b"one")])
    with pytest.raises(DataError, match=r"dup.tar: key '000' has two 'txt' members \(the second at byte 2,048\)"):
        list(read_samples([shard]))
    with pytest.warns(SkippedSampleWarning, match="dup.tar: key '000' has two 'txt'"):
        kept = _keys(read_samples([shard], on_error="skip"))
    assert kept == [("001", [("jpg", b"i1"), ("txt", b"one")])]  # the whole sample is dropped, not half of it


def test_a_key_that_comes_back_later_in_the_shard_is_refused(tmp_path):
    shard = _tar(tmp_path / "again.tar", [("000.jpg", b"i0"), ("000.txt", b"a"), ("001.jpg", b"i1"), ("001.txt", b"b"),
                                         ("000.jpg", b"i2"), ("000.txt", b"c")])
    with pytest.raises(DataError, match="again.tar: key '000' comes back at byte 4,096"):
        list(read_samples([shard]))
    with pytest.warns(SkippedSampleWarning, match="again.tar: key '000' comes back"):
        kept = _keys(read_samples([shard], on_error="skip"))
    assert kept == [("000", [("jpg", b"i0"), ("txt", b"a")]), ("001", [("jpg", b"i1"), ("txt", b"b")])]
    # keys that merely repeat across shards are other samples (the item key holds the shard's name)
    other = _tar(tmp_path / "other.tar", [("000.jpg", b"x")])
    assert [key for _, (_, key, _) in read_samples([other, _tar(tmp_path / "more.tar", [("000.jpg", b"y")])])] == ["000", "000"]


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
def test_resuming_after_a_dropped_duplicate_gives_the_rest_of_the_pass_exactly(tmp_path, gz):
    members = [("000.jpg", b"a"), ("001.jpg", b"b"), ("002.jpg", b"c"), ("000.jpg", b"d"), ("003.jpg", b"e"),
               ("003.jpg", b"f"), ("004.jpg", b"g")]
    shards = [_tar(tmp_path / f"s.tar{'.gz' if gz else ''}", members, gz=gz), _tar(tmp_path / "t.tar", members[:2])]
    with pytest.warns(SkippedSampleWarning):
        full = list(read_samples(shards, on_error="skip"))
    assert [key for _, (_, key, _) in full] == ["000", "001", "002", "004", "000", "001"]
    for at, (position, _) in enumerate(full):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SkippedSampleWarning)
            assert list(read_samples(shards, position, on_error="skip")) == full[at:]


@pytest.mark.parametrize("offset", [7, 512, 10**6], ids=["inside-a-header", "inside-data", "past-the-end"])
def test_a_resume_offset_where_no_member_starts_is_refused(tmp_path, offset):
    shard = _tar(tmp_path / "s.tar", [("000.jpg", b"a" * 600), ("001.jpg", b"b")])
    with pytest.raises(ValueError, match=f"s.tar: no tar member starts at the resume offset {offset:,}"):
        list(read_samples([shard], [0, offset], on_error="skip"))
