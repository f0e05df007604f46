"""What a meta-test records: every episode of every test task, and the tasks themselves.

:class:`MetaTestResult` holds one :class:`TaskResult` per test task (the return, length and
success of each episode of its trial) and the numbers the tables report. Tasks are stored in a
replayable JSON form (:func:`task_to_json`, :func:`task_from_json`). Success is keyed by the
task's index in the test task list, never by env name (Meta-World's own
``metalearning_evaluation`` keys it by name, which merges all the tasks of ML1 into one).

A run stores its meta-tests as :class:`metabench.records.MetaTestRecord`, which writes and reads
them (every version of the file).
"""

from __future__ import annotations

import base64
import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from metabench.tasks.base import Task
from metabench.tasks.metaworld.count import (
    CountedEpisode,
    MetaWorldCount,
    metaworld_count,
    task_class,
)

__all__ = ["MetaTestResult", "TaskResult", "task_from_json", "task_to_json"]


# -- tasks as JSON -------------------------------------------------------------------------------
def _is_metaworld_task(task: Any) -> bool:
    """Duck-typed ``metaworld.types.Task`` check (importing Meta-World here would be slow)."""
    return (
        isinstance(task, tuple)
        and isinstance(getattr(task, "env_name", None), str)
        and isinstance(getattr(task, "data", None), bytes)
    )


