"""Benchmark definitions: which task env, which tasks to train and test on, which protocol.

A benchmark fixes everything a result depends on besides the algorithm: the task env and its
horizon, where meta-training tasks come from, the held-out test tasks, and the meta-test protocol
(exploration episodes, then test episodes, per test task). Test tasks are drawn from a stream
of the run's seed that training never uses, and recorded with every result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from metabench.tasks.base import Task, TaskSampler

TEST_STREAM = 7
"""``SeedSequence`` spawn key of the test-task stream (training uses the run seed directly)."""


@dataclass(frozen=True)
class BenchmarkSpec:
    """One benchmark.

    :param env_id: the registered task env id.
    :param env_kwargs: task env kwargs for meta-training (horizon, split, ...).
    :param test_env_kwargs: kwargs for the meta-test env (defaults to ``env_kwargs``).
    :param episodes_per_trial: episodes per task in a meta-training trial (RL2).
    :param n_exploration_eps: meta-test episodes before ``adapt_policy``.
    :param n_test_episodes: meta-test episodes with the adapted policy.
    :param n_test_tasks: held-out tasks evaluated at meta-test.
    :param metaworld: ``None``, or the Meta-World benchmark name whose test split is used.
    :param source: where the settings come from.
    """

    name: str
    env_id: str
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    test_env_kwargs: dict[str, Any] | None = None
    episodes_per_trial: int = 2
    n_exploration_eps: int = 1
    n_test_episodes: int = 1
    n_test_tasks: int = 10
    metaworld: str | None = None
    reports_success: bool = False
    source: str = ""

    def train_sampler(self, seed: int) -> TaskSampler | None:
        """Meta-training tasks: ``None`` means the task env's own distribution."""
        if self.metaworld is None:
            return None
        from metabench.tasks.metaworld import MetaWorldTaskSampler

        return MetaWorldTaskSampler(
            self.metaworld, split="train", env_name=self.env_kwargs.get("env_name"), seed=seed
        )

    def make_test_env(self, seed: int) -> Any:
        """A fresh task env for meta-testing."""
        import gymnasium as gym

        kwargs = dict(self.env_kwargs if self.test_env_kwargs is None else self.test_env_kwargs)
        if self.metaworld is not None:
            kwargs["seed"] = seed
        return gym.make(self.env_id, **kwargs).unwrapped

    def test_tasks(self, seed: int) -> list[Task]:
        """The held-out tasks of a run with this seed: the same seed gives the same tasks."""
        rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(TEST_STREAM,)))
        if self.metaworld is not None:
            from metabench.tasks.metaworld import MetaWorldTaskSampler

            sampler = MetaWorldTaskSampler(
                self.metaworld, split="test", env_name=self.env_kwargs.get("env_name"), seed=seed
            )
            return sampler.sample(self.n_test_tasks, rng)
        env = self.make_test_env(seed)
        return list(env.sample_tasks(self.n_test_tasks, rng))

    def train_env_kwargs(self, seed: int) -> dict[str, Any]:
        """Task env kwargs for meta-training (Meta-World benchmarks are seeded here)."""
        kwargs = dict(self.env_kwargs)
        if self.metaworld is not None:
            kwargs["seed"] = seed
        return kwargs


def _metaworld_spec(name: str, benchmark: str, **env_kwargs: str) -> BenchmarkSpec:
    """A Meta-World benchmark under Meta-World's protocol: trials of 10 episodes, meta-test with
    10 adaptation then 3 evaluation episodes on the test split, horizon 500."""
    return BenchmarkSpec(
        name,
        f"metabench/{benchmark}-v0",
        env_kwargs={**env_kwargs, "split": "train"},
        test_env_kwargs={**env_kwargs, "split": "test"},
        episodes_per_trial=10,
        n_exploration_eps=10,
        n_test_episodes=3,
        n_test_tasks=10,
        metaworld=benchmark,
        reports_success=True,
        source="Meta-World protocol: 10 adaptation + 3 evaluation episodes, horizon 500",
    )


BENCHMARKS: dict[str, BenchmarkSpec] = {
    spec.name: spec
    for spec in [
        BenchmarkSpec(
            "HalfCheetahVel",
            "metabench/HalfCheetahVel-v0",
            env_kwargs={"horizon": 100},
            episodes_per_trial=4,
            n_exploration_eps=3,
            n_test_episodes=1,
            n_test_tasks=10,
            source="garage RL2-PPO HalfCheetahVel example: horizon 100, 4 episodes per trial; "
            "meta-test uses the same 4-episode trial (3 exploration + 1 test)",
        ),
        BenchmarkSpec(
            "HalfCheetahDir",
            "metabench/HalfCheetahDir-v0",
            env_kwargs={"horizon": 100},
            episodes_per_trial=4,
            n_exploration_eps=3,
            n_test_episodes=1,
            n_test_tasks=10,
            source="MAML paper / learn2learn: horizon 100",
        ),
        _metaworld_spec("ML10", "ML10"),
        _metaworld_spec("ML45", "ML45"),
        _metaworld_spec("ML1-reach", "ML1", env_name="reach-v3"),
        BenchmarkSpec(
            "Bandit",
            "metabench/Bandit-v0",
            env_kwargs={"n_arms": 3},
            episodes_per_trial=3,
            n_exploration_eps=1,
            n_test_episodes=2,
            n_test_tasks=30,
            reports_success=True,
            source="metabench toy after Duan et al. 2016 (RL2 bandits): 3 deterministic arms, "
            "one pull per episode, 3 episodes per trial",
        ),
        BenchmarkSpec(
            "PointGoal",
            "metabench/PointGoal-v0",
            env_kwargs={"horizon": 20},
            episodes_per_trial=2,
            n_exploration_eps=1,
            n_test_episodes=1,
            n_test_tasks=20,
            reports_success=True,
            source="MAML paper 2-D navigation (goals in [-0.5, 0.5]^2), shortened horizon",
        ),
    ]
}


def get_benchmark(name: str) -> BenchmarkSpec:
    """The benchmark called ``name``, or a ``KeyError`` listing the valid names."""
    try:
        return BENCHMARKS[name]
    except KeyError:
        raise KeyError(
            f"unknown benchmark {name!r}; choose one of: {', '.join(sorted(BENCHMARKS))}"
        ) from None
