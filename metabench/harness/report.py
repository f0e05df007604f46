"""Terminal tables of meta-test results."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.table import Table

from metabench.evaluation import MetaTestResult


def make_console(stderr: bool = False) -> Console:
    """A console for metabench's output. Off a terminal (CI logs, pipes) rich falls back to 80
    columns and wraps messages and tables; 120 keeps them on one line."""
    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr) if stream.isatty() else Console(stderr=stderr, width=120)


def metatest_table(result: MetaTestResult, title: str) -> Table:
    """Return (and success) of every episode index, averaged over test tasks, and the
    post-adaptation summary."""
    table = Table(title=title)
    table.add_column("")
    n_explore = result.n_exploration_eps
    for k in range(len(result.return_per_episode)):
        kind = "explore" if k < n_explore else "test"
        table.add_column(f"ep {k + 1} ({kind})", justify="right")
    table.add_column("post-adaptation", justify="right")
    table.add_row(
        "mean return",
        *(f"{value:.2f}" for value in result.return_per_episode),
        f"{result.test_return:.2f}",
    )
    success = result.success_rate_per_episode
    if success is not None and result.test_success_rate is not None:
        table.add_row(
            "success rate",
            *(f"{value:.2f}" for value in success),
            f"{result.test_success_rate:.2f}",
        )
    table.caption = f"{result.n_tasks} test tasks, {result.n_env_steps} environment steps"
    return table
