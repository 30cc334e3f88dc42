"""Run under torchrun: each rank streams with two loader workers and writes the byte offsets it read."""

import json
import sys
from pathlib import Path

import torch
import torch.distributed as dist

from recipes.text import StreamingTextDataset, streaming_loader


def main(out: Path, paths: list[str]) -> None:
    dist.init_process_group("gloo")
    tokenizer = Path(__file__).resolve().parents[2] / "fixtures" / "text" / "tokenizer.json"
    stream = StreamingTextDataset(paths, tokenizer, shuffle_buffer=8)  # seed None: broadcast from rank 0
    loader = streaming_loader(stream, 4, train=False, device="cpu", num_workers=2)
    offsets = [i for batch in loader for i in batch["index"].tolist()]
    report = {"world_size": stream.world_size, "seed": stream.seed, "offsets": offsets}
    (out / f"rank{dist.get_rank()}.json").write_text(json.dumps(report))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    torch.set_num_threads(1)
    main(Path(sys.argv[1]), sys.argv[2:])
