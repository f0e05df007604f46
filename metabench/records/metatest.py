"""A meta-test as a run records it: every episode of every test task, and the numbers the
tables report, computed from those episodes (never read from the file's ``aggregate``)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from metabench.evaluation.results import MetaTestResult, TaskResult
from metabench.records.migrations import VERSION, migrate
from metabench.tasks.metaworld.count import MetaWorldCount

__all__ = ["FORMAT", "EvaluationRecord", "MetaTestRecord", "SuccessCounts"]

FORMAT = "metabench.MetaTestResult"
"""The ``"format"`` tag of a meta-test record (and of an ``evaluations/*.json`` file)."""


@dataclass(frozen=True)
class SuccessCounts:
    """The success counts of a meta-test whose env reports success, each its own number.

    :param task_rate: the fraction of test tasks (keyed by their index in the test task list)
        with at least one successful test episode: metabench's count.
    :param episode_rate: the fraction of test episodes that succeeded (garage's count).
    :param metaworld: Meta-World's own count of the same episodes
        (:mod:`metabench.tasks.metaworld.count`), where the meta-test records it.
    """

    task_rate: float
    episode_rate: float
    metaworld: MetaWorldCount | None


@dataclass(frozen=True)
class MetaTestRecord:
    """One meta-test: what :class:`~metabench.evaluation.MetaTestResult` holds, as stored.

    :param tasks: each test task's episodes, in the order of the test tasks.
    :param metaworld_envs_per_class: the sub-envs per class of Meta-World's count (``None``:
        not a Meta-World meta-test, or one recorded before its first-success steps).
    """

    algorithm: str
    env: str
    exploration_episodes: int
    test_episodes: int
    seed: int
    tasks: tuple[TaskResult, ...]
    metaworld_envs_per_class: int | None = None

    @classmethod
    def of(cls, result: MetaTestResult) -> MetaTestRecord:
        """The record of a meta-test that just ran (the same fields, the tasks as a tuple)."""
        fields = {field.name: getattr(result, field.name) for field in dataclasses.fields(cls)}
        return cls(**{**fields, "tasks": tuple(result.tasks)})

    @cached_property
    def result(self) -> MetaTestResult:
        """The meta-test, whose properties compute every number from the episodes."""
        fields = {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}
        return MetaTestResult(**{**fields, "tasks": list(self.tasks)})

    @property
    def test_return(self) -> float:
        """Mean over tasks of each task's mean post-adaptation return."""
        return self.result.test_return

    @property
    def return_per_episode(self) -> list[float]:
        """Mean return over tasks at each episode index: the adaptation curve."""
        return self.result.return_per_episode

    @property
    def success_rate_per_episode(self) -> list[float] | None:
        """Fraction of tasks whose episode at each index succeeded (``None``: not reported)."""
        return self.result.success_rate_per_episode

    @cached_property
    def success(self) -> SuccessCounts | None:
        """The success counts (``None`` where the env reports no success)."""
        task_rate = self.result.test_success_rate
        episode_rate = self.result.test_episode_success_rate
        if task_rate is None or episode_rate is None:
            return None
        return SuccessCounts(task_rate, episode_rate, self.result.metaworld)

    @property
    def n_tasks(self) -> int:
        return len(self.tasks)

    def to_json(self) -> dict[str, Any]:
        """Every field, and ``aggregate``: the numbers computed from the episodes, for readers
        of the file (:meth:`from_json` does not read them back)."""
        result = self.result
        aggregate: dict[str, Any] = {
            "return_per_episode": result.return_per_episode,
            "success_rate_per_episode": result.success_rate_per_episode,
            "test_return": result.test_return,
            "test_success_rate": result.test_success_rate,
            "test_episode_success_rate": result.test_episode_success_rate,
            "n_env_steps": result.n_env_steps,
            "n_tasks": result.n_tasks,
        }
        count = result.metaworld
        if count is not None:
            aggregate["metaworld_success_rate"] = count.success_rate
            aggregate["metaworld_return"] = count.mean_return
            aggregate["metaworld_success_rate_per_class"] = count.success_rate_per_class
        return {
            "format": FORMAT,
            "version": VERSION,
            "algorithm": self.algorithm,
            "env": self.env,
            "exploration_episodes": self.exploration_episodes,
            "test_episodes": self.test_episodes,
            "seed": self.seed,
            "metaworld_envs_per_class": self.metaworld_envs_per_class,
            "tasks": [_task_json(task) for task in self.tasks],
            "aggregate": aggregate,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MetaTestRecord:
        """Read a stored meta-test of any version (:func:`~metabench.records.migrate`).

        :raises ValueError: for a file that is not a meta-test.
        :raises RecordVersionError: for a version this metabench cannot read.
        """
        return cls._from_current(migrate(_checked(data), "metatest"))

    @classmethod
    def _from_current(cls, data: Mapping[str, Any]) -> MetaTestRecord:
        envs = data["metaworld_envs_per_class"]
        return cls(
            algorithm=str(data["algorithm"]),
            env=str(data["env"]),
            exploration_episodes=int(data["exploration_episodes"]),
            test_episodes=int(data["test_episodes"]),
            seed=int(data["seed"]),
            tasks=tuple(_task(task) for task in data["tasks"]),
            metaworld_envs_per_class=None if envs is None else int(envs),
        )


@dataclass(frozen=True)
class EvaluationRecord:
    """An ``evaluations/*.json`` file: a meta-test during training (``iteration-NNNNNN.json``)
    or by ``metabench evaluate`` (``evaluate-<time>.json``), and where it stood.

    :param iteration: the training iteration of the agent it meta-tested.
    :param env_steps: the env steps of training by then (``None``: recorded before they were).
    :param test_task_indices: the test tasks it ran, as indices in ``config.json``'s
        ``test_tasks`` (``None``: all of them).
    :param run: the run directory, for a file written outside it (``evaluate --out``).
    :param device: where its networks acted, where that was not the run's own device.
    """

    metatest: MetaTestRecord
    iteration: int
    env_steps: int | None = None
    test_task_indices: tuple[int, ...] | None = None
    metatest_protocol: dict[str, Any] | None = None
    provenance: dict[str, Any] | None = None
    command: str | None = None
    run: str | None = None
    device: str | None = None

    def to_json(self) -> dict[str, Any]:
        """Every field, beside the meta-test's."""
        indices = self.test_task_indices
        return {
            "iteration": self.iteration,
            "env_steps": self.env_steps,
            "test_task_indices": None if indices is None else list(indices),
            "metatest_protocol": self.metatest_protocol,
            "provenance": self.provenance,
            "command": self.command,
            "run": self.run,
            "device": self.device,
            **self.metatest.to_json(),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> EvaluationRecord:
        """Read a stored file of any version (:func:`~metabench.records.migrate`)."""
        record = migrate(_checked(data), "evaluation")
        indices, steps = record["test_task_indices"], record["env_steps"]
        return cls(
            metatest=MetaTestRecord._from_current(record),
            iteration=int(record["iteration"]),
            env_steps=None if steps is None else int(steps),
            test_task_indices=None if indices is None else tuple(int(i) for i in indices),
            metatest_protocol=record["metatest_protocol"],
            provenance=record["provenance"],
            command=record["command"],
            run=record["run"],
            device=record["device"],
        )


def _checked(data: Mapping[str, Any]) -> Mapping[str, Any]:
    if not isinstance(data, Mapping) or data.get("format") != FORMAT:
        found = data.get("format") if isinstance(data, Mapping) else type(data).__name__
        raise ValueError(
            f"not a metabench meta-test record: 'format' is {found!r}, expected {FORMAT!r} "
            f"(write meta-tests with MetaTestRecord.to_json)"
        )
    return data


def _task_json(task: TaskResult) -> dict[str, Any]:
    """Every field of a task's result; ``test_return`` and ``test_success`` for readers."""
    return {
        "task_index": task.task_index,
        "task": task.task,
        "exploration_episodes": task.exploration_episodes,
        "episode_returns": list(task.episode_returns),
        "episode_lengths": list(task.episode_lengths),
        "episode_successes": _listed(task.episode_successes),
        "episode_success_steps": _listed(task.episode_success_steps),
        "episode_returns_to_success": _listed(task.episode_returns_to_success),
        "test_return": task.test_return,
        "test_success": task.test_success,
    }


def _listed(values: list[Any] | None) -> list[Any] | None:
    return None if values is None else list(values)


def _task(data: Mapping[str, Any]) -> TaskResult:
    successes, steps = data["episode_successes"], data["episode_success_steps"]
    to_success = data["episode_returns_to_success"]
    return TaskResult(
        task_index=int(data["task_index"]),
        task=data["task"],
        exploration_episodes=int(data["exploration_episodes"]),
        episode_returns=[_number(r) for r in data["episode_returns"]],
        episode_lengths=[int(n) for n in data["episode_lengths"]],
        episode_successes=None if successes is None else [bool(s) for s in successes],
        episode_success_steps=None if steps is None else [_step(s) for s in steps],
        episode_returns_to_success=None if to_success is None else [_number(r) for r in to_success],
    )


def _number(value: Any) -> float:
    """A stored number: ``null`` is NaN (JSON has none, and metabench writes it as ``null``)."""
    return math.nan if value is None else float(value)


def _step(value: Any) -> int | None:
    return None if value is None else int(value)
