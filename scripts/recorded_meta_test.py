"""A run's own meta-test, replayed through an env wrapper that records what the scripts look at
(``goal_tracking.py``, ``ant_goal_tracking.py``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import gymnasium as gym

from metabench.evaluation import MetaEvaluator
from metabench.harness.loading import LoadedRun

Recorder = TypeVar("Recorder", bound=gym.Env[Any, Any])


def recorded_meta_test(
    run: LoadedRun, record: Callable[[gym.Env[Any, Any]], Recorder], test_tasks: int | None
) -> tuple[Recorder, MetaEvaluator]:
    """Meta-test ``run`` as its own meta-test does (its protocol, its test-episode mode) on its
    first ``test_tasks`` test tasks (``None``: all), one task after another in this process,
    with every test env wrapped by ``record``.

    :returns: the wrapper of the env the meta-test stepped, and the meta-test's evaluator (its
        tasks, exploration and test episodes).
    """
    plan, seed = run.plan, run.plan.config.seed
    made: list[Recorder] = []

    def make_env() -> Recorder:
        made.append(record(plan.spec.make_test_env(seed)))
        return made[-1]

    reference = plan.evaluator(plan.test_tasks[:test_tasks])
    evaluator = MetaEvaluator(
        make_env,
        reference.test_tasks,
        reference.exploration_episodes,
        reference.test_episodes,
        seed=seed,
        metaworld_envs_per_class=reference.metaworld_envs_per_class,
    )
    evaluator.evaluate(run.algorithm)
    return made[-1], evaluator
