"""``metabench bench``: a grid of runs (benchmarks x algorithms x seeds), here or on Ray.

Each cell is one ``metabench train`` command run as a subprocess, so a crashing cell (even one
that kills its interpreter) cannot take the grid down: its exit code and the end of its log go to
``error.json`` in its directory and the other cells finish. Cells that already hold a
``result.json`` are skipped, and an interrupted cell resumes from its checkpoint, so running the
same grid again finishes what is left.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from metabench.harness.algorithms import get_algorithm
from metabench.harness.benchmarks import get_benchmark
from metabench.harness.cells import Cell, run_cell  # noqa: F401 - the grid's cells, re-exported
from metabench.harness.run import RunDirectory
from metabench.harness.schedule import MetaTestSchedule

if TYPE_CHECKING:
    from metabench.harness.executors import Executor


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


def run_grid(cells: Sequence[Cell], executor: Executor, console: Console) -> dict[Cell, str | None]:
    """Run every cell that has no (intact) result yet on ``executor``, with one progress bar."""
    todo = []
    for cell in cells:
        run = RunDirectory(cell.out)
        if run.completed_result() is None:
            todo.append(cell)
            if run.set_aside:
                console.print(f"{cell.label}: corrupt result.json set aside, re-running the cell")
    outcome: dict[Cell, str | None] = {cell: None for cell in cells if cell not in todo}
    if len(todo) < len(cells):
        console.print(f"{len(cells) - len(todo)} of {len(cells)} cells already have a result")
    started = time.perf_counter()
    with Progress(
        TextColumn("grid"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        TextColumn("{task.fields[last]}"), console=console,
    ) as progress:  # fmt: skip
        bar = progress.add_task("grid", total=len(todo), last="")
        for cell, error in executor.run(todo):
            outcome[cell] = error
            status = "done" if error is None else "FAILED"
            progress.update(bar, advance=1, last=f"{cell.label}: {status}")
    failed = [cell for cell in todo if outcome[cell] is not None]
    console.print(
        f"{len(todo) - len(failed)} cells ran, {len(failed)} failed, "
        f"in {(time.perf_counter() - started) / 60:.1f} min"
    )
    for cell in failed:
        console.print(f"  {cell.label}: {outcome[cell]} (see {cell.out / 'error.json'})")
    return outcome
