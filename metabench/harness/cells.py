"""One cell of a grid (a benchmark, an algorithm, a seed) and how it runs: one ``metabench train``
subprocess, so a crashing cell (even one that kills its interpreter) cannot take the grid down.

The grid (:mod:`metabench.harness.grid`) plans cells; the executors
(:mod:`metabench.harness.executors`) run them with :func:`run_cell`. Both import this module, and
neither imports the other at run time.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from metabench.atomic import atomic_write_json
from metabench.harness.schedule import MetaTestSchedule

PLAN_FILE = ".metabench-grid.json"
"""The plan of the latest grid run into a results folder: every cell's benchmark, algorithm,
seed, budget and directory (relative to the folder), written by the grid before any cell runs
and read by ``metabench status``."""


@dataclass(frozen=True)
class Cell:
    """One run of the grid."""

    benchmark: str
    algorithm: str
    seed: int
    steps: int
    overrides: tuple[tuple[str, Any], ...]
    out: Path
    cpus: int = 1
    """CPU cores the run uses (its own process plus any worker processes that step its envs);
    at most the cores of the machine it runs on, which ``metabench train --cpus`` refuses to
    exceed."""
    device: str = "cpu"
    """Where its networks act and train (``metabench train --device``)."""
    eval_schedule: MetaTestSchedule = field(default_factory=MetaTestSchedule)
    """Its meta-tests during training (``metabench train --eval-every-steps``)."""

    @property
    def label(self) -> str:
        return f"{self.benchmark} {self.algorithm} seed {self.seed}"

    def command(self) -> list[str]:
        command = [
            sys.executable, "-m", "metabench", "train",
            "--benchmark", self.benchmark, "--algorithm", self.algorithm,
            "--seed", str(self.seed), "--steps", str(self.steps), "--out", str(self.out),
            "--cpus", str(min(self.cpus, os.cpu_count() or 1)),
        ]  # fmt: skip
        if self.device != "cpu":
            command += ["--device", self.device]
        command += self.eval_schedule.options()
        for key, value in self.overrides:
            command += ["--set", f"{key}={json.dumps(value)}"]
        return command


def shell_command(cell: Cell) -> str:
    """The cell's command as a plain shell runs it (``env -i bash``), for its ``error.json``:
    quoted, with the ``METABENCH_SPECS`` and ``PYTHONPATH`` it runs under (a plug-in's)."""
    words = [
        f"{name}={shlex.quote(os.environ[name])}"
        for name in ("METABENCH_SPECS", "PYTHONPATH")
        if os.environ.get(name)
    ]
    return " ".join([*words, shlex.join(cell.command())])


def run_cell(cell: Cell) -> str | None:
    """Run one cell to completion; ``None`` on success, else the error (also in error.json)."""
    cell.out.mkdir(parents=True, exist_ok=True)
    log = cell.out / "train.log"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}  # cells run side by side: no oversubscription
    with log.open("ab") as handle:
        finished = subprocess.run(cell.command(), stdout=handle, stderr=subprocess.STDOUT, env=env)
    error_file = cell.out / "error.json"
    if finished.returncode == 0:
        error_file.unlink(missing_ok=True)
        return None
    tail = log.read_text(errors="replace").strip().splitlines()[-5:]
    message = tail[-1] if tail else f"exit code {finished.returncode}"
    atomic_write_json(
        error_file,
        {"command": shell_command(cell), "exit_code": finished.returncode, "log_tail": tail},
    )
    return message
