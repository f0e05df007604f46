"""Ctrl-C during a run: stop at the next iteration boundary, with a checkpoint, not mid-write.

A ``KeyboardInterrupt`` raised at an arbitrary bytecode can land inside a library holding a lock
(the progress bar's refresh, the TensorBoard writer) and leave the process unable to exit. The
first Ctrl-C therefore only asks the run to stop: the loop checkpoints the iteration it is in and
raises ``KeyboardInterrupt`` itself, at a point where nothing is half done. A second Ctrl-C
interrupts at once, as usual.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

from rich.console import Console


@contextmanager
def stop_at_iteration_end(console: Console) -> Iterator[Callable[[], bool]]:
    """Within the block, the first SIGINT sets a flag that the returned function reads; the
    second raises ``KeyboardInterrupt``. Outside the main thread, where no handler can be set,
    the flag stays false and Ctrl-C behaves as usual."""
    requested = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield requested.is_set
        return

    def handle(signum: int, frame: FrameType | None) -> None:
        if requested.is_set():
            raise KeyboardInterrupt
        requested.set()
        console.print("stopping after this iteration (Ctrl-C again to stop at once)")

    previous = signal.signal(signal.SIGINT, handle)
    try:
        yield requested.is_set
    finally:
        signal.signal(signal.SIGINT, previous)
