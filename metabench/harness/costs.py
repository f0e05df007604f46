"""What a grid will cost: each cell's wall time from a calibration of this machine, and the
grid's on the local executor and on a Ray cluster.

A run is set-up (building the algorithm and its envs), a one-off collection before the first
iteration (PEARL's initial steps; none for the other algorithms), ``iterations`` training
iterations of equal size, then the final meta-test (and Meta-World's meta-test on training tasks). A
meta-test of ``n`` tasks costs ``metatest_fixed_s + n * task_s``: its worker processes and
envs are built once per meta-test, and a batched meta-test steps every task's trial at once, one
policy call per step for all of them, so its time is not proportional to ``n`` (measured on
ML1-push: 10 tasks ~30 s, 50 tasks ~120 s). So a cell's time is

    setup_s + initial_s + iterations * iteration_s
        + sum over its meta-tests of (metatest_fixed_s + n * task_s)

with the times measured on this machine by :mod:`metabench.harness.calibration` for the cell's
benchmark, algorithm, settings, cores and device; its meta-tests are the final ones and those of
its ``--eval-every-steps`` during training. Checkpoints are left out (a few seconds each).
``scripts/plan_check.py`` sets the prediction beside the measured time of a real grid or run.

The grid's time replays the executors' own scheduling (:class:`~metabench.harness.executors.
LocalExecutor`: a cell starts, in grid order, as soon as its cores are free; Ray packs cells
onto nodes the same way, node by node) with the predicted cell times.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class CellTimes:
    """A calibration's measured times for one benchmark x algorithm (x settings, cores, device).

    :param setup_s: building the algorithm and its envs.
    :param iteration_s: one training iteration.
    :param steps_per_iteration: environment steps of that iteration.
    :param metatest_fixed_s: a meta-test's cost whatever its number of tasks (its processes and
        envs, and for a batched meta-test the policy calls a task shares with the others).
    :param task_s: each further meta-test task (exploration, adaptation and test episodes), at
        the run's meta-test processes.
    :param env_steps_per_s: the benchmark's env-only step rate on one core (random actions): the
        ceiling the iteration's rate is compared with.
    :param initial_s: the collection the first iteration makes before its own (PEARL's initial
        steps, ``MetaRLAlgorithm.initial_steps``; 0 for the others), paid once per run.
    """

    setup_s: float
    iteration_s: float
    steps_per_iteration: int
    metatest_fixed_s: float
    task_s: float
    env_steps_per_s: float
    initial_s: float

    def metatest_s(self, tasks: int) -> float:
        """One meta-test of ``tasks`` tasks (none: nothing)."""
        return self.metatest_fixed_s + tasks * self.task_s if tasks else 0.0

    @property
    def steps_per_s(self) -> float:
        """Training's env steps per second (the update included)."""
        return self.steps_per_iteration / self.iteration_s if self.iteration_s > 0 else 0.0


@dataclass(frozen=True)
class CellCost:
    """A cell's predicted wall time, part by part."""

    iterations: int
    setup_s: float
    train_s: float
    """The iterations, and the collection before the first one."""
    metatest_s: float

    @property
    def total_s(self) -> float:
        return self.setup_s + self.train_s + self.metatest_s


def cell_cost(times: CellTimes, env_steps: int, metatests: Sequence[int]) -> CellCost:
    """The predicted time of a run of ``env_steps`` (whole iterations only, never more, as
    ``metabench train`` counts them) followed by meta-tests of ``metatests`` tasks each."""
    if env_steps < 0 or any(tasks < 0 for tasks in metatests):
        raise ValueError(
            f"env_steps and meta-test tasks must be >= 0, got {env_steps}, {list(metatests)}"
        )
    iterations = env_steps // times.steps_per_iteration if times.steps_per_iteration else 0
    return CellCost(
        iterations=iterations,
        setup_s=times.setup_s,
        train_s=(times.initial_s if iterations else 0.0) + iterations * times.iteration_s,
        metatest_s=sum(times.metatest_s(tasks) for tasks in metatests),
    )


def fit_metatest(small: tuple[int, float], large: tuple[int, float]) -> tuple[float, float]:
    """``(metatest_fixed_s, task_s)`` through two measured meta-tests, each ``(tasks, seconds)``.
    Where the two cannot separate them (one size, or a larger meta-test no slower: noise), the
    larger one's time per task, with no fixed part."""
    (n_small, t_small), (n_large, t_large) = small, large
    if min(n_small, n_large) < 1:
        raise ValueError(f"meta-test sizes must be >= 1, got {n_small}, {n_large}")
    if n_large > n_small and t_large > t_small:
        task_s = (t_large - t_small) / (n_large - n_small)
        fixed_s = t_small - n_small * task_s
        if fixed_s >= 0:
            return fixed_s, task_s
    return 0.0, t_large / n_large


def schedule_time(durations: Sequence[float], cpus: Sequence[int], cores: int) -> float:
    """The wall time of cells of these ``durations`` (seconds) and ``cpus`` (cores each) run as
    :class:`~metabench.harness.executors.LocalExecutor` runs them on ``cores`` cores: whenever
    cores free up, every waiting cell whose cores fit starts, in grid order; a cell wider than
    the machine runs alone."""
    if len(durations) != len(cpus):
        raise ValueError(f"{len(durations)} durations for {len(cpus)} cells")
    if cores < 1:
        raise ValueError(f"cores must be at least 1, got {cores}")
    pending = list(range(len(durations)))
    running: list[tuple[float, int]] = []  # (end time, cell) heap
    busy, now = 0, 0.0
    while pending or running:
        for cell in list(pending):
            width = max(cpus[cell], 1)
            if busy + width <= cores or not running:
                pending.remove(cell)
                heapq.heappush(running, (now + durations[cell], cell))
                busy += width
        now, cell = heapq.heappop(running)
        busy -= max(cpus[cell], 1)
        while running and running[0][0] == now:  # cells ending together free their cores at once
            busy -= max(cpus[heapq.heappop(running)[1]], 1)
    return now


def cluster_time(durations: Sequence[float], cpus: Sequence[int], nodes: int, cores: int) -> float:
    """The wall time of the cells on ``nodes`` machines of ``cores`` cores each: a cell starts,
    in grid order, on the first node where its cores are free (as Ray places tasks that ask for
    ``num_cpus``; a cell wider than a node asks for the whole node)."""
    if nodes < 1:
        raise ValueError(f"nodes must be at least 1, got {nodes}")
    if cores < 1:
        raise ValueError(f"cores must be at least 1, got {cores}")
    free = [cores] * nodes
    pending = list(range(len(durations)))
    running: list[tuple[float, int, int]] = []  # (end time, cell, node) heap
    now = 0.0
    while pending:
        for cell in list(pending):
            width = min(max(cpus[cell], 1), cores)
            node = next((n for n in range(nodes) if free[n] >= width), None)
            if node is not None:
                pending.remove(cell)
                free[node] -= width
                heapq.heappush(running, (now + durations[cell], cell, node))
        if pending:
            now, cell, node = heapq.heappop(running)
            free[node] += min(max(cpus[cell], 1), cores)
    return max([now, *(end for end, _, _ in running)])
