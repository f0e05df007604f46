"""A short calibration of this machine for :mod:`metabench.harness.costs`: for one grid cell's
benchmark, algorithm, settings, cores and device, the time to build the run, one training
iteration (and, for an algorithm that collects steps before its first iteration, as PEARL does,
that collection: the first iteration less a second one), a meta-test's fixed and per-task costs
(from two meta-tests of different sizes), and the benchmark's env-only step rate on one core.

Each calibration runs in a fresh process, as a grid cell does: its env worker processes, torch
threads and caches cannot leak into the next one. It trains one iteration of the real settings
(no shortened stand-in: the update's cost does not scale with the batch in the same way for
every algorithm), so a Meta-World ML10 calibration takes a few minutes on 2 cores. The results
are kept in a JSON file (``~/.cache/metabench/calibration.json``) keyed by the machine and the
cell's settings, so each is measured once; ``metabench plan --recalibrate`` measures again.

``metabench train`` says its run's predicted time from the same file before it starts
(:func:`forecast`), and ``metabench train --predict`` measures one first.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import torch

from metabench._version import __version__
from metabench.algos.base import MetaRLAlgorithm
from metabench.analysis.formatting import format_duration
from metabench.atomic import atomic_write_json
from metabench.harness.algorithms import get_algorithm
from metabench.harness.cells import Cell
from metabench.harness.costs import CellCost, CellTimes, cell_cost, fit_metatest
from metabench.harness.provenance import cpu_model, git_revision
from metabench.harness.run import RunPlan, RunSettings, build_algorithm, plan_run

ENV_ONLY_SECONDS = 2.0
"""How long the env-only rate steps random actions (after one episode's warm-up)."""


def default_cache() -> Path:
    """Where calibrations are kept: ``$XDG_CACHE_HOME/metabench`` (``~/.cache/metabench``)."""
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "metabench" / "calibration.json"


def cell_plan(cell: Cell) -> RunPlan:
    """The run ``cell`` would start (nothing is built or written)."""
    out = Path(tempfile.gettempdir()) / "metabench-calibration"
    return plan_run(
        RunSettings(
            cell.benchmark,
            cell.algorithm,
            cell.seed,
            cell.steps,
            out,
            dict(cell.overrides),
            cpus=min(cell.cpus, os.cpu_count() or 1),
            device=cell.device,
        )
    )


def metatest_sizes(plan: RunPlan) -> list[int]:
    """Tasks of each of the run's final meta-tests: the test tasks, then Meta-World's training
    tasks where the benchmark has them."""
    train = len(plan.config.train_evaluation_tasks or ())
    return [len(plan.test_tasks), *([train] if train else [])]


def periodic_metatest_sizes(cell: Cell, plan: RunPlan, steps_per_iteration: int) -> list[int]:
    """Tasks of each meta-test the cell makes during training (its ``eval_schedule``, on the
    periodic subset of the test tasks)."""
    if not cell.eval_schedule or not steps_per_iteration:
        return []
    n_iterations = cell.steps // steps_per_iteration
    count = cell.eval_schedule.count(n_iterations, steps_per_iteration)
    return [len(plan.periodic_evaluator().test_tasks)] * count


def calibration_tasks(plan: RunPlan) -> tuple[list[int], list[int]]:
    """The test tasks (indices) of the calibration's two meta-tests: as many as the meta-test
    has processes, then the periodic meta-tests' subset (as many of each class) or four times as
    many. Both are spread over the list, which holds Meta-World's test classes one after
    another, and their step costs differ up to 2x."""
    n = len(plan.test_tasks)
    processes = plan.metatest_processes or 1
    small = spread(n, min(n, processes))
    periodic = plan.config.periodic_test_tasks
    return small, list(periodic) if periodic else spread(n, min(n, 4 * processes))


def spread(n: int, k: int) -> list[int]:
    """``k`` of the indices ``0 .. n - 1``, evenly spaced, first and last included."""
    return sorted({int(i) for i in np.linspace(0, n - 1, k).round()}) if k > 0 else []


def calibration_key(plan: RunPlan) -> str:
    """What a calibration depends on: the machine, the code, and the cell's settings (not its
    seed or budget)."""
    config = plan.config
    record = {
        "cpu": cpu_model(),
        "metabench": __version__,
        "cores": os.cpu_count(),
        "torch": torch.__version__,
        "code": git_revision(),
        "benchmark": config.benchmark,
        "algorithm": config.algorithm,
        "hyperparameters": config.hyperparameters,
        "cpus": config.cpus,
        "device": config.device,
    }
    text = json.dumps(record, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class CalibrationCache:
    """The calibrations measured on this machine, one JSON file (written atomically)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: dict[str, dict[str, Any]] = {}
        if path.exists():
            try:
                self.entries = json.loads(path.read_text())["calibrations"]
            except (ValueError, KeyError, TypeError) as error:
                raise ValueError(
                    f"{path} is not a metabench calibration file ({error}): delete it, or give "
                    f"another file with --calibration"
                ) from None

    def get(self, key: str) -> CellTimes | None:
        """The calibration kept under ``key``; ``None`` if there is none, or only one of an
        earlier cost model (measured again then)."""
        entry = self.entries.get(key)
        try:
            return None if entry is None else CellTimes(**entry["times"])
        except (TypeError, KeyError):
            return None

    def put(self, key: str, label: str, times: CellTimes) -> None:
        self.entries[key] = {
            "label": label,
            "measured_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "times": asdict(times),
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(self.path, {"calibrations": self.entries})


def calibrate(cell: Cell) -> CellTimes:
    """Measure ``cell``'s times in a fresh process (see the module docstring)."""
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(1, mp_context=context) as pool:
        return pool.submit(_calibrate_here, cell).result()


def _calibrate_here(cell: Cell) -> CellTimes:
    plan = cell_plan(cell)
    env_rate = env_only_rate(plan)
    start = time.perf_counter()
    algo = build_algorithm(plan.spec, plan.config, None)
    setup_s = time.perf_counter() - start
    try:
        steps = algo.steps_per_iteration
        iteration_s = initial_s = 0.0
        if steps:
            # an algorithm with initial steps makes its one-off collection in the first
            # iteration: a second one is the iteration alone, the difference the collection
            first_s = _train_time(algo)
            iteration_s = _train_time(algo) if algo.initial_steps else first_s
            initial_s = max(first_s - iteration_s, 0.0)
        small_tasks, large_tasks = calibration_tasks(plan)
        small = (len(small_tasks), _metatest_time(plan, algo, small_tasks))
        large = (len(large_tasks), _metatest_time(plan, algo, large_tasks))
    finally:
        close = getattr(algo, "close", None)  # MAML's env workers; SB3's envs close at exit
        if close is not None:
            close()
    return CellTimes(setup_s, iteration_s, steps, *fit_metatest(small, large), env_rate, initial_s)


def _train_time(algo: MetaRLAlgorithm) -> float:
    """Seconds of one training iteration of ``algo``."""
    start = time.perf_counter()
    algo.train(1)
    return time.perf_counter() - start


def _metatest_time(plan: RunPlan, algo: MetaRLAlgorithm, indices: list[int]) -> float:
    evaluator = plan.evaluator([plan.test_tasks[index] for index in indices])
    start = time.perf_counter()
    evaluator.evaluate(algo, processes=plan.metatest_processes)
    return time.perf_counter() - start


def env_only_rate(plan: RunPlan, seconds: float = ENV_ONLY_SECONDS) -> float:
    """The benchmark's env steps per second on one core: its test env, random actions, the
    run's first test tasks in turn (Meta-World's classes differ several-fold in step cost)."""
    env = plan.spec.make_test_env(plan.config.seed)
    tasks = plan.test_tasks[: min(len(plan.test_tasks), 10)]
    rng = np.random.default_rng(0)
    env.action_space.seed(0)
    steps, elapsed, index = 0, 0.0, 0
    while elapsed < seconds:
        env.get_wrapper_attr("set_task")(tasks[index % len(tasks)])
        env.reset(seed=int(rng.integers(2**31)))
        index += 1
        start = time.perf_counter()
        done = False
        while not done:
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            steps += 1
            done = terminated or truncated
        elapsed += time.perf_counter() - start
    env.close()
    return steps / elapsed


def predict_cells(
    cells: list[Cell],
    cache: CalibrationCache,
    *,
    recalibrate: bool = False,
    on_calibrate: Callable[[Cell], None] | None = None,
) -> list[tuple[CellTimes, CellCost]]:
    """Each cell's calibration (measured once per benchmark x algorithm x settings, reused from
    ``cache`` unless ``recalibrate``) and predicted cost; ``on_calibrate`` is told before each
    measurement (they take seconds to minutes)."""
    measured: dict[str, CellTimes] = {}
    predictions = []
    for cell in cells:
        plan = cell_plan(cell)
        key = calibration_key(plan)
        times = measured.get(key) or (None if recalibrate else cache.get(key))
        if times is None:
            if on_calibrate is not None:
                on_calibrate(cell)
            times = calibrate(cell)
            cache.put(
                key, f"{cell.benchmark} {cell.algorithm} cpus={cell.cpus} {cell.device}", times
            )
        measured[key] = times
        predictions.append((times, predicted_cost(cell, plan, times)))
    return predictions


def predicted_cost(cell: Cell, plan: RunPlan, times: CellTimes) -> CellCost:
    """The cost of ``cell`` (planned as ``plan``) from its calibration ``times``: its iterations,
    its meta-tests during training and its final meta-tests."""
    sizes = periodic_metatest_sizes(cell, plan, times.steps_per_iteration)
    return cell_cost(times, cell.steps, sizes + metatest_sizes(plan))


def run_cell(settings: RunSettings) -> Cell:
    """A ``metabench train`` run as the planner's cell: its settings, on its ``--cpus`` or,
    without a bound, its baseline's cores on this machine (a calibration needs a number, and
    those are the cores ``metabench bench`` and ``plan`` give it)."""
    cores = os.cpu_count() or 1
    cpus = settings.cpus
    if cpus is None:
        cpus = min(get_algorithm(settings.algorithm).cpus_for(settings.benchmark), cores)
    return Cell(
        benchmark=settings.benchmark,
        algorithm=settings.algorithm,
        seed=settings.seed,
        steps=settings.env_steps,
        overrides=tuple(settings.hyperparameters.items()),
        out=settings.out,
        cpus=cpus,
        device=settings.device,
        eval_schedule=settings.eval_schedule,
    )


def forecast(
    settings: RunSettings,
    cache_path: Path | None = None,
    *,
    measure: bool = False,
    on_calibrate: Callable[[Cell], None] | None = None,
) -> str:
    """One line that says how long the run of ``settings`` will take on this machine, before
    it starts: a budget of days on a toy was otherwise seen only after its first iteration.

    The prediction is :func:`predict_cells`'s, from the calibration of the run's settings in
    ``cache_path`` (default: :func:`default_cache`). Without one the line says how to get it:
    ``measure`` (``metabench train --predict``) measures it, which trains one iteration in a
    fresh process (``on_calibrate`` is told first), and keeps it for the next runs.
    """
    path = cache_path or default_cache()
    cell = run_cell(settings)
    plan = cell_plan(cell)  # bad settings raise here, before a line about them is printed
    what = f"{settings.algorithm} on {settings.benchmark}, {settings.env_steps:,} env steps"
    if not measure and not path.exists():
        return _no_forecast(what, path)
    try:
        cache = CalibrationCache(path)
    except ValueError as error:  # an unreadable file must not stop a run from starting
        return f"no predicted time for {what}: {error}"
    if measure:
        ((times, cost),) = predict_cells([cell], cache, on_calibrate=on_calibrate)
    else:
        cached = cache.get(calibration_key(plan))
        if cached is None:
            return _no_forecast(what, path)
        times, cost = cached, predicted_cost(cell, plan, cached)
    return forecast_line(what, cell.cpus, times, cost)


def _no_forecast(what: str, path: Path) -> str:
    return (
        f"no predicted time for {what}: {path} holds no calibration of these settings on this "
        f"machine; the same command with --predict measures one (one training iteration and two "
        f"meta-tests) and stops before training"
    )


def forecast_line(what: str, cpus: int, times: CellTimes, cost: CellCost) -> str:
    """``predicted: ...`` for a run (``what``) of cost ``cost``, from a calibration ``times``
    measured on ``cpus`` cores."""
    if cost.iterations:
        training = (
            f"{cost.iterations:,} iteration{'' if cost.iterations == 1 else 's'} of "
            f"{times.steps_per_iteration:,} env steps at "
            f"{times.iteration_s:,.1f} s each"
        )
    else:
        training = "no training iterations"
    return (
        f"predicted: {what}: {format_duration(cost.total_s)} on this machine ({training}, then "
        f"{format_duration(cost.metatest_s)} of meta-tests; calibrated on {cpus} "
        f"core{'' if cpus == 1 else 's'})"
    )
