"""Which items a copy of a self-sharding stream reads, and in what order: one frozen object.

    from recipes.core.sampling.stream_order import StreamOrder
    stream = StreamingTextDataset(files, tokenizer, order=StreamOrder(shuffle_buffer=10_000, seed=0))
    alone = StreamingTextDataset(files, tokenizer, order=StreamOrder(rank=0, world_size=1))   # the whole data

The four knobs ``torch.utils.data.DistributedSampler`` takes for a map-style dataset (shuffle,
seed, rank, number of replicas), which a stream, being its own sampler, takes here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StreamOrder:
    """How a stream (:class:`recipes.core.sources.streams.ResumableStream`) shuffles and splits its items.

    Args:
        shuffle_buffer: items held in a buffer and drawn from at random (0: file order). Bigger
            mixes further apart items and costs memory; each reader slot has its own buffer.
        seed: seeds the buffer (and a stream's per-sample randomness) with ``(seed, epoch,
            slot)``; None draws one shared by all ranks.
        rank, world_size: override what is read from ``torch.distributed`` at construction
            (built on every rank of the group, rank 0 lists for all; ``0, 1`` for one rank alone).
    """

    shuffle_buffer: int = 0
    seed: int | None = None
    rank: int | None = None
    world_size: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.shuffle_buffer, bool) or not isinstance(self.shuffle_buffer, int) or self.shuffle_buffer < 0:
            raise ValueError(f"StreamOrder.shuffle_buffer must be an int >= 0, got {self.shuffle_buffer!r}")


def order_or_default(order: StreamOrder | None, owner: str) -> StreamOrder:
    """``order``, or the defaults (file order, a drawn seed, ranks from ``torch.distributed``) for None."""
    if order is None:
        return StreamOrder()
    if not isinstance(order, StreamOrder):
        raise TypeError(f"{owner}: order must be a recipes.core.StreamOrder, got {type(order).__name__}")
    return order
