"""Print the requirements that hold each direct dependency of the pyproject at its floor.

    python .ci/floors.py > floors.txt && pip install -e . -r floors.txt

Every ``name>=X`` of ``[project] dependencies`` and of the extras named on the command line (default:
``test``) becomes ``name==X`` (extras and markers kept, caps carried as written), so CI's second pass
runs the suite on the oldest versions the pyproject promises. torch, torchvision and TorchCodec are
left to the machine's resolution, which caps torch at the release on its disk. A test tool whose own
floors would raise the library's is left out, with its reason in ``LEFT_OUT``; its tests skip there.
"""

import re
import sys
import tomllib
from pathlib import Path

KEPT = {"torch", "torchvision", "torchcodec"}
LEFT_OUT = {
    # the oracle of tests/text/test_chat_oracles.py (skipped without it): trl 1.16 needs transformers
    # >= 4.56.2 (so tokenizers >= 0.22), numpy >= 1.26, pyarrow >= 21 and datasets >= 4.7
    "trl": "its floors are above the library's own",
    # the oracle of the text, audio and multimodal tests that compare with Hugging Face (each skips without
    # it) and the HF Trainer's: transformers 5.18 needs tokenizers >= 0.23, and the pass tests the library's 0.19
    "transformers": "its floors are above the library's own",
}
REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?\s*([^;]*?)\s*(;.*)?$")


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def floor_requirements(pyproject: Path, extras: list[str]) -> list[str]:
    """The requirements of ``dependencies`` and ``extras``, each ``>=`` floor made ``==``."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    requirements = list(project["dependencies"])
    for extra in extras:
        requirements += project["optional-dependencies"][extra]
    held: dict[str, str] = {}
    for requirement in requirements:
        match = REQUIREMENT.match(requirement)
        if match is None:
            raise ValueError(f"pyproject.toml: cannot read the requirement {requirement!r}")
        name, extra, specifier, marker = match.groups()
        key = normalized(name)
        if key in KEPT or key in LEFT_OUT:
            continue
        floor = re.search(r">=\s*([^,\s]+)", specifier)
        pinned = f"=={floor.group(1)}" if floor else specifier  # a cap alone (boto3<...) stays a cap
        held[key] = f"{key}{extra or ''}{pinned}" + (f" {marker.strip()}" if marker else "")
    return sorted(held.values())


if __name__ == "__main__":
    root = Path(__file__).resolve().parent.parent
    print("\n".join(floor_requirements(root / "pyproject.toml", sys.argv[1:] or ["test"])))
