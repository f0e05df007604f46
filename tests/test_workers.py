"""WorkerPool: the worker-process lifecycle the sharded and the HalfCheetah vector envs share."""

from __future__ import annotations

import os
from collections.abc import Sequence
from multiprocessing.connection import Connection

import pytest

from metabench.workers import WorkerDied, WorkerPool, worker_started


def echo(conn: Connection, parent_ends: Sequence[Connection], offset: int) -> None:
    """Replies ``message + offset``; exits with code 3 on ``"exit"``, returns on ``None``."""
    worker_started(parent_ends)
    try:
        while (message := conn.recv()) is not None:
            if message == "exit":
                os._exit(3)
            conn.send(message + offset)
        conn.send("closed")
    except EOFError:
        pass


def test_workers_answer_in_order_and_close_stops_them():
    pool = WorkerPool(echo, [(10,), (20,)], ["echo-0", "echo-1"])
    assert len(pool) == 2 and all(process.is_alive() for process in pool.processes)
    for w in range(2):
        pool.send(w, 1)
    assert [pool.recv(w) for w in range(2)] == [11, 21]
    pool.close(None, wait_reply=True, timeout=5.0)
    assert pool.closed and not any(process.is_alive() for process in pool.processes)
    pool.close(None)  # idempotent


def test_a_dead_worker_is_reported_with_its_exit_code():
    pool = WorkerPool(echo, [(0,), (0,)], ["echo-0", "echo-1"])
    try:
        pool.send(1, "exit")
        with pytest.raises(WorkerDied, match=r"worker process 1 died \(exit code 3\)") as caught:
            pool.recv(1)
        assert caught.value.index == 1 and caught.value.exitcode == 3
        pool.send(0, 1)
        assert pool.recv(0) == 1  # the others still serve
    finally:
        pool.close(terminate=True)
    assert not any(process.is_alive() for process in pool.processes)


def test_a_worker_exits_when_the_parent_end_of_its_pipe_closes():
    """Forked later, worker 1 inherited the parent's end of worker 0's pipe and closed it: so
    worker 0 sees end-of-file (as when the parent dies) and exits."""
    pool = WorkerPool(echo, [(0,), (0,)], ["echo-0", "echo-1"])
    try:
        pool.conns[0].close()
        pool.processes[0].join(5.0)
        assert pool.processes[0].exitcode == 0
        assert pool.processes[1].is_alive()
    finally:
        pool.close(terminate=True)