def _jsonable(value: Any, where: str) -> Any:
    """``value`` with numpy arrays and scalars turned into lists and Python numbers."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Mapping):
        result = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"{where} has a non-string key {key!r}; JSON keys are strings")
            result[key] = _jsonable(item, f"{where}[{key!r}]")
        return result
    if isinstance(value, (list, tuple)):
        return [_jsonable(item, f"{where}[{i}]") for i, item in enumerate(value)]
    raise ValueError(
        f"{where} is a {type(value).__name__}, which a result file cannot record; "
        f"tasks must be dicts of numbers, strings and lists, or metaworld.Task values"
    )


def task_to_json(task: Task) -> Any:
    """The JSON form of a task: dicts as they are (numpy values as lists), Meta-World tasks as
    ``{"env_name": ..., "data": base64 of task.data}`` (Meta-World's own checkpoint format).

    :raises ValueError: for any other kind of task.
    """
    if _is_metaworld_task(task):
        return {"env_name": task.env_name, "data": base64.b64encode(task.data).decode("ascii")}
    if not isinstance(task, Mapping):
        raise ValueError(
            f"cannot record a task of type {type(task).__name__} ({task!r}): metabench records "
            f"dict tasks (HalfCheetah, PointGoal) and metaworld.Task values"
        )
    return _jsonable(task, "task")


def task_from_json(data: Any) -> Task:
    """Inverse of :func:`task_to_json`: the task to pass to ``set_task`` again.

    A dict with exactly the keys ``env_name`` and ``data`` (a string) becomes a
    ``metaworld.Task``; any other dict is returned as a new dict.
    """
    if not isinstance(data, Mapping):
        raise ValueError(f"a recorded task is a JSON object, got {type(data).__name__}: {data!r}")
    if set(data) == {"env_name", "data"} and isinstance(data["data"], str):
        from metaworld.types import Task as MetaWorldTask  # only Meta-World results need it

        return MetaWorldTask(env_name=data["env_name"], data=base64.b64decode(data["data"]))
    return dict(data)


# -- results -------------------------------------------------------------------------------------
def _mean(values: Sequence[float]) -> float:
    return float(np.mean(values)) if len(values) else math.nan


@dataclasses.dataclass
class TaskResult:
    """What happened on one test task: every episode of its trial, in order.

    :param task_index: the task's index in the evaluator's ``test_tasks``; results are keyed by
        it, so two tasks of the same env (two ML1 goals) never share a success count.
    :param task: the exact task, in JSON form (:func:`task_to_json`; restore it with
        :func:`task_from_json` or :meth:`restore_task`).
    :param exploration_episodes: how many of the episodes came before adaptation.
    :param episode_returns: undiscounted return of each episode, exploration then test.
    :param episode_lengths: number of steps of each episode.
    :param episode_successes: whether any step of each episode reported ``info["success"]``;
        ``None`` if the env reports no success at all (HalfCheetah).
    :param episode_success_steps: the step (from 1) of each episode's first success, ``None``
        where none succeeded: its length where an episode ends at its first success, as in
        Meta-World's evaluation (``None`` if success is not reported).
    :param episode_returns_to_success: each episode's return up to and including its first
        success (its whole return where none succeeded).
    """

    task_index: int
    task: Any
    exploration_episodes: int
    episode_returns: list[float]
    episode_lengths: list[int]
    episode_successes: list[bool] | None = None
    episode_success_steps: list[int | None] | None = None
    episode_returns_to_success: list[float] | None = None

    def restore_task(self) -> Task:
        """The recorded task as a value ``set_task`` accepts."""
        return task_from_json(self.task)

    @property
    def test_returns(self) -> list[float]:
        """Returns of the episodes after adaptation."""
        return self.episode_returns[self.exploration_episodes :]

    @property
    def test_return(self) -> float:
        """Mean return of the episodes after adaptation."""
        return _mean(self.test_returns)

    @property
    def test_success(self) -> bool | None:
        """True if any episode after adaptation succeeded (``None`` if success is not reported)."""
        if self.episode_successes is None:
            return None
        return any(self.episode_successes[self.exploration_episodes :])

    @property
    def test_episode_success_rate(self) -> float | None:
        """Fraction of the episodes after adaptation that succeeded."""
        if self.episode_successes is None:
            return None
        return _mean([float(s) for s in self.episode_successes[self.exploration_episodes :]])

    def counted_test_episodes(self) -> list[CountedEpisode] | None:
        """The test episodes as Meta-World's evaluation ends them, at their first success
        (``None`` without first-success steps)."""
        if self.episode_success_steps is None or self.episode_returns_to_success is None:
            return None
        first = self.exploration_episodes
        return [
            CountedEpisode(length, False, ret)
            if step is None
            else CountedEpisode(step, True, to_success)
            for length, ret, step, to_success in zip(
                self.episode_lengths[first:],
                self.episode_returns[first:],
                self.episode_success_steps[first:],
                self.episode_returns_to_success[first:],
                strict=True,
            )
        ]


@dataclasses.dataclass
class MetaTestResult:
    """The outcome of :meth:`MetaEvaluator.evaluate`: per task and aggregated over tasks.

    Aggregates are computed from :attr:`tasks` (so they can never disagree with them):

    * :attr:`return_per_episode`, :attr:`success_rate_per_episode`: the adaptation curve, the
      mean over tasks at each episode index (``0 .. exploration_episodes + test_episodes - 1``);
    * :attr:`test_return`: the mean over tasks of each task's mean post-adaptation return;
    * :attr:`test_success_rate`: the fraction of tasks that **succeeded after adaptation, a task
      counting as a success if any of its test episodes succeeded** (an episode succeeds if any
      of its steps reports ``info["success"]``);
    * :attr:`test_episode_success_rate`: the fraction of all test episodes that succeeded (the
      count of garage's evaluator); with one test episode the two rates are equal;
    * :attr:`metaworld`: with ``metaworld_envs_per_class`` set, Meta-World's own count of the
      same episodes (:mod:`metabench.tasks.metaworld.count`): the number Meta-World+
      reports, higher than :attr:`test_episode_success_rate`, since it counts the first
      episodes to end;
    * :attr:`n_env_steps`: env steps used by the whole evaluation.

    Success rates only count tasks whose env reports success; they are ``None`` if none does.
    """

    algorithm: str
    env: str
    exploration_episodes: int
    test_episodes: int
    seed: int
    tasks: list[TaskResult]
    metaworld_envs_per_class: int | None = None

    @property
    def n_tasks(self) -> int:
        return len(self.tasks)

    def _with_success(self) -> list[TaskResult]:
        return [t for t in self.tasks if t.episode_successes is not None]

    @property
    def return_per_episode(self) -> list[float]:
        """Mean return over tasks at each episode index: the adaptation curve."""
        n = self.exploration_episodes + self.test_episodes
        return [_mean([t.episode_returns[i] for t in self.tasks]) for i in range(n)]

    @property
    def success_rate_per_episode(self) -> list[float] | None:
        """Fraction of tasks whose episode at each index succeeded (``None``: not reported)."""
        tasks = self._with_success()
        if not tasks:
            return None
        n = self.exploration_episodes + self.test_episodes
        return [
            _mean([float(t.episode_successes[i]) for t in tasks if t.episode_successes])
            for i in range(n)
        ]

    @property
    def test_return(self) -> float:
        """Post-adaptation mean return: mean over tasks of the mean test-episode return."""
        return _mean([t.test_return for t in self.tasks])

    @property
    def test_success_rate(self) -> float | None:
        """Fraction of tasks with at least one successful test episode (``None``: not reported)."""
        tasks = self._with_success()
        return _mean([float(bool(t.test_success)) for t in tasks]) if tasks else None

    @property
    def test_episode_success_rate(self) -> float | None:
        """Fraction of test episodes that succeeded, over all tasks (garage's count; Meta-World's
        is :attr:`metaworld`)."""
        tasks = self._with_success()
        if not tasks:
            return None
        return _mean(
            [
                float(s)
                for t in tasks
                if t.episode_successes
                for s in t.episode_successes[t.exploration_episodes :]
            ]
        )

    @property
    def metaworld(self) -> MetaWorldCount | None:
        """Meta-World's count of the test episodes (``None`` without ``metaworld_envs_per_class``
        or without first-success steps)."""
        episodes = [t.counted_test_episodes() for t in self.tasks]
        if self.metaworld_envs_per_class is None or any(e is None for e in episodes):
            return None
        return metaworld_count(
            [task_class(t.task) for t in self.tasks],
            [e for e in episodes if e is not None],
            self.metaworld_envs_per_class,
        )

    @property
    def n_env_steps(self) -> int:
        """Env steps taken by the evaluation, over all tasks and episodes."""
        return sum(sum(t.episode_lengths) for t in self.tasks)
