import os
import warnings

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recipes.core.contracts.errors import DataError, SkippedSampleWarning, check_on_error, drop_skipped, skip_or_raise
from recipes.core.sources.paths import UnderRoot, check_relative, resolve_under


def test_check_on_error_lists_the_valid_choices():
    assert check_on_error("skip") == "skip"
    with pytest.raises(ValueError, match="raise.*skip"):
        check_on_error("ignore")


def test_raise_policy_raises_the_error_itself():
    with pytest.raises(DataError, match="a.jpg: bad"):
        skip_or_raise(DataError("a.jpg: bad"), "raise")


def test_skip_policy_warns_with_the_message_and_returns_none():
    with pytest.warns(SkippedSampleWarning, match="a.jpg: bad"):
        assert skip_or_raise(DataError("a.jpg: bad"), "skip") is None


def test_drop_skipped_keeps_order_of_the_rest():
    assert drop_skipped([1, None, 2, None, 3]) == [1, 2, 3]


def test_data_error_survives_rebuilding_from_its_message():
    # DataLoader's ExceptionWrapper rebuilds worker exceptions as exc_type(message)
    rebuilt = DataError("Caught DataError in worker\nimg/7.jpg: truncated")
    assert "img/7.jpg" in str(rebuilt) and isinstance(rebuilt, ValueError)


@pytest.mark.parametrize("name", ["../x.jpg", "a/../../x.jpg", "/etc/passwd", "C:\\x.jpg", "..\\x.jpg", "", "a\x00b"])
def test_check_relative_refuses_escapes(name):
    with pytest.raises(DataError):
        check_relative(name, source="ann.json, image id 3")


def test_check_relative_accepts_nested_relative_paths():
    assert check_relative("train/a b/ü.jpg") == "train/a b/ü.jpg"


def test_resolve_under_refuses_a_symlink_that_points_outside(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir(), outside.mkdir()
    (outside / "secret.jpg").write_bytes(b"x")
    os.symlink(outside / "secret.jpg", root / "link.jpg")
    with pytest.raises(DataError, match="outside the root"):
        resolve_under(root, "link.jpg")


def test_resolve_under_follows_a_symlink_that_stays_inside(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "a.jpg").write_bytes(b"x")
    os.symlink(tmp_path / "real", tmp_path / "alias")
    assert resolve_under(tmp_path, "alias/a.jpg") == (tmp_path / "real" / "a.jpg").resolve()


def test_resolve_under_names_the_source_in_errors(tmp_path):
    with pytest.raises(DataError, match="manifest.jsonl line 4"):
        resolve_under(tmp_path, "../x.jpg", source="manifest.jsonl line 4")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        resolve_under(tmp_path, "missing.jpg")  # a missing file is not a path error


def test_under_root_gives_resolve_unders_paths_and_refusals(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "real").mkdir(parents=True), outside.mkdir()
    (outside / "secret.jpg").write_bytes(b"x")
    (root / "real" / "a.jpg").write_bytes(b"x")
    os.symlink(root / "real", root / "alias")
    os.symlink(outside / "secret.jpg", root / "real" / "link.jpg")
    os.symlink(outside, root / "away")
    under = UnderRoot(root)
    for name in ("real/a.jpg", "alias/a.jpg", "real/missing.jpg", "top.jpg", "alias/a.jpg"):
        assert under(name) == str(resolve_under(root, name)), name
    for name, reason in (("real/link.jpg", "outside the root"), ("away/secret.jpg", "outside the root"),
                         ("../x.jpg", "escapes the dataset root"), ("/etc/passwd", "is absolute")):
        with pytest.raises(DataError, match=f"rows.csv line 2: .*{reason}"):
            under(name, source="rows.csv line 2")


def _pathlib_verdict(name):
    """The rule written with pathlib alone: what check_relative's fast path must agree with."""
    from pathlib import PurePosixPath, PureWindowsPath

    if not name or "\x00" in name:
        return False
    posix, windows = PurePosixPath(name), PureWindowsPath(name)
    if posix.is_absolute() or windows.is_absolute() or windows.drive:
        return False
    return ".." not in posix.parts and ".." not in windows.parts


@given(st.text(alphabet=st.sampled_from(list("ab./\\:.. \x00C")), max_size=12))
def test_the_fast_path_of_check_relative_agrees_with_pathlib(name):
    try:
        check_relative(name)
        accepted = True
    except DataError:
        accepted = False
    assert accepted == _pathlib_verdict(name), name
