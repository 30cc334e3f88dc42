"""A DataLoader worker whose training process died exits within seconds, even in the middle of a read.

    exit_with_parent()   # in a worker's start-up (the presets' worker_init_fn calls it)

torch's workers look at their parent only between two items (a watchdog they poll while they
wait for the next index). A worker blocked in a read (a stream's remote request waiting for its
timeout, then retried) does not look, so when the training process is killed (``kill -9``, the
OOM killer, a preempted node) it runs on as an orphan, holding memory, connections and open
files, until the read gives up. :func:`exit_with_parent` starts a daemon thread that asks every
``POLL_S`` seconds whether the parent is still the one that started the worker, and ends the
worker at once when it is not (an orphan is adopted by another process).
"""

from __future__ import annotations

import os
import signal
import threading
import time

POLL_S = 1.0  # how often the parent is asked for: the most an orphan outlives it, about


def exit_with_parent(poll_s: float = POLL_S) -> None:
    """End this process within ``poll_s`` seconds of its parent's death (see the module doc)."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        # nobody is left to clean up for: the process that read our results is gone
        os.kill(os.getpid(), getattr(signal, "SIGKILL", signal.SIGTERM))

    threading.Thread(target=watch, name="recipes-exit-with-parent", daemon=True).start()
