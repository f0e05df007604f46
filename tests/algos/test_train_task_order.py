"""``train_task_order = "cycled"``: RL2 and MAML train on the cycled sampler's meta-batches, one
per iteration in order, and a resumed run goes on where the schedule stood."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import metabench  # noqa: F401 - registers the ids
from metabench.algos.maml import MAML
from metabench.algos.rl2.rl2_ppo import RL2PPO, RL2PPOConfig
from metabench.tasks.base import CycledTaskSampler, ListTaskSampler
from tests.factories import make_maml

TASKS = [{"goal": [i / 10, -i / 10]} for i in range(6)]
SEED = 3
ITERATIONS = 7  # more than two cycles of 3 blocks


def schedule(n: int) -> list[list[Any]]:
    """The meta-batches of iterations 0, 1, ... computed by the sampler on its own."""
    sampler = CycledTaskSampler(ListTaskSampler(TASKS), SEED)
    return [sampler.sample_batch(k, n, np.random.default_rng()) for k in range(ITERATIONS + 1)]


def rl2() -> RL2PPO:
    config = RL2PPOConfig(
        meta_batch_size=2,
        episodes_per_trial=1,
        hidden_size=4,
        n_epochs=1,
        train_task_order="cycled",
    )
    return RL2PPO(
        "metabench/PointGoal-v0", ListTaskSampler(TASKS), config, seed=SEED,
        env_kwargs={"horizon": 2},
    )  # fmt: skip


def test_rl2_trains_on_the_cycled_batches_and_resumes_on_them() -> None:
    algo, expected = rl2(), schedule(2)
    for k in range(1, ITERATIONS + 1):
        algo.train(1)
        assert algo.venv.tasks == expected[k]  # the trial that has just started
    state, resumed = algo.state_dict(), rl2()
    resumed.load_state_dict(state)
    resumed.train(1)
    algo.train(1)
    assert resumed.venv.tasks == algo.venv.tasks


def record_batches(algo: MAML) -> list[list[Any]]:
    """The tasks ``algo`` collects its pre-update episodes on, iteration by iteration."""
    seen: list[list[Any]] = []
    collect = algo.collect

    def spy(tasks: list[Any], params: list[Any]) -> Any:
        if params[0] is params[-1]:  # the pre-update collection: the meta-parameters for all
            seen.append(list(tasks))
        return collect(tasks, params)

    algo.collect = spy  # type: ignore[method-assign,assignment]
    return seen


def maml() -> MAML:
    return make_maml(
        "metabench/PointGoal-v0", ListTaskSampler(TASKS), meta_batch_size=2, episodes_per_task=1,
        hidden_sizes=(4,), env_kwargs={"horizon": 2}, seed=SEED, train_task_order="cycled",
    )  # fmt: skip


def test_maml_trains_on_the_cycled_batches_and_resumes_on_them() -> None:
    algo = maml()
    seen = record_batches(algo)
    algo.train(ITERATIONS)
    assert seen == schedule(2)[:ITERATIONS]
    resumed = maml()
    resumed.load_state_dict(algo.state_dict())
    resumed_seen = record_batches(resumed)
    resumed.train(1)
    assert resumed_seen == [schedule(2)[ITERATIONS]]


def test_cycling_a_continuous_distribution_names_the_fix() -> None:
    config = RL2PPOConfig(meta_batch_size=2, train_task_order="cycled")
    with pytest.raises(ValueError, match="use 'sampled'"):
        RL2PPO("metabench/PointGoal-v0", None, config)
    with pytest.raises(ValueError, match="use 'sampled'"):
        make_maml("metabench/PointGoal-v0", None, meta_batch_size=2, train_task_order="cycled")
