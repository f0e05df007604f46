"""Where the cells of a grid run: on this machine, or on a Ray cluster.

Both executors run each cell with :func:`~metabench.harness.cells.run_cell` (one ``metabench
train`` subprocess per cell, so a crashing cell cannot take the grid down) and yield every
``(cell, outcome)`` as soon as that cell finishes, so the caller can report progress as it goes.

``local`` runs ``cores`` cores' worth of cells at once on this machine. ``ray`` sends each
cell, as a task that asks for ``cell.cpus`` cores, to a running Ray cluster (``ray start --head``
on one machine, ``ray start --address HOST:PORT`` on the others) and copies each cell's small
files back, so the results land here even when the nodes share no filesystem.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any, Protocol

from metabench.atomic import atomic_write_bytes, atomic_write_json
from metabench.errors import RunError
from metabench.harness.cells import Cell, run_cell, shell_command

EXECUTORS = ("local", "ray")

RETURNED_FILES = ("result.json", "config.json", "error.json", "train.log")
"""The files of a cell that a Ray task sends back to the driver: small, and all a report needs
(checkpoints and TensorBoard curves stay on the node that ran the cell)."""

CONNECT_TIMEOUT = 3.0
"""Seconds to wait for a Ray cluster's port before calling it unreachable: ``ray.init`` itself
retries an address that does not answer for minutes without saying why."""


class Executor(Protocol):
    """Runs the cells of a grid somewhere."""

    def run(self, cells: Sequence[Cell]) -> Iterator[tuple[Cell, str | None]]:
        """Run the cells, yielding each (cell, outcome of run_cell) as it finishes."""
        ...

    def close(self) -> None:
        """Release what the executor holds (a Ray connection); it cannot run cells after."""
        ...


def make_executor(name: str, *, cores: int, address: str | None) -> Executor:
    """The executor called ``name``: ``local`` (``cores`` cores at once on this machine) or
    ``ray`` (the cluster at ``address``; ``None`` means ``"auto"``: the cluster that ``ray
    start`` last started on this machine, or the one ``RAY_ADDRESS`` names)."""
    if name == "local":
        return LocalExecutor(cores)
    if name == "ray":
        return RayExecutor(address if address is not None else "auto")
    raise RunError(f"unknown executor {name!r}: choose one of {', '.join(EXECUTORS)}")


class LocalExecutor:
    """Runs cells side by side on this machine, never more than ``cores`` cores' worth at once.

    Each cell is its own subprocess, so threads that wait on them are enough. A cell starts as
    soon as its own ``cpus`` fit in the free cores (cells are tried in grid order, so a small
    cell can overtake a large one that does not fit yet); a cell that needs more than ``cores``
    runs alone rather than never.
    """

    def __init__(self, cores: int) -> None:
        if cores < 1:
            raise RunError(f"--cores must be at least 1, got {cores}")
        self.cores = cores

    def run(self, cells: Sequence[Cell]) -> Iterator[tuple[Cell, str | None]]:
        """Run the cells, yielding each (cell, outcome of run_cell) as it finishes."""
        pending = list(cells)
        running: dict[Future[str | None], Cell] = {}
        busy = 0
        # stopped early (an error, or the caller stops reading), it starts no more cells and
        # leaving the pool waits for the running ones
        with ThreadPoolExecutor(max_workers=self.cores) as pool:
            while pending or running:
                for cell in list(pending):
                    width = max(cell.cpus, 1)
                    if busy + width <= self.cores or not running:
                        pending.remove(cell)
                        running[pool.submit(run_cell, cell)] = cell
                        busy += width
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in done:
                    cell = running.pop(future)
                    busy -= max(cell.cpus, 1)
                    yield cell, future.result()

    def close(self) -> None:
        """Nothing to release: each run's threads end with it."""


