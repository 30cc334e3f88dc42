"""``recipes check cache FOLDER``: re-hash every entry of a cache folder and remove the damaged ones.

    python -m recipes check cache ~/.cache/recipes

The loaders trust an entry whose sizes (and, for shards, modification time) are as recorded,
which costs nothing at each open; bytes changed behind an unchanged size and time need a full
read. This reads every shard copy of :class:`recipes.core.sources.disk_cache.DiskCache` against its
CRC-32 and every token cache entry of :mod:`recipes.text.token_cache` against its record, and
deletes what differs, with the temporary files of writers that died: the next run fetches or
rebuilds those from their source. Each removal is a problem of the report (exit status 1).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from recipes.cli.report import Report
from recipes.core.sources.disk_cache import DiskCache
from recipes.text.token_cache import scrub_caches


def check_cache(folder: Path) -> Report:
    """Scrub both kinds of cache held in ``folder``; returns the report of what was removed."""
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


def run(args: argparse.Namespace) -> int:
    if not args.path.expanduser().is_dir():
        raise NotADirectoryError(f"cache folder {args.path} is not a folder")
    report = check_cache(args.path)
    print(json.dumps(report.to_json(), indent=1) if args.json else report.render())
    return 0 if report.clean else 1
