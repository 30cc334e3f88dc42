"""Reading a pre-tokenised Parquet column (``ids_field``) against tokenising its text column.

    python benchmarks/ids_field.py              # 1,000,000 rows, 3 rounds
    python benchmarks/ids_field.py --quick      # 50,000 rows, 1 round

Data: 5 to 30 words drawn from the fixture corpus a row (about 26 ids), written to one Parquet
file with a ``text`` column and the fixture tokenizer's ids of each text as ``input_ids``
(``list<int32>``, as ``datasets.map`` writes them), in row groups of 65,536 rows. Timed in
alternating rounds (medians), all to a built dataset or a drained stream:

1. ``TokenizedTextDataset(path, tokenizer)``: read the text column and tokenise it (Rust, all cores),
   and for scale the tokenizer alone on the texts already in memory;
   ``TokenizedTextDataset.from_ids(path, ids_field="input_ids")``: read the ids, check them, no tokenizer;
   the same with the tokenizer given (ids bounded by its vocabulary, ``max_length=64`` cut keeping
   ``[SEP]``).
2. ``StreamingTextDataset`` over the same file, one reader, items taken one by one: text against ids.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

# Run from a checkout without `pip install -e .`: make the repository's recipes importable.
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from recipes.fixtures import fixtures_dir
from recipes.text import StreamingTextDataset, TokenizedTextDataset


def write_corpus(path: Path, rows: int, tokenizer) -> list[str]:
    """Write the file; return its texts."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    words = (fixtures_dir() / "text" / "corpus.txt").read_text(encoding="utf-8").split()
    rng = random.Random(0)
    texts = [" ".join(rng.choices(words, k=rng.randint(5, 30))) for _ in range(rows)]
    ids = [encoding.ids for encoding in tokenizer.encode_batch_fast(texts)]
    table = pa.table({"text": texts, "input_ids": pa.array(ids, pa.list_(pa.int32()))})
    pq.write_table(table, path, row_group_size=65_536)
    return texts


def timed(make) -> float:
    start = time.perf_counter()
    make()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="50,000 rows, one round")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    rows, rounds = (50_000, 1) if options.quick else (options.rows, options.rounds)
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(fixtures_dir() / "text" / "tokenizer.json"))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "corpus.parquet"
        texts = write_corpus(path, rows, tokenizer)
        size = path.stat().st_size / 2**20
        print(f"{rows:,} rows, {size:.1f} MiB Parquet (text + input_ids), {rounds} rounds (median)")
        built = {
            "tokenise the text column": lambda: TokenizedTextDataset(path, tokenizer),
            "bare encode_batch_fast, texts in memory": lambda: tokenizer.encode_batch_fast(texts),
            "ids_field, no tokenizer": lambda: TokenizedTextDataset.from_ids(path, ids_field="input_ids"),
            "ids_field + tokenizer, max_length=64": lambda: TokenizedTextDataset.from_ids(
                path, tokenizer, ids_field="input_ids", max_length=64
            ),
        }
        streamed = {
            "stream, tokenise the text": lambda: sum(1 for _ in StreamingTextDataset(path, tokenizer)),
            "stream, ids_field": lambda: sum(1 for _ in StreamingTextDataset.from_ids(path, ids_field="input_ids")),
        }
        for title, cases in (("1. build a map-style dataset", built), ("2. drain a stream, one reader", streamed)):
            times = {name: [] for name in cases}
            for _ in range(rounds):
                for name, make in cases.items():
                    times[name].append(timed(make))
            base = statistics.median(next(iter(times.values())))
            print(f"\n{title}")
            for name, seconds in times.items():
                median = statistics.median(seconds)
                print(f"   {name:40s} {median:7.2f} s  {rows / median:12,.0f} rows/s  {base / median:6.1f}x")


if __name__ == "__main__":
    main()
