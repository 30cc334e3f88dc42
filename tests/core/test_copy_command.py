"""`recipes copy DOMAIN DEST`: import statements of the copied domain and the docstrings' import examples
are the only text it changes, an existing copy is never overwritten, an unknown domain lists the four."""

import pytest

from recipes.__main__ import main
from recipes.cli.copy import installed_imports, rewrite_imports
from recipes.domains import DOMAINS

SOURCE = '''"""Use it as ``from recipes.detection import CocoDataset``."""

from __future__ import annotations

import recipes.detection.coco_index as index  # from recipes.detection.x import y stays in this comment
from recipes.core.contracts.errors import DataError
from recipes.detection.coco_files import (
    read_instances,
)
from recipes.detectionary import other
from recipes.text.corpus_files import is_unicode

EXAMPLE = "from recipes.detection.coco import CocoDataset"


def late():
    """Or ``import recipes.detection.coco as coco``; not ``recipes.detection`` in prose."""
    if True:
        from recipes.detection import loader
    x = 1; from recipes.detection.evaluate import evaluate
    return "é", loader, evaluate
'''

REWRITTEN = {  # before -> after: the import statements, and the import examples in docstrings
    '"""Use it as ``from recipes.detection import': '"""Use it as ``from detection import',
    "Or ``import recipes.detection.coco as": "Or ``import detection.coco as",
    "import recipes.detection.coco_index as": "import detection.coco_index as",
    "from recipes.detection.coco_files import (": "from detection.coco_files import (",
    "        from recipes.detection import loader": "        from detection import loader",
    "x = 1; from recipes.detection.evaluate": "x = 1; from detection.evaluate",
}
EXPECTED = SOURCE
for before, after in REWRITTEN.items():
    assert SOURCE.count(before) == 1, before
    EXPECTED = EXPECTED.replace(before, after)


def test_only_imports_and_docstring_examples_of_the_copied_domain_change():
    assert rewrite_imports(SOURCE, "detection") == EXPECTED
    assert rewrite_imports(SOURCE, "multimodal") == SOURCE  # another domain's imports stay installed


def test_a_column_after_non_ascii_characters_is_counted_in_characters_not_bytes():
    source = 'name = "ééé"; from recipes.vision.folder import ImageFolderDataset\n'
    assert rewrite_imports(source, "vision") == 'name = "ééé"; from vision.folder import ImageFolderDataset\n'


@pytest.mark.parametrize("statement", ["import recipes.vision.folder", "from recipes import vision"],
                         ids=["bare-import", "package-attribute"])
def test_an_import_the_copy_cannot_point_at_itself_is_refused_with_its_line(statement):
    with pytest.raises(ValueError, match=r"folder\.py, line 2: .*"):
        rewrite_imports(f"import os\n{statement}\n", "vision", name="folder.py")


def test_what_the_copy_needs_lists_installed_modules_outside_its_domain():
    assert installed_imports(SOURCE, "detection") == {"recipes.core": {"contracts.errors"}, "recipes.text": {"corpus_files"},
                                                      "recipes.detectionary": {"other"}}


def test_copy_prints_files_lines_needs_and_refuses_to_overwrite(tmp_path, capsys):
    dest = tmp_path / "project" / "nested"
    assert main(["copy", "text", str(dest)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("text/ (") and out[0].endswith(f"lines) -> {dest / 'text'}"), out
    assert out[1].startswith("it needs recipes.core: ") and "tokenizing" in out[1].split(": ")[1].split(", ")
    assert out[2] == "it needs recipes.fixtures_files: tokenizer_json, write, write_jsonl"  # its fixture writer's machinery
    assert out[3] == f"test it from {dest}: python -m pytest text/tests"  # the tests it carries
    assert out[4] == (f"import it with {dest} as the working directory or on sys.path: "
                      "from text import InstructionDataset, StreamingTextDataset, TokenizedTextDataset")
    copied = sorted(p.name for p in (dest / "text").iterdir())
    assert "__init__.py" in copied and "demo.py" in copied and "tests" in copied and "__pycache__" not in copied
    assert "from text.tokenized import" in (dest / "text" / "__init__.py").read_text()
    (dest / "text" / "__init__.py").write_text("# mine\n")
    with pytest.raises(SystemExit) as exit_info:
        main(["copy", "text", str(dest)])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err == (
        f"recipes copy: error: {dest / 'text'} already exists; remove it or copy into another DEST\n")
    assert (dest / "text" / "__init__.py").read_text() == "# mine\n"


def test_copy_of_an_unknown_domain_lists_the_registered_ones(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["copy", "sounds", str(tmp_path)])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert f"invalid choice: 'sounds' (choose from {', '.join(map(repr, DOMAINS))})" in err
    assert not any(tmp_path.iterdir())