class RayExecutor:
    """Runs each cell as a Ray task on the cluster at ``address`` and brings its results back.

    ``address`` is what ``ray start --head`` prints (``HOST:PORT``), ``"auto"`` (the cluster
    running on this machine, or ``RAY_ADDRESS``) or a Ray Client ``ray://HOST:PORT``. The
    cluster must already run: this class connects to it and never starts one.

    Every task asks Ray for ``cell.cpus`` cores (at most the largest node's, so that a large
    cell runs on that node rather than waits forever) and, for a cell on a GPU (``--device
    cuda``, or ``auto`` on a cluster with GPUs), for one GPU, runs the cell on whichever node has
    them, and returns its outcome with its small files (:data:`RETURNED_FILES`), which the driver
    writes into ``cell.out`` here. The nodes need metabench installed, and the cell writes its
    directory at the same path on the node: checkpoints and TensorBoard curves stay there, so an
    interrupted cell resumes only if it lands on the same node again (or the nodes share the
    results folder).
    """

    def __init__(self, address: str) -> None:
        try:
            import ray
        except ImportError as error:
            raise RunError('the ray executor needs Ray: pip install "metabench[ray]"') from error
        self._ray: Any = ray
        self.address = address
        check_reachable(address)
        try:
            ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
        except (ConnectionError, RuntimeError, ValueError, TimeoutError) as error:
            reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
            raise RunError(f"cannot connect to the Ray cluster at {address}: {reason}") from error
        self._task = ray.remote(run_on_node)

    def run(self, cells: Sequence[Cell]) -> Iterator[tuple[Cell, str | None]]:
        """Run the cells, yielding each (cell, outcome of run_cell) as it finishes."""
        ray = self._ray
        alive = [node["Resources"] for node in ray.nodes() if node["Alive"]]
        largest = max((node.get("CPU", 0) for node in alive), default=0)
        has_gpus = any(node.get("GPU", 0) >= 1 for node in alive)
        running: dict[Any, Cell] = {}
        for cell in cells:
            cpus = max(cell.cpus, 1)
            if largest >= 1:  # more than any node has would wait forever: run it oversubscribed
                cpus = min(cpus, largest)
            # a cell on a GPU gets one reserved (``auto``: where the cluster has any)
            gpus = int(cell.device.startswith("cuda") or (cell.device == "auto" and has_gpus))
            running[self._task.options(num_cpus=cpus, num_gpus=gpus).remote(cell)] = cell
        try:
            while running:
                done, _ = ray.wait(list(running), num_returns=1)
                for ref in done:
                    cell = running.pop(ref)
                    yield cell, self._collect(ref, cell)
        finally:
            # stopped early: a cancelled task's run_cell stops its subprocess on the interrupt
            for ref in running:
                ray.cancel(ref)

    def _collect(self, ref: Any, cell: Cell) -> str | None:
        """The outcome of a finished task, its files written back into ``cell.out``."""
        try:
            outcome, files = self._ray.get(ref)
        except self._ray.exceptions.RayError as error:
            # the task never returned (its node died, or it was cancelled): record it like a crash
            tail = str(error).strip().splitlines()[-5:]
            cell.out.mkdir(parents=True, exist_ok=True)
            atomic_write_json(
                cell.out / "error.json",
                {"command": shell_command(cell), "exit_code": None, "log_tail": tail},
            )
            return f"Ray task failed: {tail[-1] if tail else type(error).__name__}"
        write_back(cell.out, files, succeeded=outcome is None)
        return outcome

    def close(self) -> None:
        """Disconnect from the cluster (which keeps running)."""
        self._ray.shutdown()


def run_on_node(cell: Cell) -> tuple[str | None, dict[str, bytes]]:
    """Run one cell where Ray placed it; its outcome and small files (for the driver)."""
    outcome = run_cell(cell)  # Cell.command() reads sys.executable: this node's Python
    files = {name: (cell.out / name).read_bytes() for name in RETURNED_FILES
             if (cell.out / name).is_file()}  # fmt: skip
    return outcome, files


def write_back(out: Path, files: dict[str, bytes], *, succeeded: bool) -> None:
    """Write a cell's returned files into ``out`` (each atomically); a cell that succeeded
    leaves no ``error.json`` behind from an earlier failed attempt."""
    out.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        if name not in RETURNED_FILES:  # a name from the node never picks the path here
            raise ValueError(f"unexpected file {name!r} returned for {out}")
        atomic_write_bytes(out / name, data)
    if succeeded:
        (out / "error.json").unlink(missing_ok=True)


def check_reachable(address: str, timeout: float = CONNECT_TIMEOUT) -> None:
    """Fail fast, with the fix, when nothing answers at a Ray address (``ray.init`` would retry
    for minutes). ``"auto"`` is resolved as Ray does: ``RAY_ADDRESS``, else the cluster ``ray
    start`` last started on this machine."""
    target = _resolve_auto() if address == "auto" else address
    if target == "auto":  # cannot tell where "auto" points: ray.init finds out
        return
    host_port = target.removeprefix("ray://")
    host, _, port = host_port.rpartition(":")
    if not host or not port.isdigit():
        raise RunError(
            f"Ray address {address!r} is not HOST:PORT: pass the address 'ray start --head' "
            "prints (--address HOST:PORT)"
        )
    started = time.monotonic()
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            pass
    except OSError as error:
        waited = time.monotonic() - started
        reason = "no answer" if isinstance(error, TimeoutError) else error.strerror or str(error)
        raise RunError(
            f"Ray cluster at {host_port} does not answer ({reason} after {waited:.1f} s): start "
            "one with 'ray start --head' or pass the address it prints (--address HOST:PORT)"
        ) from error


def _resolve_auto() -> str:
    """The HOST:PORT that ``ray.init(address="auto")`` would connect to."""
    try:
        from ray._private.services import canonicalize_bootstrap_address
    except ImportError:  # Ray moved its internals: let ray.init resolve "auto" itself
        return "auto"
    try:
        resolved = canonicalize_bootstrap_address("auto")
    except (ConnectionError, ValueError) as error:
        raise RunError(
            "no Ray cluster is running on this machine: start one with 'ray start --head' or "
            "pass the address of a running one (--address HOST:PORT)"
        ) from error
    return resolved or "auto"
