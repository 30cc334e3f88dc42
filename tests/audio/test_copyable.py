"""The audio folder is the unit to copy: each file imports only the core and its own folder."""

from pathlib import Path

import recipes
from tests.harness import assert_domain_imports

FOLDER = Path(recipes.__file__).resolve().parent / "audio"


def test_every_file_imports_only_the_core_and_its_own_folder():
    paths = sorted(FOLDER.glob("*.py"))
    assert len(paths) >= 5
    for path in paths:
        assert_domain_imports(path)
