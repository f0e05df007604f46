"""What a meta-test records: every episode of every test task, and the tasks themselves.

:class:`MetaTestResult` holds one :class:`TaskResult` per test task (the return, length and
success of each episode of its trial) and the numbers the tables report. Tasks are stored in a
replayable JSON form (:func:`task_to_json`, :func:`task_from_json`). Success is keyed by the
task's index in the test task list, never by env name (Meta-World's own
``metalearning_evaluation`` keys it by name, which merges all the tasks of ML1 into one).

Stored records are read through :func:`upgrade_record`, the one reader of earlier versions:
version 1 named the protocol's episode counts ``n_exploration_eps`` and ``n_test_episodes``;
version 2 (:data:`RESULT_VERSION`) names them as the API does, ``exploration_episodes`` and
``test_episodes``.
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

__all__ = [
    "RESULT_FORMAT",
    "RESULT_VERSION",
    "MetaTestResult",
    "ResultVersionError",
    "TaskResult",
    "task_from_json",
    "task_to_json",
    "upgrade_record",
]

RESULT_FORMAT = "metabench.MetaTestResult"
"""The ``"format"`` tag of :meth:`MetaTestResult.to_dict`."""
RESULT_VERSION = 2
"""The ``"version"`` of :meth:`MetaTestResult.to_dict` (:func:`upgrade_record` reads version 1)."""

VERSION_1_NAMES = {"n_exploration_eps": "exploration_episodes", "n_test_episodes": "test_episodes"}
"""Version 1's keys of the meta-test protocol's episode counts, and version 2's."""


class ResultVersionError(ValueError):
    """A stored meta-test result of a version this metabench cannot read."""


def _renamed(data: Mapping[str, Any]) -> dict[str, Any]:
    return {VERSION_1_NAMES.get(key, key): value for key, value in data.items()}


def upgrade_record(data: Mapping[str, Any]) -> dict[str, Any]:
    """A stored record in the form of the current version (a new dict; ``data`` is unchanged):
    the one reader of version 1, through which every file metabench writes is read.

    It takes a meta-test result (:meth:`MetaTestResult.to_dict`, and the ``evaluations/*.json``
    files, which add fields to one), a run's ``config.json`` (its ``protocol``) and a
    ``result.json`` (its ``config``, ``metatest`` and ``train_evaluation``). Version 1's
    ``n_exploration_eps`` and ``n_test_episodes`` become ``exploration_episodes`` and
    ``test_episodes`` there and in each task's result; nothing else changes. A record of the
    current version comes back equal.

    :raises ResultVersionError: for a meta-test result of a version other than 1 and 2.
    """
    record = dict(data)
    if record.get("format") == RESULT_FORMAT:  # a meta-test result, or a file that extends one
        version = record.get("version")
        if version == 1:
            record = _renamed(record)
            record["version"] = RESULT_VERSION
            if isinstance(record.get("tasks"), list):
                record["tasks"] = [
                    _renamed(task) if isinstance(task, Mapping) else task
                    for task in record["tasks"]
                ]
        elif version != RESULT_VERSION:
            newer = isinstance(version, int) and version > RESULT_VERSION
            raise ResultVersionError(
                f"meta-test result version {version!r} is "
                + ("newer than this metabench reads" if newer else "not one metabench writes")
                + f" (versions 1 to {RESULT_VERSION}): "
                + ("upgrade metabench to read it" if newer else "the file is not a valid result")
            )
    if isinstance(record.get("protocol"), Mapping):  # config.json, which has no version
        record["protocol"] = _renamed(record["protocol"])
    for key in ("config", "metatest", "train_evaluation"):  # result.json
        if isinstance(record.get(key), Mapping):
            record[key] = upgrade_record(record[key])
    return record


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

    def to_dict(self) -> dict[str, Any]:
        """JSON-able dict; the derived ``test_*`` entries are for readers, not read back."""
        record = {
            "task_index": self.task_index,
            "task": self.task,
            "exploration_episodes": self.exploration_episodes,
            "episode_returns": list(self.episode_returns),
            "episode_lengths": list(self.episode_lengths),
            "episode_successes": (
                None if self.episode_successes is None else list(self.episode_successes)
            ),
            "test_return": self.test_return,
            "test_success": self.test_success,
        }
        if self.episode_success_steps is not None:  # results from before these keep their form
            record["episode_success_steps"] = list(self.episode_success_steps)
            record["episode_returns_to_success"] = list(self.episode_returns_to_success or [])
        return record

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TaskResult:
        """Rebuild a task's result from :meth:`to_dict` output of the current version (those of
        a stored file are upgraded by :meth:`MetaTestResult.from_dict`)."""
        successes = data.get("episode_successes")
        return cls(
            task_index=int(data["task_index"]),
            task=data["task"],
            exploration_episodes=int(data["exploration_episodes"]),
            episode_returns=[float(r) for r in data["episode_returns"]],
            episode_lengths=[int(n) for n in data["episode_lengths"]],
            episode_successes=None if successes is None else [bool(s) for s in successes],
            episode_success_steps=data.get("episode_success_steps"),
            episode_returns_to_success=data.get("episode_returns_to_success"),
        )


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

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict. ``aggregate`` repeats the derived numbers for readers of the file;
        :meth:`from_dict` recomputes them from ``tasks``."""
        record: dict[str, Any] = {
            "format": RESULT_FORMAT,
            "version": RESULT_VERSION,
            "algorithm": self.algorithm,
            "env": self.env,
            "exploration_episodes": self.exploration_episodes,
            "test_episodes": self.test_episodes,
            "seed": self.seed,
            "tasks": [t.to_dict() for t in self.tasks],
            "aggregate": {
                "return_per_episode": self.return_per_episode,
                "success_rate_per_episode": self.success_rate_per_episode,
                "test_return": self.test_return,
                "test_success_rate": self.test_success_rate,
                "test_episode_success_rate": self.test_episode_success_rate,
                "n_env_steps": self.n_env_steps,
                "n_tasks": self.n_tasks,
            },
        }
        count = self.metaworld
        if count is not None:  # recorded only when there is one: other results keep their form
            record["metaworld_envs_per_class"] = self.metaworld_envs_per_class
            record["aggregate"]["metaworld_success_rate"] = count.success_rate
            record["aggregate"]["metaworld_return"] = count.mean_return
            record["aggregate"]["metaworld_success_rate_per_class"] = count.success_rate_per_class
        return record

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MetaTestResult:
        """Rebuild a result from :meth:`to_dict` output (e.g. after ``json.load``), of this
        version or an earlier one (read through :func:`upgrade_record`).

        :raises ResultVersionError: for a version this metabench cannot read.
        """
        if data.get("format") != RESULT_FORMAT:
            raise ValueError(
                f"not a metabench meta-test result: 'format' is {data.get('format')!r}, "
                f"expected {RESULT_FORMAT!r} (write results with MetaTestResult.to_dict)"
            )
        data = upgrade_record(data)
        return cls(
            algorithm=str(data["algorithm"]),
            env=str(data["env"]),
            exploration_episodes=int(data["exploration_episodes"]),
            test_episodes=int(data["test_episodes"]),
            seed=int(data["seed"]),
            tasks=[TaskResult.from_dict(t) for t in data["tasks"]],
            metaworld_envs_per_class=data.get("metaworld_envs_per_class"),
        )
