"""A first look at metabench: task envs, task samplers and RL2 trials with a random policy.

Run with ``metabench demo`` (or ``make demo``). For a handful of tasks of every task env that
samples its own tasks (:func:`~metabench.tasks.family.sampling_task_envs`, with their default
arguments) and of Meta-World ML10's held-out split, it runs one RL2 trial per task with
uniformly random actions and prints the return (and success) of every episode of the trial. A
random policy does not adapt, so the episodes of a trial score alike: the table is the floor a
meta-learner must beat.
"""

from __future__ import annotations

import pickle
import time
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from rich.progress import Progress
from rich.table import Table

from metabench.harness.report import make_console
from metabench.tasks import SetTaskSampler, Task, TaskSampler
from metabench.tasks.family import sampling_task_envs
from metabench.wrappers import EPISODE_END, EPISODE_RETURN, EPISODE_SUCCESS


@dataclass
class TrialResult:
    """What one random-policy trial of one task gave."""

    benchmark: str
    task: str
    returns: list[float]
    successes: list[bool] | None
    steps: int
    seconds: float


def describe_task(task: Task) -> str:
    """A short, human-readable label: ``velocity=1.23`` or ``pick-place-v3 goal (x, y, z)``."""
    if isinstance(task, dict):
        return ", ".join(f"{key}={_short(value)}" for key, value in task.items())
    # A Meta-World task's data is its pickled constructor kwargs; the goal ends ``rand_vec``.
    goal = ", ".join(f"{g:.2f}" for g in pickle.loads(task.data)["rand_vec"][-3:])
    return f"{task.env_name} goal=({goal})"


def _short(value: Any) -> str:
    """A task value in a few characters: a number, a point, or a parameter array's size."""
    if isinstance(value, (int, float)):
        return f"{value:.2f}"
    array = np.asarray(value, dtype=float)
    if array.ndim == 1 and array.size <= 3:
        return "(" + ", ".join(f"{v:.2f}" for v in array) + ")"
    return f"<{array.size} values>"


def run_random_trials(
    env_id: str,
    sampler: TaskSampler | None,
    n_tasks: int,
    episodes_per_trial: int,
    seed: int,
    progress: Progress,
    env_kwargs: dict[str, Any],
) -> list[TrialResult]:
    """One RL2 trial per sampled task, with actions drawn from the action space."""
    # without Gymnasium's passive checker, which checks nothing here and only warns that the
    # bandit's constant observation has equal bounds
    env = gym.make(
        f"metabench/RL2-{env_id}-v0",
        episodes_per_trial=episodes_per_trial,
        disable_env_checker=True,
        **env_kwargs,
    )
    rng = np.random.default_rng(seed)
    if sampler is None:
        sampler = SetTaskSampler(env.get_wrapper_attr("sample_tasks"))
    tasks = sampler.sample(n_tasks, rng)
    env.action_space.seed(seed)
    results = []
    bar = progress.add_task(f"{env_id}: {n_tasks} tasks", total=n_tasks)
    for i, task in enumerate(tasks):
        start = time.perf_counter()
        env.reset(seed=seed + i, options={"task": task})
        returns, successes, steps, done, has_success = [], [], 0, False, False
        while not done:
            _, _, terminated, truncated, info = env.step(env.action_space.sample())
            steps += 1
            done = terminated or truncated
            has_success = has_success or "success" in info  # the task env reports one
            if info.get(EPISODE_END):
                returns.append(info[EPISODE_RETURN])
                successes.append(info[EPISODE_SUCCESS])
        results.append(
            TrialResult(
                env_id,
                describe_task(task),
                returns,
                successes if has_success else None,
                steps,
                time.perf_counter() - start,
            )
        )
        progress.advance(bar)
    env.close()
    return results


def results_table(results: list[TrialResult], episodes_per_trial: int) -> Table:
    table = Table(title="Random policy, one RL2 trial per task (return of each episode)")
    table.add_column("benchmark")
    table.add_column("task", no_wrap=True, max_width=44, overflow="ellipsis")
    for k in range(episodes_per_trial):
        table.add_column(f"ep {k + 1}", justify="right")
    table.add_column("success", justify="right")
    table.add_column("steps", justify="right")
    table.add_column("steps/s", justify="right")
    for r in results:
        success = "n/a" if r.successes is None else f"{sum(r.successes)}/{len(r.successes)}"
        table.add_row(
            r.benchmark,
            r.task,
            *(f"{ret:.1f}" for ret in r.returns),
            success,
            str(r.steps),
            f"{r.steps / r.seconds:,.0f}",
        )
    return table


def run_demo(
    n_tasks: int = 5, episodes_per_trial: int = 2, seed: int = 0, metaworld: bool = True
) -> list[TrialResult]:
    """Run the demo and print its table; returns the rows for callers and tests."""
    console = make_console()
    results: list[TrialResult] = []
    with Progress(console=console, transient=True) as progress:
        for name in sampling_task_envs():
            results += run_random_trials(
                name, None, n_tasks, episodes_per_trial, seed, progress, {}
            )
        if metaworld:
            from metabench.tasks.metaworld.envs import MetaWorldTaskSampler

            console.print("Building Meta-World ML10 (about 10 s, once per process)...")
            sampler = MetaWorldTaskSampler("ML10", split="test", seed=seed)
            results += run_random_trials(
                "ML10", sampler, n_tasks, episodes_per_trial, seed, progress,
                {"split": "test", "seed": seed},
            )  # fmt: skip
    console.print(results_table(results, episodes_per_trial))
    return results
