"""``metabench plan``'s prediction beside the measured time of the same grid run for real.

Calibrates this machine afresh (into a temporary calibration file), predicts every cell and the
grid on the local executor, then runs the grid with ``metabench bench`` into a temporary folder
and prints, per cell, the predicted and measured training + meta-test time (``result.json``'s
``wall_time_s``) and their ratio, and the same for the whole grid (set-up included). Run it on
an otherwise idle machine; the default grid is ``make run``'s.

    .venv/bin/python scripts/plan_check.py [--benchmarks HalfCheetahVel]
        [--algorithms maml-trpo multitask nop] [--seeds 0 1] [--profile quick] [--cpus 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from metabench.harness.calibration import CalibrationCache, predict_cells
from metabench.harness.costs import schedule_time
from metabench.harness.grid import plan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--benchmarks", nargs="+", default=["HalfCheetahVel"])
    parser.add_argument("--algorithms", nargs="+", default=["maml-trpo", "multitask", "nop"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--profile", default="quick")
    parser.add_argument("--cpus", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()

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


if __name__ == "__main__":
    main()
