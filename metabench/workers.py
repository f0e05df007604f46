"""Worker processes that serve a vector env over one pipe each: start, send, wait, report a dead
worker, close.

:class:`~metabench.vector.sharded.ShardedVectorEnv` and
:class:`~metabench.tasks.halfcheetah.vector.HalfCheetahVectorEnv` each run a loop in their workers
(their own commands, their own replies); :class:`WorkerPool` holds what the two share:

- starting: one duplex pipe and one daemon process per worker, ``target(conn, parent_ends,
  *args)``; a forked worker inherits the parent's ends of every pipe made so far and must close
  them (:func:`worker_started` does, and leaves Ctrl-C to the parent), so that a worker sees
  end-of-file, and exits, when the parent dies without closing it;
- talking: :meth:`WorkerPool.send` / :meth:`WorkerPool.recv` (pickled objects) and
  :meth:`WorkerPool.send_bytes` / :meth:`WorkerPool.recv_bytes` (raw bytes, for a hot loop);
  a worker that is gone raises :class:`WorkerDied` with its index and exit code;
- closing: a close message to every live worker, optionally waiting for each one's reply, then a
  bounded ``join`` and ``terminate`` for those still running (idempotent).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import signal
import warnings
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from typing import Any, NoReturn

__all__ = ["WorkerDied", "WorkerPool", "worker_started"]

_BROKEN = (BrokenPipeError, ConnectionResetError, EOFError, OSError)


class WorkerDied(RuntimeError):
    """The worker process ``index`` is gone (``exitcode``: its exit code, if it has one)."""

    def __init__(self, index: int, exitcode: int | None) -> None:
        super().__init__(f"worker process {index} died (exit code {exitcode})")
        self.index = index
        self.exitcode = exitcode


def worker_started(parent_ends: Sequence[Connection]) -> None:
    """What a worker does first: ignore Ctrl-C (the parent's to handle) and close the parent's
    pipe ends it inherited."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for parent_end in parent_ends:
        parent_end.close()


class WorkerPool:
    """``len(args)`` worker processes running ``target(conn, parent_ends, *args[w])``.

    :param target: the worker's loop; ``conn`` is its end of its pipe, ``parent_ends`` the
        parent's pipe ends it inherited (empty unless forked), to pass to
        :func:`worker_started`.
    :param args: one tuple of further arguments per worker.
    :param names: one process name per worker.
    :param context: a multiprocessing start method (``"fork"``, ``"spawn"``, ...).
    """

    def __init__(
        self,
        target: Callable[..., None],
        args: Sequence[tuple[Any, ...]],
        names: Sequence[str],
        *,
        context: str = "fork",
    ) -> None:
        ctx: Any = multiprocessing.get_context(context)
        forked = context == "fork"
        self.conns: list[Connection] = []
        self.processes: list[multiprocessing.process.BaseProcess] = []
        self.closed = False
        for worker_args, name in zip(args, names, strict=True):
            conn, child_conn = ctx.Pipe()
            inherited = [conn, *self.conns] if forked else []
            process = ctx.Process(
                target=target, args=(child_conn, inherited, *worker_args), daemon=True, name=name
            )
            with warnings.catch_warnings():
                # Python >= 3.12 warns about fork() in a multi-threaded process (torch's pool):
                # the workers run only their own loop on their own data and take no lock.
                warnings.simplefilter("ignore", DeprecationWarning)
                process.start()
            child_conn.close()
            self.conns.append(conn)
            self.processes.append(process)

    def __len__(self) -> int:
        return len(self.processes)

    # -- talking -----------------------------------------------------------------------------------
    def send(self, w: int, message: Any) -> None:
        """Send ``message`` (pickled) to worker ``w``."""
        try:
            self.conns[w].send(message)
        except _BROKEN:
            self.died(w)

    def recv(self, w: int) -> Any:
        """Worker ``w``'s next message."""
        try:
            return self.conns[w].recv()
        except _BROKEN:
            self.died(w)

    def send_bytes(self, w: int, data: bytes) -> None:
        try:
            self.conns[w].send_bytes(data)
        except _BROKEN:
            self.died(w)

    def recv_bytes(self, w: int) -> bytes:
        try:
            return self.conns[w].recv_bytes()
        except _BROKEN:
            self.died(w)

    def died(self, w: int) -> NoReturn:
        """Raise :class:`WorkerDied` for worker ``w`` (after giving it a second to exit, so that
        its exit code is known)."""
        process = self.processes[w]
        process.join(1.0)
        raise WorkerDied(w, process.exitcode)

    # -- closing -----------------------------------------------------------------------------------
    def close(
        self,
        message: Any = None,
        *,
        raw: bool = False,
        wait_reply: bool = False,
        timeout: float = 5.0,
        terminate: bool = False,
    ) -> None:
        """Stop the workers (idempotent).

        :param message: the close command sent to every live worker (``raw``: as bytes).
        :param wait_reply: wait (at most ``timeout`` seconds each) for every worker's reply to
            it, e.g. once its envs are closed.
        :param timeout: seconds each worker gets to exit before it is terminated.
        :param terminate: send nothing and terminate the workers at once (after an error).
        """
        if self.closed:
            return
        self.closed = True
        live = [w for w, process in enumerate(self.processes) if process.is_alive()]
        if not terminate:
            for w in live:
                with contextlib.suppress(*_BROKEN):
                    if raw:
                        self.conns[w].send_bytes(message)
                    else:
                        self.conns[w].send(message)
            for w in live if wait_reply else []:
                conn = self.conns[w]
                with contextlib.suppress(*_BROKEN):
                    if self.processes[w].is_alive() and conn.poll(timeout):
                        if raw:
                            conn.recv_bytes()
                        else:
                            conn.recv()
        for process in self.processes:
            process.join(0 if terminate else timeout)
            if process.is_alive():
                process.terminate()
                process.join()
        for conn in self.conns:
            conn.close()
