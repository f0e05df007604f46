"""Terminal tables of meta-test results."""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from metabench.analysis.formatting import format_duration, format_number, format_steps
from metabench.analysis.stats import Interval, Summary
from metabench.evaluation import MetaTestResult
from metabench.harness.cells import Cell
from metabench.harness.costs import CellCost, CellTimes
from metabench.harness.status import RunStatus


def make_console(stderr: bool = False) -> Console:
    """A console for metabench's output. Off a terminal (CI logs, pipes) rich falls back to 80
    columns and wraps messages and tables; 120 keeps them on one line, unless ``COLUMNS`` sets
    the width (``COLUMNS=200 metabench status runs | less``)."""
    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty() or os.environ.get("COLUMNS", "").isdigit():
        return Console(stderr=stderr)  # rich reads COLUMNS itself
    return Console(stderr=stderr, width=120)


def metatest_table(result: MetaTestResult, title: str) -> Table:
    """The adaptation curve (mean return and success rate at each episode index of the trial,
    over test tasks), one row per episode, then the post-adaptation summary."""
    success = result.success_rate_per_episode
    table = Table(title=title)
    table.add_column("episode", justify="right")
    table.add_column("phase")
    table.add_column("mean return", justify="right")
    if success is not None:
        table.add_column("success rate", justify="right")
    for k, value in enumerate(result.return_per_episode):
        phase = "explore" if k < result.exploration_episodes else "test"
        row = [str(k + 1), phase, f"{value:.2f}"]
        table.add_row(*row, *([f"{success[k]:.2f}"] if success is not None else []))
    summary = ["", "post-adaptation", f"{result.test_return:.2f}"]
    if success is not None:
        rate = result.test_episode_success_rate  # per test episode
        summary.append("n/a" if rate is None else f"{rate:.2f}")
    table.add_section()
    table.add_row(*summary)
    table.caption = f"{result.n_tasks} test tasks, {result.n_env_steps} environment steps"
    count = result.metaworld
    if count is not None:
        table.caption += (
            f"; Meta-World's count of the test episodes (first 3 of each class to end, "
            f"{result.metaworld_envs_per_class} sub-envs per class; biased upward, Metaworld "
            f"PR #577): success "
            f"{count.success_rate:.2f}, return {count.mean_return:.2f}"
        )
    return table


def _mean(interval: Interval | None) -> float | None:
    return None if interval is None else interval.mean


def _interval(interval: Interval | None) -> str:
    if interval is None or not math.isfinite(interval.low):
        return ""
    return f"[{format_number(interval.low, 1)}, {format_number(interval.high, 1)}]"


GRID_TABLE_CAPTION = (
    "Means over seeds; t 95% CI: Student's t 95% confidence interval over seeds (n - 1 degrees "
    "of freedom; none with one seed, wide with few: 4.3 standard errors each side at 3 seeds). "
    "pre-adapt: return of the "
    "exploration episodes; post-adapt: of the test episodes after adapt_policy; gain: post minus "
    "pre. An algorithm adapts when its gain is above 0; adapting pays when its post-adapt return "
    "beats multitask (the best policy that does not adapt) and nop (zero actions)."
)


