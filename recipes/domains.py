"""The domains, registered in one place: the CLI, the demo, the fixtures and the tests read this.

    from recipes.domains import DOMAINS, domain
    DOMAINS                       # ("vision", "text", "detection", "multimodal", "audio", "video")
    domain("text").load("loader") # recipes.text.text_loader, imported now

An entry names its domain's pieces as ``"module:attribute"``, imported only when one is asked
for, so ``recipes --help`` imports no domain and no torch. The core never reads this file: it
learns what a dataset needs from its hooks (``recipes.core.contracts.protocols``). Adding a domain means
its folder, one entry here, its fixture writer and its tests: docs/adding-a-domain.md.
"""

from __future__ import annotations

import importlib
from dataclasses import MISSING, dataclass, fields
from typing import Any

# the fields of an entry that name a piece to import, and what each must be
PIECES = {
    "loader": "the preset, <domain>_loader(dataset, batch_size, *, train, device, seed, **overrides)",
    "demo": "build(fixtures) -> (dataset, loader), what `recipes demo` runs",
    "opens": "open_path(options, *, train) -> Dataset, how bench and show open PATH",
    "fixtures": "write_<domain>(folder) -> str, which writes its tiny fixtures and returns its lines of "
                "fixtures/README.md",
    "check": "check(options, *, workers, progress) -> Report, what `recipes check` runs on PATH",
    "show": "show(batch, dataset, options, indices, *, train) -> (picture, notes), what `recipes show` draws",
    "prepare": "prepare_path(source, dest, *, <the options of recipes.cli.prepare.OPTIONS it takes>, **run) -> "
               "(summary, how to read it), what `recipes prepare` runs",
}
OPTIONAL = ("check", "show", "prepare")  # pieces an entry may leave out: the command then says it has none for it
# the CLI's dataset options an entry may read (its help lists the domains that do)
OPTIONS = ("tokenizer", "image_root", "size", "max_length", "text_field", "label_field", "image_field",
           "caption_field", "max_seconds", "clip_seconds")


@dataclass(frozen=True)
class Domain:
    """One domain: its name (the folder ``recipes/<name>/``, the CLI's DOMAIN, ``pytest -k name``)
    and its pieces (see ``PIECES``).

    Args:
        name: the folder and the word; no test outside ``tests/<name>/`` says it.
        nickname: what tests elsewhere call its data (``"images"`` for vision).
        paths: what PATH is for the CLI, one help line (a second one starts with a newline).
        loader, demo, opens, fixtures, check, show, prepare: ``"module:attribute"`` of each piece (check,
            show and prepare may be None: the command then says it has none for it).
        shows: what ``recipes show`` draws of a batch, a phrase of its help.
        composes: the domains it may import (multimodal composes vision and text); none else may.
        reads: which of ``OPTIONS`` (``--tokenizer``, ``--image-root``, ``--size``...) it reads.
    """

    name: str
    nickname: str
    paths: str
    loader: str
    demo: str
    opens: str
    fixtures: str
    check: str | None = None
    show: str | None = None
    prepare: str | None = None
    shows: str = ""
    composes: tuple[str, ...] = ()
    reads: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            if field.type == "str" and field.default is MISSING and not (isinstance(value, str) and value):
                raise ValueError(f"recipes/domains.py: the {self.name!r} entry has no {field.name}")
        for piece in PIECES:
            if piece in OPTIONAL and getattr(self, piece) is None:
                continue
            if ":" not in getattr(self, piece):
                raise ValueError(
                    f"recipes/domains.py: {self.name}.{piece} must be 'module:attribute' ({PIECES[piece]})"
                )
        unknown = set(self.reads) - set(OPTIONS)
        if unknown:
            raise ValueError(f"recipes/domains.py: {self.name}.reads names {sorted(unknown)}; choose from {OPTIONS}")

    def load(self, piece: str) -> Any:
        """The piece named by field ``piece`` (a key of ``PIECES``), imported now.

        Raises:
            LookupError: the module or the attribute does not exist, or the entry names none (an
                optional piece); the message names the entry. A module that exists but fails to
                import raises its own error.
        """
        if piece not in PIECES:
            raise ValueError(f"piece must be one of {tuple(PIECES)}, got {piece!r}")
        if getattr(self, piece) is None:
            raise LookupError(f"recipes/domains.py: the {self.name!r} entry names no {piece} ({PIECES[piece]})")
        module, _, attribute = getattr(self, piece).partition(":")
        try:
            found = importlib.import_module(module)
        except ModuleNotFoundError as error:
            if error.name is None or not (module == error.name or module.startswith(error.name + ".")):
                raise  # a dependency of the module is missing, not the module: its own message says which
            found = None
        if not hasattr(found, attribute):
            raise LookupError(
                f"recipes/domains.py: {self.name}.{piece} = {getattr(self, piece)!r} does not exist; "
                f"it names {PIECES[piece]}"
            )
        return getattr(found, attribute)


