"""Meta-World's split (``[split] kind = "metaworld"``): a benchmark's fixed train and test
classes, each with its 50 goals.

This module loads without Meta-World (reading every benchmark file stays cheap); the split's
tasks come from :class:`~metabench.tasks.metaworld.envs.MetaWorldTaskSampler` when asked for.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from metabench.tasks.base import Task, TaskSampler
from metabench.tasks.splits import Part, Split, SplitKeyError

if TYPE_CHECKING:
    from metabench.tasks.metaworld.envs import MetaWorldTaskSampler


class MetaWorldSplit(Split):
    """Meta-World's train and test classes of ``benchmark`` (``"ML1"``, ``"ML10"``,
    ``"ML45"``); the task envs are seeded with the run's seed, as Meta-World seeds its own.

    ``test_goals_per_class`` takes test tasks from the first this many goals of each test class
    (``None``: all 50), as Meta-World+'s ``total_goals_per_task_test``.
    ``[evaluation] metaworld_envs_per_class`` adds Meta-World's own count of the meta-test
    (:mod:`metabench.tasks.metaworld.count`).
    """

    kind = "metaworld"
    keys: ClassVar[Mapping[str, type | tuple[type, ...]]] = {
        "benchmark": str,
        "test_goals_per_class": int,
    }
    required: ClassVar[Mapping[str, str]] = {"benchmark": '"ML1" | "ML10" | "ML45"'}
    evaluation_keys = ("metaworld_envs_per_class",)
    finite = True

    @property
    def benchmark(self) -> str:
        return str(self.values["benchmark"])

    def env_kwargs(self, part: Part, seed: int) -> dict[str, Any]:
        return {"split": part, "seed": seed}

    def _sampler(
        self, part: Part, env_kwargs: Mapping[str, Any], seed: int
    ) -> MetaWorldTaskSampler:
        from metabench.tasks.metaworld.envs import MetaWorldTaskSampler

        goals = self.values.get("test_goals_per_class") if part == "test" else None
        try:
            return MetaWorldTaskSampler(
                self.benchmark,
                split=part,
                env_name=env_kwargs.get("env_name"),
                seed=seed,
                goals_per_class=goals,
            )
        except ValueError as error:
            if goals is None:
                raise
            raise SplitKeyError("test_goals_per_class", str(error)) from None

    def train_sampler(
        self, make_env: Callable[[], Any], env_kwargs: Mapping[str, Any], seed: int
    ) -> TaskSampler:
        return self._sampler("train", env_kwargs, seed)

    def test_tasks(
        self,
        make_env: Callable[[], Any],
        env_kwargs: Mapping[str, Any],
        seed: int,
        n: int | None,
        rng: np.random.Generator,
    ) -> list[Task]:
        sampler = self._sampler("test", env_kwargs, seed)
        if n is None:
            return list(sampler.tasks)
        return sampler.sample(n, rng)

    def train_evaluation_tasks(
        self, env_kwargs: Mapping[str, Any], seed: int, n: int, rng: np.random.Generator
    ) -> list[Task]:
        """``n`` training tasks, as many of each training class, for the meta-train success per
        class Meta-World reports."""
        return self._sampler("train", env_kwargs, seed).sample(n, rng) if n else []

    def test_tasks_note(self) -> str:
        goals = self.values.get("test_goals_per_class")
        return "" if goals is None else f", {goals}/class"

    def record(self, test_env: Any) -> dict[str, Any]:
        return {
            "version": importlib.metadata.version("metaworld"),
            "benchmark": self.benchmark,
            "reward_function_version": getattr(test_env, "reward_function_version", None),
            "test_goals_per_class": self.values.get("test_goals_per_class"),
        }
