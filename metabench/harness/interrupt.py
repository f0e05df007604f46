"""Ctrl-C during a run: stop at the next iteration boundary, with a checkpoint, not mid-write.

A ``KeyboardInterrupt`` raised at an arbitrary bytecode can land inside a library holding a lock
(the progress bar's refresh, the TensorBoard writer) and leave the process unable to exit. The
first Ctrl-C therefore only asks the run to stop: the loop checkpoints the iteration it is in and
raises ``KeyboardInterrupt`` itself, at a point where nothing is half done. A second Ctrl-C
interrupts at once, as usual.

The signal handler runs on the main thread between two of its bytecodes, wherever that is, so it
does nothing but set flags: printing from it ran the console's code inside whatever the main
thread was doing, and a Ctrl-C that came while a progress line was importing rich's emoji table
failed the run with an ``ImportError`` ("partially initialized module"). A thread of its own
prints the notice, through the console's lock, as any other thread would.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

from rich.console import Console

NOTICE = "stopping after this iteration (Ctrl-C again to stop at once)"


@contextmanager
def stop_at_iteration_end(console: Console) -> Iterator[Callable[[], bool]]:
    """Within the block, the first SIGINT sets a flag that the returned function reads, and
    ``console`` says so; the second raises ``KeyboardInterrupt``. Outside the main thread, where
    no handler can be set, the flag stays false and Ctrl-C behaves as usual."""
    if threading.current_thread() is not threading.main_thread():
        yield lambda: False
        return
    requested = False
    wake = threading.Event()

    def handle(signum: int, frame: FrameType | None) -> None:
        nonlocal requested
        if requested:
            raise KeyboardInterrupt
        requested = True  # before wake.set(): a second Ctrl-C inside it raises, as it should
        wake.set()

    def announce() -> None:
        wake.wait()
        if requested:
            console.print(NOTICE)

    announcer = threading.Thread(target=announce, name="ctrl-c-notice", daemon=True)
    announcer.start()
    previous = signal.signal(signal.SIGINT, handle)
    try:
        yield lambda: requested
    finally:
        signal.signal(signal.SIGINT, previous)
        wake.set()  # ends the announcer; after a Ctrl-C its notice is printed before the block ends
        announcer.join()


@contextmanager
def interrupts_at_once() -> Iterator[None]:
    """Within the block, Ctrl-C raises ``KeyboardInterrupt`` at once, even in a process that
    started with SIGINT ignored (a job started in the background of a script): a run stops on
    Ctrl-C in its final meta-test as it does while it trains, whatever it inherited."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
