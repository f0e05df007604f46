"""Where each run directory stands (``metabench status``), read from its files.

A run of a published budget takes hours, often under ``nohup`` or a scheduler; this answers
"how far is it, is it still going, and how is it doing" without opening its log. Nothing is
written, the checkpoint is read as ``metabench train`` reads it (tensors and plain values
only), and the directory's lock is only probed, so it is safe beside a running run. Below a
grid's results folder, the cells its plan lists that have not started yet are listed too.
"""

from __future__ import annotations

import fcntl
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from metabench.analysis.resultfile import CorruptResultError, read_result
from metabench.analysis.stats import episode_success_rate, metaworld_success_rate
from metabench.analysis.tables import ERROR_FILE
from metabench.errors import RunError
from metabench.harness.cells import PLAN_FILE
from metabench.harness.run import RunDirectory
from metabench.records import EvaluationRecord, MetaTestRecord, RunResult


@dataclass(frozen=True)
class MetaTestPoint:
    """The figures of one meta-test: the latest one during training, or the final one."""

    env_steps: int
    test_return: float
    success: float | None
    """Success of the test episodes (``None`` where the benchmark has no success)."""
    metaworld_success: float | None
    """Meta-World's count of the same episodes (Meta-World benchmarks only)."""

    @classmethod
    def from_record(cls, record: MetaTestRecord, env_steps: int) -> MetaTestPoint:
        """From a meta-test as recorded (``evaluations/*.json``, ``result.json``'s
        ``metatest``)."""
        return cls(
            env_steps=env_steps,
            test_return=record.test_return,
            success=episode_success_rate(record),
            metaworld_success=metaworld_success_rate(record),
        )


@dataclass(frozen=True)
class RunStatus:
    """One run directory's state, progress and latest meta-test."""

    path: Path
    benchmark: str
    algorithm: str
    seed: int
    state: str
    """``finished`` (a result), ``running`` (a process holds the lock), ``failed`` (a grid
    cell's ``error.json``), ``stopped`` (a checkpoint, no process) or ``not started``."""
    iteration: int
    """Iterations done (those of the latest checkpoint while the run goes)."""
    n_iterations: int | None
    """Iterations of the whole run; ``None`` where no file says (a checkpoint of a version
    before 0.x that recorded it, and no meta-test yet)."""
    env_steps: int | None
    env_steps_budget: int
    planned_env_steps: int
    """Env steps of the whole run: the iterations the budget buys and an initial collection
    (PEARL's) on top of them, once a checkpoint or the result says; the budget before."""
    wall_time_s: float | None
    """Seconds of training up to the latest checkpoint (or the whole run, once finished)."""
    metatest: MetaTestPoint | None
    final: bool
    """Whether :attr:`metatest` is the final meta-test (else the latest periodic one)."""
    holder: str | None = None
    """Who holds the lock (``pid N``) while the run goes."""
    command: str | None = None
    """The command that resumes the run, as its latest checkpoint recorded it (``None``: a
    checkpoint written before checkpoints recorded it, or none)."""
    best: MetaTestPoint | None = None
    """The periodic meta-test of highest success so far (the first of equals): the statistic
    the Meta-World paper reports per run; ``None`` without periodic meta-tests with success."""

    @property
    def time_left_s(self) -> float | None:
        """Training time left at the pace so far (the periodic meta-tests included; the final
        meta-test not), ``None`` where it cannot be told."""
        if self.state == "finished" or not self.iteration or self.n_iterations is None:
            return None
        if self.wall_time_s is None:
            return None
        return self.wall_time_s / self.iteration * (self.n_iterations - self.iteration)


def find_runs(root: Path) -> list[Path]:
    """``root`` if it is a run directory, else every run directory below it (a grid's
    ``--results``, a folder of runs) and every cell below it that a grid planned but has not
    started (:func:`planned_cells`), sorted; :class:`RunError` if there is none."""
    planned = planned_cells(root)
    if not root.exists() and not planned:
        raise RunError(
            f"{root} does not exist: give a run directory or a folder of runs (metabench "
            f"status PATH ...)"
        )
    if (root / "config.json").is_file():
        return [root]
    started = {path.parent for path in root.rglob("config.json")} if root.exists() else set()
    runs = sorted(started | set(planned))
    if not runs:
        raise RunError(
            f"no run directory (a folder with config.json) under {root}: give the --out of "
            f"metabench train or the --results of metabench bench"
        )
    return runs


def planned_cells(root: Path) -> dict[Path, dict[str, Any]]:
    """Every cell at or below ``root`` that a grid planned (``metabench bench`` records its
    plan in its results folder's ``.metabench-grid.json`` before any cell runs), with its
    planned benchmark, algorithm, seed and steps. A plan file that cannot be read is passed
    over: the cells that started are found without it."""
    resolved = root.resolve()
    below = root.rglob(PLAN_FILE) if root.is_dir() else []
    plans = [*below, *(folder / PLAN_FILE for folder in resolved.parents)]
    cells: dict[Path, dict[str, Any]] = {}
    for plan in plans:
        if not plan.is_file():
            continue
        try:
            entries = json.loads(plan.read_text())["cells"]
            for entry in entries:
                cell = (plan.parent / str(entry["path"])).resolve()
                if cell == resolved or resolved in cell.parents:
                    cells[root / cell.relative_to(resolved)] = entry
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return cells


