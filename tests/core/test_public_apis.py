"""recipes/ uses only public APIs of torch and its libraries: no private name, no torch.ops.

A private name (a leading underscore) is a promise nobody made to us: it changes in a minor
release. The test parses every module and fails on:
- an import from a private module or of a private name of the libraries below;
- an attribute with a leading underscore read off anything but ``self`` or ``cls`` (our own
  private helpers are module-level names, which this does not see);
- ``getattr``/``setattr``/``hasattr`` with such a name as a string;
- ``torch.ops``, the registry of C++ operators behind the public functions.
"""

import ast
from pathlib import Path

import pytest

import recipes

PACKAGE = Path(recipes.__file__).parent
LIBRARIES = ("torch", "torchvision", "torchdata", "torchcodec", "tokenizers", "pycocotools", "pyarrow", "datasets")
PUBLIC_UNDERSCORED = {"_fields", "_replace", "_asdict", "_make"}  # namedtuple's documented API


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__") and name not in PUBLIC_UNDERSCORED


def private_uses(source: str) -> list[tuple[int, str]]:
    """``(line, what)`` for every private reach in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in LIBRARIES:
            names = [alias.name for alias in node.names]
            if any(part.startswith("_") for part in node.module.split(".")) or any(map(_private, names)):
                found.append((node.lineno, f"from {node.module} import {', '.join(names)}"))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] in LIBRARIES and any(part.startswith("_") for part in parts):
                    found.append((node.lineno, f"import {alias.name}"))
        elif isinstance(node, ast.Attribute):
            if _private(node.attr) and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                found.append((node.lineno, ast.unparse(node)))
            elif node.attr == "ops" and isinstance(node.value, ast.Name) and node.value.id == "torch":
                found.append((node.lineno, "torch.ops"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "setattr", "hasattr"):
            if len(node.args) > 1 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
                if _private(node.args[1].value):
                    found.append((node.lineno, ast.unparse(node)))
    return found


def test_no_private_name_of_torch_or_its_libraries():
    paths = sorted(PACKAGE.rglob("*.py"))
    assert len(paths) > 30  # the whole package was read
    uses = [f"{path}:{line}: {what}" for path in paths for line, what in private_uses(path.read_text(encoding="utf-8"))]
    assert not uses, "private names in recipes/:\n" + "\n".join(uses)


@pytest.mark.parametrize(
    "source",
    [
        "import torch\ntorch._C._storage_Use_Count(1)",
        "import torch\nstorage = torch.UntypedStorage._new_shared(8)",
        "from torchvision.io.image import _has_image_ops",
        "from torch.utils.data._utils.collate import default_collate",
        "import torch._dynamo",
        "import torch\nop = torch.ops.image.decode_image",
        "x = getattr(tensor, '_cdata')",
        "x = tensor.untyped_storage()._cdata",
    ],
    ids=range(8),
)
def test_the_check_catches_each_kind_of_private_reach(source):
    assert private_uses(source)


def test_the_check_leaves_our_own_and_public_names_alone():
    source = "class A:\n    def f(self):\n        return self._x, cls._y\nPoint._fields\ndef _helper(): pass\n_helper()"
    assert private_uses(source) == []