REGISTRY = (
    Domain(
        "vision", "images", "an image folder: PATH/<class>/**/<image>, or tar shards: a .tar (.tgz, ...), or a\n"
        "folder of them (webdataset's key.jpg + key.cls; classes.txt beside them names the classes)",
        loader="recipes.vision:vision_loader", demo="recipes.vision.demo:build",
        opens="recipes.vision.demo:open_path", fixtures="recipes.vision.fixtures:write_vision",
        check="recipes.cli.check_files:check_folder", show="recipes.cli.show:show_classes",
        prepare="recipes.vision.demo:prepare_path", shows="an image grid with class and file names", reads=("size",),
    ),
    Domain(
        "text", "tokens", "a file: .txt / .jsonl / .csv / .parquet (a .txt holds a line a sample)",
        loader="recipes.text:text_loader", demo="recipes.text.demo:build",
        opens="recipes.text.demo:open_path", fixtures="recipes.text.fixtures:write_text",
        check="recipes.cli.check_data:check_lines", show="recipes.cli.show:show_tokens",
        prepare="recipes.text.demo:prepare_path",
        shows="one line per sample: its index and label, then its tokens as the tokenizer's decoder gives them "
              "(the raw pieces if it has none) and its padding in dark grey",
        reads=("tokenizer", "max_length", "text_field", "label_field"),
    ),
    Domain(
        "detection", "boxes",
        "a COCO instances .json; images under --image-root\n"
        "(default: the images/ folder next to it, else its own folder); or tar shards of\n"
        "key.jpg + key.json (recipes.detection.write_shards), categories.json beside them",
        loader="recipes.detection:detection_loader", demo="recipes.detection.demo:build",
        opens="recipes.detection.demo:open_path", fixtures="recipes.detection.fixtures:write_detection",
        check="recipes.cli.check_coco:check_instances", show="recipes.cli.show:show_boxes",
        prepare="recipes.detection.demo:prepare_path",
        shows="each image with its boxes (torchvision's draw_bounding_boxes), category names on boxes of their "
              "colour inside the image, crowd regions hatched",
        reads=("image_root",),
    ),
    Domain(
        "multimodal", "captions",
        "a caption manifest: .jsonl / .csv / .tsv rows of image + caption(s),\n"
        "or a COCO captions .json; images under --image-root (default: its folder)",
        loader="recipes.multimodal:multimodal_loader", demo="recipes.multimodal.demo:build",
        opens="recipes.multimodal.demo:open_path", fixtures="recipes.multimodal.fixtures:write_multimodal",
        check="recipes.cli.check_data:check_manifest", show="recipes.cli.show:show_captions",
        prepare="recipes.multimodal.demo:prepare_path",
        shows="images with their file names and the captions their token ids decode to",
        composes=("vision", "text"),
        reads=("tokenizer", "image_root", "size", "max_length", "image_field", "caption_field"),
    ),
    Domain(
        "audio", "clips",
        "an audio folder: PATH/<class>/**/<clip>, or a speech manifest:\n"
        ".jsonl (NeMo or audio + text) / .csv / .parquet; clips relative to its folder",
        loader="recipes.audio:audio_loader", demo="recipes.audio.demo:build",
        opens="recipes.audio.demo:open_path", fixtures="recipes.audio.fixtures:write_audio",
        check="recipes.cli.check_audio:check_clips", show="recipes.cli.show:show_clips",
        prepare="recipes.audio.demo:prepare_path",
        shows="each clip's waveform over its log-mel spectrogram, named by its file, with its class or its "
              "transcript",
        reads=("tokenizer", "max_length", "text_field", "max_seconds", "clip_seconds"),
    ),
    Domain(
        "video", "footage",
        "a video folder: PATH/<class>/**/<video>, or a manifest:\n"
        ".csv / .jsonl / .parquet rows of video + label; videos relative to its folder",
        loader="recipes.video:video_loader", demo="recipes.video.demo:build",
        opens="recipes.video.demo:open_path", fixtures="recipes.video.fixtures:write_video",
        check="recipes.cli.check_data:check_footage", show="recipes.cli.show:show_strips",
        prepare="recipes.video.demo:prepare_path",
        shows="each clip as a strip of its frames, with its label, its file and the frame numbers shown",
        reads=("size",),
    ),
)
DOMAINS = tuple(entry.name for entry in REGISTRY)


def readers(option: str) -> str:
    """The domains that read CLI option ``option`` (one of ``OPTIONS``), as a help text lists them."""
    if option not in OPTIONS:
        raise ValueError(f"option must be one of {OPTIONS}, got {option!r}")
    return ", ".join(entry.name for entry in REGISTRY if option in entry.reads)


def domain(name: str) -> Domain:
    """The entry of domain ``name``; a ValueError lists the domains there are."""
    for entry in REGISTRY:
        if entry.name == name:
            return entry
    raise ValueError(f"domain must be one of {DOMAINS}, got {name!r}")