def grid_tables(summaries: Sequence[Summary], title: str) -> list[Table]:
    """One table per benchmark: pre- and post-adaptation return and the gain per algorithm, the
    last two with Student's t interval over seeds (:func:`~metabench.analysis.stats.t_interval`;
    success too where the benchmark has it), best post-adaptation return first, beside each
    algorithm's budget and wall time."""
    tables = []
    for benchmark in dict.fromkeys(summary.benchmark for summary in summaries):
        rows = sorted(
            (summary for summary in summaries if summary.benchmark == benchmark),
            key=lambda summary: -summary.test_return.mean,
        )
        with_success = any(summary.test_success is not None for summary in rows)
        table = Table(title=f"{benchmark}: {title}")
        columns = (
            "algorithm", "seeds", "env steps", "wall time", "pre-adapt", "post-adapt",
            "t 95% CI", "gain", "t 95% CI", *(("success",) if with_success else ()),
        )  # fmt: skip
        for name in columns:
            table.add_column(name, justify="left" if name == "algorithm" else "right")
        for summary in rows:
            gain = summary.adaptation_gain
            row = [
                summary.algorithm,
                str(summary.n_seeds),
                f"{summary.env_steps:,.0f}",
                format_duration(summary.wall_time_s),
                format_number(_mean(summary.pre_return), 1),
                format_number(summary.test_return.mean, 1),
                _interval(summary.test_return),
                "n/a" if gain is None else f"{gain.mean:+.1f}",
                _interval(gain),
            ]
            if with_success:
                success = summary.test_success
                row.append("n/a" if success is None else format_number(success.mean))
            table.add_row(*row)
        tables.append(table)
    if tables:
        tables[-1].caption = GRID_TABLE_CAPTION
    return tables


def specs_tables(names: set[str] | None = None) -> tuple[Table, ...]:
    """What ``envs/`` and ``baselines/`` hold: one row per benchmark, one per algorithm, and
    the algorithms' hyperparameters (only the benchmarks and algorithms in ``names``, if given)."""
    from metabench.harness.algorithms import load_algorithms
    from metabench.harness.benchmarks import load_benchmarks

    benchmarks = Table(title="benchmarks (envs/*.toml): --benchmark / --benchmarks")
    for column in ("name", "eps/trial", "meta-test episodes", "test tasks"):
        benchmarks.add_column(column, no_wrap=True)
    benchmarks.add_column("env id, about")  # the id on a line of its own: the names are long
    for name, spec in sorted(load_benchmarks().items()):
        if names is not None and name not in names:
            continue
        protocol = f"{spec.exploration_episodes} explore + {spec.test_episodes} test"
        tasks = f"{spec.n_test_tasks}{spec.split.test_tasks_note()}"
        benchmarks.add_row(
            name, str(spec.episodes_per_trial), protocol, tasks,
            Text(f"{spec.env_id}\n{spec.description}"),  # text: "[...]" is not markup here
        )  # fmt: skip
    algorithms = Table(title="algorithms (baselines/*.toml): --algorithm / --algorithms")
    for column in ("name", "cpus", "budget per profile (env steps; may vary per benchmark)"):
        algorithms.add_column(column, no_wrap=True)
    algorithms.add_column("about")
    for name, entry in sorted(load_algorithms().items()):
        if names is not None and name not in names:
            continue
        budgets = ", ".join(
            f"{profile} {setting.steps:,}" for profile, setting, _ in entry.profiles
        )
        algorithms.add_row(name, str(entry.cpus), budgets, Text(entry.description))
    return benchmarks, algorithms, hyperparameters_table(names)


def hyperparameters_table(names: set[str] | None = None) -> Table:
    """Every hyperparameter of every algorithm (or of those in ``names``), from its config
    dataclass: type and range, default (before the baseline file's per-benchmark settings),
    documentation."""
    from metabench.harness.algorithms import load_algorithms
    from metabench.validation import config_fields

    table = Table(
        title=Text(  # plain text: rich would read "[defaults]" as markup and drop it
            "hyperparameters (--set KEY=VALUE, or [benchmarks.*] in baselines/*.toml); "
            "defaults (the config's, then the file's [defaults]) before the per-benchmark settings"
        )
    )
    for column in ("algorithm", "name", "type", "default"):
        table.add_column(column, no_wrap=True)
    table.add_column("about")
    for name, entry in sorted(load_algorithms().items()):
        if names is not None and name not in names:
            continue
        file_defaults = entry.defaults.values if entry.defaults is not None else {}
        for field in config_fields(entry.implementation.config):
            default = file_defaults.get(field.name, field.default)
            shown = (
                "null"
                if default is None
                else str(default).lower()
                if isinstance(default, bool)
                else str(list(default) if isinstance(default, tuple) else default)
            )
            table.add_row(name, field.name, field.describe(), shown, Text(field.doc))
    return table