def run_status(path: Path) -> RunStatus:
    """The state of the run directory ``path`` (a cell a grid planned: not started until it
    has a ``config.json``); :class:`RunError` if its files are not a run's (the message says
    which)."""
    run = RunDirectory(path)
    config = run.read_config()
    if config is None:
        planned = planned_cells(path).get(path)
        if planned is not None:
            return _not_started(path, planned)
        raise RunError(f"{path} has no config.json: it is not a metabench run directory")
    budget = config.env_steps_budget
    start = RunStatus(
        path=path,
        benchmark=config.benchmark,
        algorithm=config.algorithm,
        seed=config.seed,
        state="not started",
        iteration=0,
        n_iterations=None,
        env_steps=None,
        env_steps_budget=budget,
        planned_env_steps=budget,
        wall_time_s=None,
        metatest=None,
        final=False,
    )
    periodic = _periodic_metatests(run)
    with_success = [point for _, point in periodic if point.success is not None]
    start = replace(start, best=max(with_success, key=lambda p: p.success or 0.0, default=None))
    result = _result(run)
    if result is not None:
        return replace(
            start,
            state="finished",
            iteration=result.iterations,
            n_iterations=result.iterations,
            env_steps=result.env_steps,
            planned_env_steps=result.env_steps,
            wall_time_s=result.wall_time_s,
            metatest=MetaTestPoint.from_record(result.metatest, result.env_steps),
            final=True,
        )
    checkpoint = run.load_checkpoint() or {}
    iteration = int(checkpoint.get("iteration", 0))
    latest = periodic[-1] if periodic else None
    n_iterations, env_steps = checkpoint.get("n_iterations"), checkpoint.get("env_steps")
    if n_iterations is None and latest is not None and latest[0] > 0:
        # a checkpoint that did not record them: the meta-tests give the steps per iteration
        per_iteration = latest[1].env_steps // latest[0]
        env_steps = iteration * per_iteration
        n_iterations = start.env_steps_budget // per_iteration if per_iteration else None
    holder = _lock_holder(path)
    if holder is not None:
        state = "running"
    elif (path / ERROR_FILE).exists():
        state = "failed"
    else:
        state = "stopped" if checkpoint else start.state
    return replace(
        start,
        state=state,
        iteration=iteration,
        n_iterations=None if n_iterations is None else int(n_iterations),
        env_steps=None if env_steps is None else int(env_steps),
        planned_env_steps=int(checkpoint.get("planned_env_steps", start.planned_env_steps)),
        wall_time_s=checkpoint.get("wall_time"),
        metatest=None if latest is None else latest[1],
        holder=holder,
        command=checkpoint.get("command"),
    )


def _not_started(path: Path, planned: dict[str, Any]) -> RunStatus:
    """A cell of a grid that has not started: what its grid planned."""
    try:
        steps = int(planned["steps"])
        return RunStatus(
            path=path,
            benchmark=str(planned["benchmark"]),
            algorithm=str(planned["algorithm"]),
            seed=int(planned["seed"]),
            state="not started",
            iteration=0,
            n_iterations=None,
            env_steps=None,
            env_steps_budget=steps,
            planned_env_steps=steps,
            wall_time_s=None,
            metatest=None,
            final=False,
        )
    except (KeyError, TypeError, ValueError):
        raise RunError(
            f"{path} is planned in its grid's {PLAN_FILE}, which is damaged: run the grid "
            "again to rewrite it"
        ) from None


def _result(run: RunDirectory) -> RunResult | None:
    """The run's result, ``None`` without one; a corrupt one is left where it is (``train``
    sets it aside when it resumes) and reported as missing."""
    if not run.result_path.is_file():
        return None
    try:
        return read_result(run.result_path)
    except CorruptResultError:
        return None


def _periodic_metatests(run: RunDirectory) -> list[tuple[int, MetaTestPoint]]:
    """The readable periodic meta-tests, in order of iteration: each one's iteration and
    figures (a file being written or damaged is passed over)."""
    points = []
    for file in sorted(run.evaluations.glob("iteration-*.json")):
        try:
            record = EvaluationRecord.from_json(json.loads(file.read_text()))
            if record.env_steps is None:  # recorded before the env steps were
                continue
            point = MetaTestPoint.from_record(record.metatest, record.env_steps)
            points.append((record.iteration, point))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
    return points


def _lock_holder(path: Path) -> str | None:
    """What the lock file says (``pid N``) while a process holds the run's lock, else ``None``.

    The probe takes a shared lock and drops it at once: ``metabench train`` starting in the
    same microsecond into this directory would be refused as "in use" (and can be run again),
    which is the price of asking the operating system rather than trusting a pid that may
    have been reused.
    """
    lock = path / ".lock"
    if not lock.is_file():
        return None
    with lock.open("r") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return handle.read().strip() or "another process"
        fcntl.flock(handle, fcntl.LOCK_UN)
    return None
