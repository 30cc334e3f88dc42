"""``recipes check DOMAIN PATH``: validate a dataset without training on it.

    python -m recipes check vision data/train
    python -m recipes check detection instances_val2017.json --image-root val2017 --json
    python -m recipes check text train.jsonl --tokenizer tokenizer.json --max-length 512

Prints a summary and every problem with its path and reason (``--json``: the same, machine
readable, plus each image's size, mode and format). Exit status 0 when nothing is wrong, 1 when
problems were found, 2 when PATH or an option is unusable (one line: a COCO image root that does
not exist or holds none of the images is one error, not one per image). What is checked is the
domain's own check, which its entry in :mod:`recipes.domains` names (``check``): image folders
and image tar shards (:mod:`recipes.cli.check_files`), COCO files (:mod:`recipes.cli.check_coco`),
text rows and caption manifests (:mod:`recipes.cli.check_data`), clips (:mod:`recipes.cli.check_audio`);
``recipes check cache DIR`` re-hashes a cache folder instead (:func:`check_cache`).

``recipes check cache FOLDER``: the loaders trust a cache entry whose sizes (and, for shards,
modification time) are as recorded, which costs nothing at each open; bytes changed behind an
unchanged size and time need a full read. :func:`check_cache` reads every shard copy of
:class:`recipes.core.sources.disk_cache.DiskCache` against its CRC-32 and every token cache entry of
:mod:`recipes.text.token_cache` against its record, and deletes what differs, with the temporary
files of writers that died: the next run fetches or rebuilds those from their source. Each removal
is a problem of the report (exit status 1).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from recipes.cli.datasets import DataOptions
from recipes.cli.report import Report
from recipes.cli.terms import in_cli_terms
from recipes.domains import domain


def check(options: DataOptions, *, workers: int | None = None, progress: bool = True) -> Report:
    """Check the dataset ``options`` describe with its domain's check; returns the report
    (``report.clean`` if all is well)."""
    entry = domain(options.domain)
    if entry.check is None:
        raise ValueError(f"recipes check has no checks for {options.domain} files (its entry in recipes/domains.py "
                         "names none)")
    return entry.load("check")(options, workers=workers, progress=progress)


def run(args: argparse.Namespace, options: DataOptions) -> int:
    report = check(options, workers=args.workers, progress=not args.json)
    print(in_cli_terms(json.dumps(report.to_json(), indent=1) if args.json else report.render()))
    return 0 if report.clean else 1


def check_cache(folder: Path) -> Report:
    """Scrub both kinds of cache held in ``folder``; returns the report of what was removed."""
    from recipes.core.sources.disk_cache import DiskCache
    from recipes.text.token_cache import scrub_caches

    folder = Path(folder).expanduser()
    report = Report("cache", str(folder))
    files = [path for path in folder.iterdir() if path.is_file()]
    report.summary["files"] = len(files)
    report.summary["bytes"] = sum(path.stat().st_size for path in files)
    removed = DiskCache(folder).scrub() + scrub_caches(folder)
    for name, reason in removed:
        report.add(folder / name, f"{reason}; removed, to be fetched or rebuilt on next use")
    report.summary["removed"] = len(removed)
    return report


def run_cache(args: argparse.Namespace) -> int:
    """``recipes check cache FOLDER``."""
    if not args.path.expanduser().is_dir():
        raise NotADirectoryError(f"cache folder {args.path} is not a folder")
    report = check_cache(args.path)
    print(json.dumps(report.to_json(), indent=1) if args.json else report.render())
    return 0 if report.clean else 1
