"""``metabench plan``'s prediction beside the measured time of the same grid run for real.

Calibrates this machine afresh (into a temporary calibration file), predicts every cell and the
grid on the local executor, then runs the grid with ``metabench bench`` into a temporary folder
and prints, per cell, the predicted and measured training + meta-test time (``result.json``'s
``wall_time_s``) and their ratio, and the same for the whole grid (set-up included). Run it on
an otherwise idle machine; the default grid is ``make run``'s.

    .venv/bin/python scripts/plan_check.py [--benchmarks HalfCheetahVel]
        [--algorithms maml-trpo multitask nop] [--seeds 0 1 2] [--profile quick] [--cpus 2]

With ``--runs``, finished ``metabench train`` runs (run directories with their TensorBoard logs)
instead: each one's recorded command is calibrated (``--calibration``, reused if measured) and
its parts are set beside the times its TensorBoard events were written at: one iteration (the
median, periodic meta-tests left out), one periodic meta-test (the median), the final meta-test
and Meta-World's meta-test on training tasks, and the whole run, periodic meta-tests included.

    .venv/bin/python scripts/plan_check.py --runs RUN [RUN ...] [--calibration FILE]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from metabench.cli import build_parser
from metabench.harness.calibration import (
    CalibrationCache,
    cell_plan,
    default_cache,
    metatest_sizes,
    predict_cells,
)
from metabench.harness.cells import Cell
from metabench.harness.costs import schedule_time
from metabench.harness.grid import plan
from metabench.harness.schedule import MetaTestSchedule


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--benchmarks", nargs="+", default=["HalfCheetahVel"])
    parser.add_argument("--algorithms", nargs="+", default=["maml-trpo", "multitask", "nop"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--profile", default="quick")
    parser.add_argument("--cpus", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--runs", nargs="+", type=Path, help="finished runs to check instead")
    parser.add_argument("--calibration", type=Path, default=default_cache())
    args = parser.parse_args()
    if args.runs:
        for run in args.runs:
            check_run(run, CalibrationCache(args.calibration))
        return

    folder = Path(tempfile.mkdtemp(prefix="plan-check-"))
    results = folder / "grid"
    cells = plan(args.benchmarks, args.algorithms, args.seeds, args.profile, results)
    start = time.perf_counter()
    predictions = predict_cells(cells, CalibrationCache(folder / "calibration.json"))
    calibration_s = time.perf_counter() - start
    durations = [cost.total_s for _, cost in predictions]
    predicted_grid = schedule_time(durations, [cell.cpus for cell in cells], args.cpus)

    command = [sys.executable, "-m", "metabench.cli", "bench", "--benchmarks", *args.benchmarks,
               "--algorithms", *args.algorithms, "--seeds", *map(str, args.seeds),
               "--profile", args.profile, "--cpus", str(args.cpus),
               "--results", str(results)]  # fmt: skip
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    measured_grid = time.perf_counter() - start

    print(f"calibration: {calibration_s:.0f} s; grid in {results}")
    print(f"{'cell':<40} {'predicted s':>12} {'measured s':>11} {'ratio':>6}")
    for cell, (_, cost) in zip(cells, predictions, strict=True):
        measured = json.loads((cell.out / "result.json").read_text())["wall_time_s"]
        predicted = cost.train_s + cost.metatest_s  # wall_time_s leaves out the set-up
        print(f"{cell.label:<40} {predicted:>12.1f} {measured:>11.1f} {predicted / measured:>6.2f}")
    print(
        f"{'grid, ' + str(args.cpus) + ' cores (set-up included)':<40} {predicted_grid:>12.1f} "
        f"{measured_grid:>11.1f} {predicted_grid / measured_grid:>6.2f}"
    )


def check_run(run: Path, cache: CalibrationCache) -> None:
    """Print ``run``'s predicted and measured parts (see the module doc)."""
    result = json.loads((run / "result.json").read_text())
    args = build_parser().parse_args(shlex.split(result["command"])[1:])
    schedule = MetaTestSchedule(args.eval_every, args.eval_every_steps)
    cell = Cell(args.benchmark, args.algorithm, args.seed, args.steps, tuple(args.overrides), run,
                args.cpus or os.cpu_count() or 1, args.device, schedule)  # fmt: skip
    [(times, cost)] = predict_cells([cell], cache)
    run_plan = cell_plan(cell)
    periodic_tasks = len(run_plan.periodic_evaluator().test_tasks)
    periodic_metatests = schedule.count(cost.iterations, times.steps_per_iteration)
    test_tasks, *train_tasks = metatest_sizes(run_plan)

    events = EventAccumulator(str(run / "tensorboard" / "metabench"), {"scalars": 0})
    events.Reload()
    trained = {e.step: e.wall_time for e in events.Scalars("metatrain/average_return")}
    periodic = {e.step: e.wall_time for e in events.Scalars("periodic_metatest/test_return")}
    [tested] = [e.wall_time for e in events.Scalars("metatest/test_return")]
    steps = sorted(trained)
    iterations = [
        trained[b] - trained[a] for a, b in itertools.pairwise(steps) if a not in periodic
    ]
    last = max(trained[steps[-1]], periodic.get(steps[-1], 0.0))
    rows = [
        ("one iteration (median)", times.iteration_s, statistics.median(iterations)),
        (f"periodic meta-test, {periodic_tasks} tasks (median)", times.metatest_s(periodic_tasks),
         statistics.median(periodic[s] - trained[s] for s in periodic) if periodic else None),
        (f"final meta-test, {test_tasks} tasks", times.metatest_s(test_tasks), tested - last),
        (f"meta-test on training tasks, {sum(train_tasks)} tasks",
         times.metatest_s(sum(train_tasks)), (run / "result.json").stat().st_mtime - tested),
        ("whole run (wall_time_s)", cost.train_s + cost.metatest_s, result["wall_time_s"]),
    ]  # fmt: skip
    print(f"{run}: {cost.iterations} iterations, {periodic_metatests} periodic meta-tests")
    print(f"{'part':<44} {'predicted s':>12} {'measured s':>11} {'ratio':>6}")
    for name, predicted, measured in rows:
        shown = f"{measured:>11.1f} {predicted / measured:>6.2f}" if measured else f"{'-':>11}"
        print(f"{name:<44} {predicted:>12.1f} {shown}")


if __name__ == "__main__":
    main()
