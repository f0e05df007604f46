"""``metabench bench``: a grid of runs (benchmarks x algorithms x seeds), here or on Ray.

Each cell is one ``metabench train`` command run as a subprocess, so a crashing cell (even one
that kills its interpreter) cannot take the grid down: its exit code and the end of its log go to
``error.json`` in its directory and the other cells finish. Cells that already hold a
``result.json`` are skipped, and an interrupted cell resumes from its checkpoint, so running the
same grid again finishes what is left.

Before any cell runs, the grid checks that its results folder's ``README.md`` and
``summary.csv`` are metabench's to replace (a file of the user's there would otherwise be found
only after the whole grid), and records its plan, every cell, in ``.metabench-grid.json``
(:data:`PLAN_FILE`) so that ``metabench status`` lists the cells that have not started yet.
Off a terminal (a log file, a pipe) it prints one line per finished cell in place of the
progress bar, which rich draws only on a terminal.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from metabench.analysis.generated import check_generated
from metabench.atomic import atomic_write_json
from metabench.errors import RunError
from metabench.harness.algorithms import get_algorithm
from metabench.harness.benchmarks import get_benchmark
from metabench.harness.cells import PLAN_FILE, Cell, run_cell  # noqa: F401 - run_cell re-exported
from metabench.harness.provenance import algorithm_record
from metabench.harness.run import RunDirectory, benchmark_for
from metabench.harness.schedule import MetaTestSchedule

if TYPE_CHECKING:
    from metabench.harness.executors import Executor

GENERATED_AFTER_THE_GRID = ("README.md", "summary.csv")
"""The files ``metabench bench`` writes into its results folder once the grid has run."""


def plan(
    benchmarks: Sequence[str],
    algorithms: Sequence[str],
    seeds: Sequence[int],
    profile: str,
    results: Path,
    device: str = "cpu",
    eval_every_steps: int = 0,
) -> list[Cell]:
    """The cells of a grid, each budget and override from the algorithm's ``[profiles.<profile>]``.

    Every cell's hyperparameters are resolved here, so an unknown name (``KeyError`` listing the
    valid ones) or a bad setting (``ValueError``) stops the grid before anything runs. A name or
    seed given twice is one cell (two would train in one directory at once). Each cell runs with
    ``metabench train --cpus`` set to the cores its baseline declares, which bounds its worker
    processes and torch threads, on ``device`` (``metabench train --device``), and meta-tests
    after every ``eval_every_steps`` env steps (``--eval-every-steps``; 0: only at the end).
    """
    schedule = MetaTestSchedule(env_steps=eval_every_steps)
    specs = [get_benchmark(name) for name in dict.fromkeys(benchmarks)]
    entries = [get_algorithm(name) for name in dict.fromkeys(algorithms)]
    seeds = list(dict.fromkeys(seeds))
    cells = []
    for spec in specs:
        for entry in entries:
            settings = entry.profile(profile, spec.name)
            entry.hyperparameters(
                spec, settings.overrides, f"{entry.path} [profiles.{profile}]", settings.places
            )
            overrides = tuple(sorted(settings.overrides.items()))
            for seed in seeds:
                out = results / spec.name / f"{entry.name}-seed{seed}"
                cells.append(
                    Cell(
                        spec.name,
                        entry.name,
                        seed,
                        settings.steps,
                        overrides,
                        out,
                        entry.cpus_for(spec.name),
                        device,
                        schedule,
                    )
                )
    return cells


def grid_folder(cells: Sequence[Cell]) -> Path | None:
    """The results folder of cells laid out as :func:`plan` lays them out
    (``<results>/<benchmark>/<algorithm>-seed<seed>``); ``None`` if they share none."""
    folders = {cell.out.parent.parent for cell in cells}
    return folders.pop() if len(folders) == 1 else None


def write_plan(folder: Path, cells: Sequence[Cell]) -> None:
    """Record ``cells`` as the plan of the grid in ``folder`` (:data:`PLAN_FILE`), replacing
    the plan of an earlier grid there."""
    planned = [
        {
            "benchmark": cell.benchmark,
            "algorithm": cell.algorithm,
            "seed": cell.seed,
            "steps": cell.steps,
            "path": cell.out.relative_to(folder).as_posix(),
        }
        for cell in cells
    ]
    atomic_write_json(folder / PLAN_FILE, {"cells": planned})


def run_grid(cells: Sequence[Cell], executor: Executor, console: Console) -> dict[Cell, str | None]:
    """Run every cell that has no (intact) result yet, or a smaller budget than the cell's, on
    ``executor``, with one progress bar (one line per finished cell off a terminal).

    :raises RunError: before any cell runs, naming a ``README.md`` or ``summary.csv`` of the
        user's in the grid's results folder, which the tables written after the grid would
        have to replace, or a finished cell whose run had other settings than the cell's.
    """
    folder = grid_folder(cells)
    if folder is not None:
        check_generated(folder, GENERATED_AFTER_THE_GRID, "--results")
        folder.mkdir(parents=True, exist_ok=True)
        write_plan(folder, cells)
    todo = []
    for cell in cells:
        run = RunDirectory(cell.out)
        if run.completed_result() is None:
            todo.append(cell)
            if run.set_aside:
                console.print(f"{cell.label}: corrupt result.json set aside, re-running the cell")
        else:
            config = run.read_config()
            recorded = {} if config is None else config.to_json()
            differing = _other_settings(cell, recorded)
            if differing:
                raise RunError(
                    f"{cell.out} holds a result of other settings than the grid's (differs in: "
                    f"{', '.join(differing)}): pass another --results folder, or delete "
                    f"{cell.out} to run the cell again"
                )
            if cell.steps > recorded.get("env_steps_budget", cell.steps):
                todo.append(cell)  # a larger budget: `train` extends the finished run
    outcome: dict[Cell, str | None] = {cell: None for cell in cells if cell not in todo}
    if len(todo) < len(cells):
        console.print(f"{len(cells) - len(todo)} of {len(cells)} cells already have a result")
    started = time.perf_counter()
    if console.is_terminal:
        with Progress(
            TextColumn("grid"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            TextColumn("{task.fields[last]}"), console=console,
        ) as progress:  # fmt: skip
            bar = progress.add_task("grid", total=len(todo), last="")
            for cell, error in executor.run(todo):
                outcome[cell] = error
                progress.update(bar, advance=1, last=f"{cell.label}: {_state(error)}")
    else:  # rich draws no bar off a terminal: a line per finished cell, for logs and pipes
        for done, (cell, error) in enumerate(executor.run(todo), start=1):
            outcome[cell] = error
            elapsed = (time.perf_counter() - started) / 60
            console.print(
                f"grid: {done}/{len(todo)} cells, {elapsed:.1f} min: {cell.label}: {_state(error)}",
                soft_wrap=True,
            )
    failed = [cell for cell in todo if outcome[cell] is not None]
    console.print(
        f"{len(todo) - len(failed)} cells ran, {len(failed)} failed, "
        f"in {(time.perf_counter() - started) / 60:.1f} min"
    )
    for cell in failed:
        console.print(f"  {cell.label}: {outcome[cell]} (see {cell.out / 'error.json'})")
    return outcome


def _other_settings(cell: Cell, recorded: dict[str, Any]) -> list[str]:
    """What the finished run in ``cell.out`` recorded differently from what the cell would run
    now, but its budget: the hyperparameters and task env arguments the spec files give, and a
    plug-in's spec file (so a grid run again after a spec file changed does not pass the old
    results off as the new settings')."""
    spec = benchmark_for(cell.benchmark, cell.algorithm)
    entry = get_algorithm(cell.algorithm)
    now = {
        "hyperparameters": entry.hyperparameters(spec, dict(cell.overrides)),
        "env_kwargs": spec.train_env_kwargs(cell.seed),
        "algorithm_spec": algorithm_record(entry),
    }
    now = json.loads(json.dumps(now))  # as config.json reads back
    return sorted(key for key, value in now.items() if recorded.get(key) != value)


def _state(error: str | None) -> str:
    return "done" if error is None else "FAILED"
