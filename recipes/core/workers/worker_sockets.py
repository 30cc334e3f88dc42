"""Refuse, at build time, a temporary directory too deep for the sockets DataLoader workers use.

    check_socket_dir(num_workers)      # in loader_kwargs: a clear error instead of a hang

On Linux, torch's default sharing strategy (``file_descriptor``) hands each batch's tensors from
a worker to the training process over a Unix socket that ``multiprocessing`` creates under
``tempfile.gettempdir()`` as ``pymp-XXXXXXXX/listener-XXXXXXXX``. A socket path holds at most
107 bytes; past that the worker's ``bind`` fails inside its queue's feeder thread, the error
never reaches the training process, and ``next(iter(loader))`` waits forever. A ``TMPDIR`` of
about 76 bytes or more (a pytest ``tmp_path``, a cluster's per-job scratch) is enough.
"""

from __future__ import annotations

import os
import tempfile

import torch.multiprocessing

MAX_SOCKET_PATH_BYTES = 107  # sockaddr_un.sun_path is 108 bytes on Linux, its NUL included
# what multiprocessing adds under the temporary directory: "/pymp-" + 8 characters, "/listener-" + 8
SOCKET_SUFFIX_BYTES = len("/pymp-12345678/listener-12345678")


def check_socket_dir(num_workers: int) -> None:
    """Raise a ``RuntimeError`` naming ``TMPDIR`` if workers could not send a tensor from it."""
    if num_workers == 0 or torch.multiprocessing.get_sharing_strategy() != "file_descriptor":
        return
    temp = tempfile.gettempdir()
    length = len(os.fsencode(temp)) + SOCKET_SUFFIX_BYTES
    if length > MAX_SOCKET_PATH_BYTES:
        raise RuntimeError(
            f"the temporary directory {temp!r} is too long for DataLoader workers: they pass tensors through "
            f"a Unix socket under it whose path would take {length} bytes (at most {MAX_SOCKET_PATH_BYTES}), "
            "and the loader would wait forever. Set TMPDIR to a shorter directory (e.g. TMPDIR=/tmp), or "
            "num_workers=0, or torch.multiprocessing.set_sharing_strategy('file_system')"
        )
