"""recipes.core.sources.index_cache: an index is built once per identity, read back equal, rebuilt when damaged."""

import numpy as np
import pytest

from recipes.core.sources.disk_cache import DiskCache
from recipes.core.sources.index_cache import cached_index, file_identities, load_index, save_index


def test_an_index_is_built_once_per_identity_and_a_damaged_copy_is_built_again(tmp_path):
    built = []

    def build():
        built.append(1)
        return {"counts": np.arange(5, dtype=np.int64)}

    data = tmp_path / "data.bin"
    data.write_bytes(b"abc")
    identity = file_identities([data])
    first, second = (cached_index(tmp_path / "cache", "lines", identity, build) for _ in range(2))
    assert len(built) == 1 and np.array_equal(first["counts"], second["counts"])
    (stored,) = (tmp_path / "cache").iterdir()
    stored.write_bytes(b"not an npz")
    assert np.array_equal(cached_index(tmp_path / "cache", "lines", identity, build)["counts"], np.arange(5))
    data.write_bytes(b"abcd")  # another size: another index
    cached_index(tmp_path / "cache", "lines", file_identities([data]), build)
    assert len(built) == 3 and len(list((tmp_path / "cache").iterdir())) == 2


def test_an_index_saved_again_replaces_the_last_and_a_missing_one_loads_as_none(tmp_path):
    assert load_index(tmp_path, "headers", ["m", 1]) is None
    save_index(tmp_path, "headers", ["m", 1], {"sizes": np.arange(3)})
    save_index(tmp_path, "headers", ["m", 1], {"sizes": np.arange(4), "rates": np.ones(4)})
    stored = load_index(tmp_path, "headers", ["m", 1])
    assert np.array_equal(stored["sizes"], np.arange(4)) and len(list(tmp_path.iterdir())) == 1
    assert load_index(tmp_path, "headers", ["m", 2]) is None


def test_an_empty_folder_name_is_refused_for_every_cache_not_read_as_the_current_directory():
    with pytest.raises(ValueError, match="index_dir='' names no folder"):
        cached_index("", "lines", [], lambda: {})
    with pytest.raises(ValueError, match="cache_dir=' ' names no folder"):
        DiskCache(" ")


def test_a_url_is_refused_for_every_cache_not_made_a_local_folder_named_after_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"index_dir='s3://bucket/index' is a URL; a cache is kept on a local disk"):
        cached_index("s3://user:secret@bucket/index?sig=1", "lines", [], lambda: {})
    with pytest.raises(ValueError, match="cache_dir='https://host/cache' is a URL"):
        DiskCache("https://host/cache")
    assert list(tmp_path.iterdir()) == []
