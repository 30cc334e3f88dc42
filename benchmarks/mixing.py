"""What a mixture costs: the same loader over the same samples, with and without MixedDataset.

    python benchmarks/mixing.py            # 9 alternating rounds
    python benchmarks/mixing.py --quick    # a smoke run

Data: CPython's ``pydoc_data.topics`` paragraphs (the prose of ``benchmarks/text.py``), tokenised
with the fixture tokenizer, written twice: one file with every paragraph, and the same paragraphs
split into two files. The plain side is ``text_loader(TokenizedTextDataset(all))``; the mixed side
is ``text_loader(MixedDataset([first half, second half], weights=[1, 1]))``, which draws as many
samples an epoch. Both group by length and cut batches of 32, in this process (``num_workers=0``:
the mixture's own work is all here, none hidden behind workers) and with 2 workers.

Reported per side: microseconds a batch (a whole epoch, first batch to last, per batch; the
mixture's ``epoch_indices`` and its per-item lookups included), the median of alternating rounds,
and the overhead of the mixture. Goal: at most 5%.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

# Run from a checkout without `pip install -e .`: make the repository's recipes importable.
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from recipes.core import MixedDataset
from recipes.fixtures import fixtures_dir
from recipes.text import TokenizedTextDataset, text_loader

BATCH = 32


def paragraphs() -> list[str]:
    import re
    from pydoc_data.topics import topics

    return [p.strip() for topic in topics.values() for p in re.split(r"\n\s*\n", topic) if p.strip()]


def write(folder: Path, texts: list[str]) -> tuple[Path, Path, Path]:
    files = []
    for name, rows in (("all", texts), ("first", texts[: len(texts) // 2]), ("second", texts[len(texts) // 2 :])):
        path = folder / f"{name}.jsonl"
        path.write_text("".join(json.dumps({"text": text}) + "\n" for text in rows), encoding="utf-8")
        files.append(path)
    return tuple(files)


def epoch_us_per_batch(loader) -> float:
    start, batches = time.perf_counter(), 0
    for _ in loader:
        batches += 1
    return (time.perf_counter() - start) / batches * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 rounds, the corpus once")
    parser.add_argument("--rounds", type=int, default=None)
    args = parser.parse_args(argv)
    rounds = args.rounds or (2 if args.quick else 9)
    copies = 1 if args.quick else 4  # ~10,000 paragraphs: epochs long enough to time
    tokenizer = fixtures_dir() / "text" / "tokenizer.json"
    with tempfile.TemporaryDirectory() as folder:
        every, first, second = write(Path(folder), paragraphs() * copies)
        plain = TokenizedTextDataset(every, tokenizer)
        mixed = MixedDataset([TokenizedTextDataset(first, tokenizer), TokenizedTextDataset(second, tokenizer)], [1, 1])
        assert mixed.samples_per_epoch == len(plain) and sum(mixed.draws) == len(plain)
        print(f"{len(plain)} paragraphs, batches of {BATCH}, length-grouped; {rounds} alternating rounds")
        for workers in (0, 2):
            loaders = {
                "plain": text_loader(plain, BATCH, device="cpu", seed=0, num_workers=workers),
                "mixed": text_loader(mixed, BATCH, device="cpu", seed=0, num_workers=workers),
            }
            times: dict[str, list[float]] = {name: [] for name in loaders}
            for loader in loaders.values():
                epoch_us_per_batch(loader)  # warm-up: workers started, pages cached
            for round_ in range(rounds):
                names = list(loaders) if round_ % 2 == 0 else list(loaders)[::-1]
                for name in names:
                    times[name].append(epoch_us_per_batch(loaders[name]))
            ratios = [m / p for m, p in zip(times["mixed"], times["plain"])]
            overhead = statistics.median(ratios) - 1
            print(f"\n  num_workers={workers}")
            for name, values in times.items():
                print(f"    {name:6s} {statistics.median(values):8.1f} us a batch  (rounds: "
                      f"{', '.join(f'{v:.0f}' for v in values)})")
            verdict = "met" if overhead <= 0.05 else "NOT met"
            print(f"    mixture overhead {overhead * 100:+.1f}% (median of per-round ratios; goal <= 5%: {verdict})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
