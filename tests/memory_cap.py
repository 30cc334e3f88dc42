"""A cap on this process's address space for a block: a reproduction that asks for gigabytes fails with
a MemoryError instead of taking the machine (the suite shares it).

    with address_space_cap(2 * 2**30):   # at most 2 GiB more than is mapped now
        InstructionDataset(rows, tokenizer, template="{{ 'x' * 10**9 }}")
"""

from __future__ import annotations

import resource
from collections.abc import Iterator
from contextlib import contextmanager


def mapped_bytes() -> int:
    """This process's mapped address space now (Linux ``VmSize``)."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize in /proc/self/status")


@contextmanager
def address_space_cap(extra_bytes: int) -> Iterator[None]:
    """Limit ``RLIMIT_AS`` to what is mapped now plus ``extra_bytes`` inside the block."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (mapped_bytes() + extra_bytes, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