def plan_table(
    cells: Sequence[Cell], predictions: Sequence[tuple[CellTimes, CellCost]], title: str
) -> Table:
    """``metabench plan``'s table: each cell's calibration and predicted wall time. "of env-only"
    is training's step rate over the env-only rate of the cell's cores (1.0: the update and the
    policy cost nothing)."""
    table = Table(title=title)
    for name in ("benchmark", "algorithm"):  # a long name folds onto a second line, whole
        table.add_column(name, overflow="fold")
    for name in ("seed", "cpus", "iterations", "s/iteration", "steps/s", "of env-only"):
        table.add_column(name, justify="right")
    for name in ("meta-test", "predicted"):
        table.add_column(name, justify="right", no_wrap=True)
    for cell, (times, cost) in zip(cells, predictions, strict=True):
        ceiling = times.env_steps_per_s * max(cell.cpus, 1)
        table.add_row(
            cell.benchmark,
            cell.algorithm,
            str(cell.seed),
            str(cell.cpus),
            str(cost.iterations),
            f"{times.iteration_s:.1f}",
            f"{times.steps_per_s:,.0f}",
            f"{times.steps_per_s / ceiling:.2f}" if ceiling > 0 and cost.iterations else "-",
            format_duration(cost.metatest_s),
            format_duration(cost.total_s),
        )
    return table


def status_table(statuses: Sequence[RunStatus], root: Path) -> Table:
    """``metabench status``'s table: one row per run directory (its path relative to ``root``),
    with how far it is, its latest meta-test (the final one once finished, else the latest
    periodic one, which may use fewer test tasks) and its best periodic one where it has
    success."""
    table = Table(title=f"metabench status {root}")
    table.add_column("run", overflow="fold")
    table.add_column("benchmark / algorithm / seed", overflow="fold")
    table.add_column("state", overflow="fold")
    table.add_column("env steps", justify="right", no_wrap=True)
    table.add_column("time", justify="right", no_wrap=True)
    table.add_column("latest meta-test", overflow="fold")
    table.add_column("best during training", overflow="fold")
    for status in statuses:
        table.add_row(
            str(status.path.relative_to(root)) if status.path != root else str(root),
            f"{status.benchmark} / {status.algorithm} / {status.seed}",
            status.state + (f" ({status.holder})" if status.holder else ""),
            _progress(status),
            _times(status),
            _metatest(status),
            _best(status),
        )
    return table


def _progress(status: RunStatus) -> str:
    """Env steps done of the run's planned total, with the share of the iterations."""
    if status.n_iterations == 0:  # no training iterations (nop, cem, cmaes)
        return "-"
    done = "?" if status.env_steps is None else format_steps(status.env_steps)
    text = f"{done} / {format_steps(status.planned_env_steps)}"
    if status.n_iterations and status.state != "finished":
        text += f" ({status.iteration / status.n_iterations:.0%})"
    return text


def _times(status: RunStatus) -> str:
    if status.wall_time_s is None:
        return "-"
    left = status.time_left_s
    text = format_duration(status.wall_time_s)
    return text if left is None else f"{text}, {format_duration(left)} left"


def _best(status: RunStatus) -> str:
    point = status.best
    if point is None or point.success is None:
        return "-"
    text = f"success {point.success:.2f} at {format_steps(point.env_steps)} steps"
    if point.metaworld_success is not None:
        text += f" (Meta-World's count {point.metaworld_success:.2f})"
    return text


def _metatest(status: RunStatus) -> str:
    point = status.metatest
    if point is None:
        return "-"
    where = "final" if status.final else f"at {format_steps(point.env_steps)} steps"
    text = f"{where}: return {point.test_return:,.1f}"
    if point.success is not None:
        text += f", success {point.success:.2f}"
    if point.metaworld_success is not None:
        text += f" (Meta-World's count {point.metaworld_success:.2f})"
    return text
