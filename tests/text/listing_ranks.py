"""One rank of a job that streams lines and Parquet rows over HTTP, run by torchrun
(tests/text/test_listing.py).

    python -m torch.distributed.run --standalone --nproc_per_node=2 -m tests.text.listing_ranks OUT CONFIG

The "ids" case streams the Parquet files' token-id column (``ids_field``). For each case, rank 0 marks in the server's log where building the dataset and each of two
epochs begin, between barriers, so the test can count each phase's requests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from recipes.core.sampling.stream_order import StreamOrder
from recipes.text import StreamingTextDataset, streaming_loader
from tests.harness import rank_main
from tests.servers import mark_together


def build(folder: Path, count: int) -> None:
    """``count`` .txt files of 3 lines under ``folder/lines`` and as many Parquet files of 3 rows
    (a text and an id column) under ``folder/tables``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    (folder / "lines").mkdir(parents=True)
    (folder / "tables").mkdir(parents=True)
    for number in range(count):
        rows = [f"line {row} of file {number}" for row in range(3)]
        (folder / "lines" / f"part-{number:05d}.txt").write_text("".join(f"{row}\n" for row in rows))
        ids = [[number, row + 1] for row in range(3)]  # pre-tokenised: streamed with ids_field
        pq.write_table(pa.table({"text": rows, "input_ids": ids}), folder / "tables" / f"part-{number:05d}.parquet")


def report(config: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for case, source in config["cases"].items():

        def begin(name: str, case: str = case) -> None:
            mark_together(config["server"], f"{case}/{name}")

        begin("build")
        # the "ids" case reads the tables' id column, without a tokenizer
        order = StreamOrder(shuffle_buffer=4, seed=1)
        if case == "ids":
            stream = StreamingTextDataset.from_ids(source, ids_field="input_ids", pad_id=0, order=order)
        else:
            stream = StreamingTextDataset(source, config["tokenizer"], order=order)
        loader = streaming_loader(stream, 8, train=False, device="cpu", num_workers=2)
        epochs = []
        for epoch in range(2):
            begin(f"epoch-{epoch}")
            epochs.append([index for batch in loader for index in batch["index"].tolist()])
        begin("end")
        out[case] = {"epochs": epochs, "sizes": stream.sizes}
    return out


if __name__ == "__main__":
    rank_main(report)
