"""One rank of a job that reads tar shards over HTTP, run by torchrun (tests/multimodal/test_listing.py).

    python -m torch.distributed.run --standalone --nproc_per_node=2 -m tests.multimodal.listing_ranks OUT CONFIG

For each case (a shard pattern), rank 0 marks in the server's log where building the dataset
and each of two epochs begin, between barriers, so the test can count each phase's requests.
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path
from typing import Any

from recipes.multimodal import ImageTextShards, multimodal_loader
from recipes.core.sampling.stream_order import StreamOrder
from tests.harness import rank_main
from tests.servers import mark_together


def build(folder: Path, count: int) -> None:
    """``count`` tar shards of one sample each (an 8x8 JPEG and its caption): ``shard-00000.tar``..."""
    from PIL import Image

    image = io.BytesIO()
    Image.new("RGB", (8, 8), (30, 120, 200)).save(image, format="JPEG")
    folder.mkdir(parents=True)
    for number in range(count):
        shard = io.BytesIO()
        with tarfile.open(fileobj=shard, mode="w", format=tarfile.USTAR_FORMAT) as tar:
            for name, data in ((f"{number:05d}.jpg", image.getvalue()), (f"{number:05d}.txt", b"a blue square")):
                member = tarfile.TarInfo(name)
                member.size = len(data)
                tar.addfile(member, io.BytesIO(data))
        (folder / f"shard-{number:05d}.tar").write_bytes(shard.getvalue())


def report(config: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for case, (source, context) in config["cases"].items():

        def begin(name: str, case: str = case) -> None:
            mark_together(config["server"], f"{case}/{name}")

        begin("build")
        shards = ImageTextShards(source, config["tokenizer"], order=StreamOrder(shuffle_buffer=4, seed=1))
        loader = multimodal_loader(shards, 8, train=False, device="cpu", num_workers=2,
                                   multiprocessing_context=context)
        epochs = []
        for epoch in range(2):
            begin(f"epoch-{epoch}")
            epochs.append([key for batch in loader for key in batch["key"]])
        begin("end")
        out[case] = epochs
    return out


if __name__ == "__main__":
    rank_main(report)
