"""``recipes prepare DOMAIN SOURCE DEST``: the domain's ``prepare`` (its entry's ``prepare`` piece in
:mod:`recipes.domains`), its summary printed, and how to read the copy."""

from __future__ import annotations

import argparse

from recipes.domains import domain


def run(args: argparse.Namespace) -> int:
    entry = domain(args.domain)
    if entry.prepare is None:
        raise ValueError(f"recipes prepare has no prepare for {args.domain} yet (its entry in recipes/domains.py "
                         "names none)")
    summary, reader = entry.load("prepare")(
        args.source, args.dest, image_root=args.image_root, max_side=args.max_side, quality=args.quality,
        samples_per_shard=args.samples_per_shard, workers=args.workers, on_error=args.on_error,
        overwrite=args.overwrite)
    print(summary)
    print(f"read it with {reader}")
    return 0
