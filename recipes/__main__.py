"""Command line: ``python -m recipes {demo,bench,check,show,copy,prepare}`` (also installed as ``recipes``).

    recipes demo                                     # every recipe on the bundled fixtures
    recipes bench vision data/train --step-ms 80     # which loader settings, on your data
    recipes check detection annotations/instances_val2017.json --image-root val2017
    recipes show text train.jsonl --tokenizer tokenizer.json -o batch.png
    recipes copy detection my_project                # the recipe's folder, to edit as your own
    recipes prepare vision imagenet/train prepared/ --max-side 320     # a copy at training size, in shards
    recipes prepare audio train_manifest.jsonl prepared/ --sample-rate 16000

The commands live in ``recipes/cli/`` (one module each); this file only parses arguments.
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
import warnings
from collections.abc import Sequence
from pathlib import Path

from recipes.domains import DOMAINS, REGISTRY, readers

STEP_MS = 50.0  # recipes bench's simulated training step: data-wait means something only beside a step



def _paths_help() -> str:
    """The help's ``PATH by DOMAIN`` table, from each domain's ``paths`` (recipes/domains.py)."""
    lines = ["PATH by DOMAIN:"]
    for entry in REGISTRY:
        first, *more = entry.paths.split("\n")
        lines += [f"  {entry.name:<11} {first}", *(" " * 14 + line for line in more)]
    return "\n".join([*lines, f"{readers('tokenizer')} read --tokenizer (default: a tokenizer.json next to PATH)."])


PATHS = _paths_help()


def _local_path(value: str) -> Path:
    """A PATH argument: a local path; a URL is refused here, named without its credentials."""
    if "://" in value:
        from recipes.core.sources.storage import shown

        raise argparse.ArgumentTypeError(f"{shown(value)} is a URL; the command line reads local files only")
    return Path(value)


def _destination(value: str) -> Path | str:
    """``recipes prepare``'s DEST: a local folder, or an object store's URL (fsspec's credentials)."""
    return value.rstrip("/") if "://" in value else Path(value)


def _positive(value: str) -> float:
    """A number of seconds above 0."""
    try:
        seconds = float(value)
    except ValueError:
        seconds = float("nan")
    if not seconds > 0 or seconds == float("inf"):
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds above 0")
    return seconds


def _wrap(text: str) -> str:
    return textwrap.fill(text, 88)


def _data_arguments(
    parser: argparse.ArgumentParser, *, window: str | None, max_length: str, also: tuple[str, ...] = ()
) -> None:
    """The DOMAIN, PATH and dataset options; each option's help names the domains that read it (their
    entries' ``reads``). ``window``: which window ``--clip-seconds`` keeps (bench and show; None: no
    ``--size`` or ``--clip-seconds``, which only a loader reads); ``max_length``: its help, where
    ``{readers}`` goes."""
    domains = ", ".join(DOMAINS + also)
    parser.add_argument("domain", choices=DOMAINS + also, metavar="DOMAIN", help=f"one of {domains}")
    parser.add_argument("path", type=_local_path, metavar="PATH", help="the dataset (see below)")
    group = parser.add_argument_group("dataset options")
    group.add_argument("--tokenizer", type=_local_path, metavar="FILE", help=f"tokenizer.json ({readers('tokenizer')})")
    group.add_argument("--image-root", type=_local_path, metavar="DIR", help="folder the image names are relative to "
                       f"({readers('image_root')})")
    if window is not None:
        group.add_argument("--size", type=int, default=224, metavar="PX",
                           help=f"image side after crop/resize ({readers('size')}; default 224)")
        group.add_argument("--clip-seconds", type=_positive, metavar="S", help="cut each clip of a folder of clips "
                           f"to S seconds: {window} ({readers('clip_seconds')})")
    group.add_argument("--max-length", type=int, metavar="N", help=max_length.format(readers=readers("max_length")))
    group.add_argument("--text-field", default="text", metavar="NAME",
                       help=f"JSON field / CSV column of the text ({readers('text_field')}; default 'text')")
    group.add_argument("--label-field", metavar="NAME",
                       help=f"field / column of the label ({readers('label_field')}; default none)")
    group.add_argument("--image-field", default="image", metavar="NAME", help="Parquet column of the image: path, "
                       f"bytes or {{bytes, path}} ({readers('image_field')}; default 'image')")
    group.add_argument("--caption-field", default="caption", metavar="NAME", help="Parquet column of the caption(s) "
                       f"({readers('caption_field')}; default 'caption', else 'captions')")
    group.add_argument("--max-seconds", type=_positive, metavar="S", help="the per-clip limit: a longer clip "
                       f"is a problem named by file ({readers('max_seconds')}; default 600)")


def _loader_arguments(parser: argparse.ArgumentParser, *, window: str) -> None:
    """The arguments of a command that runs the domain's loader over PATH (bench, show)."""
    _data_arguments(parser, window=window, max_length="cut token ids to N ({readers}; default: all, captions CLIP's 77)")
    parser.add_argument("--on-error", choices=("raise", "skip"), default="raise",
                        help="a bad sample (unreadable image, bad line): stop naming it (raise, the default) or drop it "
                        "with a warning naming it (skip); recipes check lists every one")


def build_parser() -> argparse.ArgumentParser:
    """The ``recipes`` argument parser, with one sub-parser per command."""
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(
        prog="recipes", formatter_class=formatter,
        description="PyTorch data-loading recipes: run them on the fixtures, tune, check and look at your data, "
        "copy one into your project.",
        epilog="`recipes COMMAND --help` describes each command.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = commands.add_parser(
        "demo", help="run every domain's recipe (or one) on the bundled fixtures", formatter_class=formatter,
        description=_wrap("Build each domain's dataset and loader on the bundled fixtures (generated into a temporary "
        "folder when the package is installed from a wheel) and print the dataset size, the keys, shapes and "
        "dtypes of one batch, and how long one epoch took (in the main process or with worker start-up "
        "included: a few samples time start-up, not throughput, which `recipes bench` measures)."),
    )
    demo.add_argument("domain", nargs="?", choices=DOMAINS, metavar="DOMAIN",
                      help=f"only this domain ({', '.join(DOMAINS)}); default: all")

    bench = commands.add_parser(
        "bench", help="measure DataLoader settings on your dataset and recommend loader_kwargs",
        formatter_class=formatter, epilog=PATHS,
        description=_wrap("Run the domain's own loader (<domain>_loader, train=True, seed=0) over PATH with every "
        "num_workers from 0 up to the usable CPUs, prefetch_factor 2 and 4, and pin_memory on and off on "
        "CUDA. Print a table (batches/s, samples/s, data-wait %: the time spent waiting for the next batch "
        "around a simulated --step-ms step, start-up s) and the recommended settings as a Python dict: the "
        "cheapest within 5% of the best rate. A progress bar shows the sweep; the whole run takes about "
        "--seconds."),
    )
    _loader_arguments(bench, window="a random window, as training reads it")
    bench.add_argument("--batch-size", type=int, default=32, metavar="N", help="samples per batch (default 32)")
    bench.add_argument("--device", choices=("cpu", "cuda"), help="where batches go; pin_memory is tried on cuda "
                       "only (default: cuda if available)")
    bench.add_argument("--seconds", type=float, default=30.0, metavar="S",
                       help="time budget shared by all settings (default 30)")
    bench.add_argument("--step-ms", type=float, default=STEP_MS, metavar="MS",
                       help=f"simulated training step per batch (default {STEP_MS:g}: the order of one training step "
                       "of a mid-size model on one GPU, such as a ResNet-50 or BERT-base step on a batch of 32; "
                       "time your own model's step and pass it). data-wait is measured around this step; "
                       "0 measures the raw loader rate, where waiting is all the loop does")
    bench.add_argument("--max-workers", type=int, metavar="N", help="highest num_workers tried "
                       "(default: the usable CPUs)")

    check = commands.add_parser(
        "check", help="validate a dataset without training on it (exit 0 clean, 1 problems)",
        formatter_class=formatter,
        epilog=PATHS + "\nWithout a tokenizer, check counts text lengths in words.\n\n"
        "recipes check cache FOLDER: FOLDER is a cache_dir; every shard copy and token cache entry in it\n"
        "is read whole against its record, and the damaged ones are removed (fetched or rebuilt on next use).\n\n"
        "exit status: 0 no problem found, 1 problems found, 2 PATH or options unusable.",
        description=_wrap("Decode every image (size and mode reported; header with PIL, pixels with the recipes' "
        "decoder, in --workers processes), check annotations (unknown categories, degenerate or NaN boxes, "
        "boxes outside the image, missing image files, paths escaping the root, duplicate ids, sizes that "
        "differ from the file), and text (UTF-8, field presence, a length histogram and how much a "
        "--max-length truncates). Print a summary and each problem with its path and reason: the first 20 of "
        "each kind, then how many more (--json lists every one)."),
    )
    _data_arguments(check, window=None, max_length="report how many samples and tokens this max_length cuts "
                    "({readers}; default: a table of common lengths)", also=("cache",))
    check.add_argument("--json", action="store_true", help="print the report as JSON instead")
    check.add_argument("--workers", type=int, metavar="N", help="processes decoding images "
                       "(default: the usable CPUs)")

    show = commands.add_parser(
        "show", help="render one batch to a PNG", formatter_class=formatter, epilog=PATHS,
        description=_wrap("Render the first batch of the domain's loader to a PNG, under a title saying what it "
        "shows and what was left out and why: " + "; ".join(f"{entry.name} {entry.shows}" for entry in REGISTRY
                                                           if entry.shows) +
        ". Small images are enlarged. Evaluation mode by default (dataset order, no random augmentation)."),
    )
    _loader_arguments(show, window="a random window with --train, else the centre one")
    show.add_argument("-o", "--output", type=_local_path, required=True, metavar="PNG", help="the picture to write")
    show.add_argument("--batch-size", type=int, default=8, metavar="N", help="samples in the batch (default 8)")
    show.add_argument("--train", action="store_true",
                      help="show a training batch instead: shuffled, grouped, randomly augmented (seed 0)")

    copy = commands.add_parser(
        "copy", help="copy a domain's folder into your project, to edit as your own", formatter_class=formatter,
        description=_wrap("Copy the installed recipes/DOMAIN/ folder (its .py files, demo.py included) to "
        "DEST/DOMAIN/, creating DEST. The copy's imports of its own domain (from recipes.DOMAIN.x import ...) "
        "are rewritten to the copy (from DOMAIN.x import ...), and so are the usage examples in its docstrings; "
        "comments and other strings stay as written. Its imports of recipes.core" + "".join(
            f", and {entry.name}'s of " + " and ".join(f"recipes.{other}" for other in entry.composes)
            for entry in REGISTRY if entry.composes) + ", "
        "keep using the installed package. An existing DEST/DOMAIN is never overwritten. Print the files and "
        "lines copied, the recipes.core modules the copy imports, and how to import it."),
    )
    copy.add_argument("domain", choices=DOMAINS, metavar="DOMAIN", help=f"one of {', '.join(DOMAINS)}")
    copy.add_argument("dest", type=_local_path, metavar="DEST", help="your project's folder; the copy goes to "
                      "DEST/DOMAIN and is imported as DOMAIN with DEST on sys.path")
    copy.add_argument("--standalone", action="store_true",
                      help="also copy the modules of recipes the domain imports into DEST/DOMAIN/vendored/, its "
                      "imports pointed there: the copy then runs without recipes installed")

    prepare = commands.add_parser(
        "prepare", help="write a training-ready copy of a dataset: images at a bounded size, clips at one rate, "
        "texts as token ids, videos with short GOPs", formatter_class=formatter,
        description=_wrap("Write SOURCE into DEST (made if missing) as the shards the domain's loaders read. vision: "
        "an image folder, or a CSV / JSONL of path,label; each image is re-encoded as a JPEG whose longer side "
        "is at most --max-side (never enlarged; a JPEG within it keeps its bytes), read as ImageShards(DEST, "
        "classes=DEST/classes.txt). detection: a COCO instances file and its --image-root, the boxes, areas and "
        "masks scaled with their image, read as CocoShards(DEST, categories=DEST/categories.json). multimodal: a "
        "caption manifest (.jsonl, .csv, .tsv, COCO captions .json), its images re-encoded as vision's beside their "
        "captions, read as ImageTextShards(DEST, tokenizer). audio: a speech manifest (.jsonl, .csv, .parquet), "
        "each clip decoded once, checked against its duration and written as 16-bit FLAC (or WAV) at "
        "--sample-rate, mono unless --keep-channels, beside its transcript, read as AudioShards(DEST). text: a .txt, "
        ".jsonl, .csv or .parquet corpus tokenised once with --tokenizer, its ids in Parquet shards, read as "
        "TokenizedTextDataset.from_ids('DEST/shard-*.parquet', 'DEST/tokenizer.json'). video: a folder of videos "
        "(class folders, or a manifest's), each re-encoded as H.264 MP4 with a keyframe every clip span and its "
        "shorter side at most --short-side, read as VideoFolderDataset(DEST/videos) (or VideoDataset(manifest, "
        "video_root=DEST/videos)), indexed from DEST/manifest.json. The same "
        "SOURCE and options give the same bytes whatever --workers; a run "
        "stopped at any point goes on from its whole shards when run again with the same arguments. Prints "
        "what was written, what was skipped and why, the bytes and the median PSNR of the re-encoded samples; "
        "DEST/manifest.json lists each shard's samples, bytes and sha256."),
    )
    preparing = tuple(entry.name for entry in REGISTRY if entry.prepare)
    prepare.add_argument("domain", choices=preparing, metavar="DOMAIN", help=f"one of {', '.join(preparing)}")
    prepare.add_argument("source", type=_local_path, metavar="SOURCE", help="the dataset: vision, an image folder or "
                         "a .csv / .jsonl manifest of path,label; detection, a COCO instances file (with --image-root); "
                         "multimodal, a caption manifest; audio, a speech manifest; text, a corpus file; video, a folder "
                         "of videos")
    prepare.add_argument("dest", type=_destination, metavar="DEST", help="the folder to write the shards into, or "
                         "an object store's URL (s3://bucket/prepared; credentials as fsspec finds them: AWS_*, ...)")
    prepare.add_argument("--samples-per-shard", type=int, default=1000, metavar="N", help="default 1000")
    prepare.add_argument("--workers", type=int, metavar="N", help="processes writing shards (default: the CPUs)")
    prepare.add_argument("--on-error", choices=("raise", "skip"), default="raise", help="a sample that does not "
                         "read: stop, naming it (raise, the default), or leave it out, named in the summary (skip)")
    prepare.add_argument("--overwrite", action="store_true", help="replace a DEST prepared with other options")
    images = prepare.add_argument_group("images (vision, detection, multimodal)")
    images.add_argument("--max-side", type=int, metavar="PX",
                        help="the longest side an image keeps (default 0: every file's own bytes)")
    images.add_argument("--quality", type=int, metavar="Q", help="JPEG quality, 1-95 (default 90)")
    images.add_argument("--image-root", type=_local_path, metavar="DIR",
                        help="folder the image paths are relative to (vision, multimodal: default the manifest's; "
                        "detection: required)")
    clips = prepare.add_argument_group("clips (audio)")
    clips.add_argument("--sample-rate", type=int, metavar="HZ", help="the rate every clip is resampled to "
                       "(default 16000)")
    clips.add_argument("--keep-channels", action="store_true", help="keep each file's channels (default: mono, "
                       "the mean of the channels)")
    clips.add_argument("--format", choices=("flac", "wav"), help="16-bit FLAC (the default) or WAV")
    clips.add_argument("--audio-root", type=_local_path, metavar="DIR",
                       help="folder the clip paths are relative to (default: the manifest's)")
    texts = prepare.add_argument_group("texts (text)")
    texts.add_argument("--tokenizer", type=_local_path, metavar="FILE", help="the tokenizer.json that makes the ids "
                       "(required)")
    texts.add_argument("--max-length", type=int, metavar="N", help="keep at most N ids a sample, special tokens "
                       "included (default: all)")
    texts.add_argument("--text-field", metavar="NAME", help="the text's field or column (default text)")
    texts.add_argument("--label-field", metavar="NAME", help="the label's field or column (default: no labels)")
    videos = prepare.add_argument_group("videos (video)")
    videos.add_argument("--short-side", type=int, metavar="PX", help="the shorter side a video keeps (never "
                        "enlarged; default: each video's own)")
    videos.add_argument("--frames-per-clip", type=int, metavar="N", help="the clips training cuts (default 16), "
                        "whose span is the default --keyframe-every")
    videos.add_argument("--frame-step", type=int, metavar="N", help="frames between a clip's frames (default 1)")
    videos.add_argument("--keyframe-every", type=int, metavar="N", help="frames from one keyframe to the next "
                        "(default: the clip span)")
    videos.add_argument("--fps", type=float, metavar="RATE", help="the frame rate every video is resampled to "
                        "(default: each video's own)")
    videos.add_argument("--crf", type=int, metavar="N", help="x264's constant rate factor, 0-51 (default 23)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``recipes ...``; returns the exit status (argparse exits 2 on bad arguments).

    A reader that stops early (``recipes demo | head -3``) ends the command quietly with exit
    status 0, as Unix tools do: what it wanted was printed.
    """
    try:
        status = _run(argv)
        sys.stdout.flush()  # a closed pipe shows here, where it can still be answered, not at exit
        return status
    except BrokenPipeError:
        # Python's documented answer (library/signal.html, "Note on SIGPIPE"): stdout to devnull, so the
        # interpreter's own flush at exit does not raise again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _run(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "demo":
        from recipes.cli import demo

        return demo.run(args)
    if args.command == "copy":
        from recipes.cli import copy

        try:
            return copy.run(args)
        except BrokenPipeError:
            raise
        except (OSError, ValueError) as error:  # DEST/DOMAIN exists, DEST is a file, a file the copy cannot rewrite
            parser.exit(2, f"recipes copy: error: {error}\n")
    if args.command == "prepare":
        from recipes.cli import prepare
        from recipes.cli.terms import in_cli_terms, show_warning

        try:
            with warnings.catch_warnings():
                warnings.showwarning = show_warning(args.command)
                return prepare.run(args)
        except BrokenPipeError:
            raise
        except (OSError, ValueError) as error:  # an image that does not read (a DataError), other options at DEST
            parser.exit(2, f"recipes prepare: error: {in_cli_terms(str(error))}\n")
    if args.command == "check" and args.domain == "cache":
        from recipes.cli import check

        try:
            return check.run_cache(args)
        except BrokenPipeError:
            raise
        except OSError as error:
            parser.exit(2, f"recipes check: error: {error}\n")
    from recipes.cli.datasets import DataOptions

    options = DataOptions(
        args.domain, args.path, tokenizer=args.tokenizer, image_root=args.image_root,
        size=getattr(args, "size", 224), max_length=args.max_length, text_field=args.text_field,
        label_field=args.label_field, image_field=args.image_field, caption_field=args.caption_field,
        on_error=getattr(args, "on_error", "raise"), max_seconds=args.max_seconds,
        clip_seconds=getattr(args, "clip_seconds", None),
    )
    missing = options.missing()
    if missing:  # one line, before any work: the same in every domain and command
        parser.exit(2, f"recipes {args.command}: error: {missing}\n")
    from recipes.core.contracts.errors import DataError, SampleError

    if args.command == "bench":
        from recipes.cli import bench as command
    elif args.command == "check":
        from recipes.cli import check as command
    else:
        from recipes.cli import show as command
    from recipes.cli.terms import in_cli_terms, show_warning

    try:
        with warnings.catch_warnings():
            warnings.showwarning = show_warning(args.command)  # one line each, in the CLI's terms
            return command.run(args, options)
    except BrokenPipeError:
        raise
    except (ValueError, OSError, SampleError) as error:  # bad data (DataError is a ValueError), bad options, a failing sample
        bad_data = isinstance(error, DataError) and args.command != "check"
        hint = f" (recipes check {args.domain} {args.path} lists every problem)" if bad_data else ""
        parser.exit(2, f"recipes {args.command}: error: {in_cli_terms(str(error))}{hint}\n")


if __name__ == "__main__":
    sys.exit(main())
