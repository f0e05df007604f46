"""random-search: an algorithm of your own, plugged into metabench without changing metabench.

It meta-trains one linear policy for the whole task distribution by random search: from random
weights, a random change is kept when it scores better on the same tasks. It does not adapt, so
at best it finds the best policy that ignores the task (on PointGoal: staying near the centre,
which NOP's zero action does from the start). What metabench needs of it is the plug-in contract
(``docs/own-algorithm.md``):

- a :class:`~metabench.algos.base.MetaRLAlgorithm` that sets ``steps_per_iteration`` and
  implements ``train``, ``get_exploration_policy`` and ``adapt_policy``;
- ``state_dict()`` of tensors and plain values only, so that a checkpoint can be read back;
- ``from_benchmark(envs, config, *, log_dir, device)``, how metabench builds it on a benchmark
  (``envs``: the run's environments; the default calls a constructor of the built-in torch
  algorithms' shape; this one overrides it);
- an :class:`~metabench.algos.implementation.Implementation`: the class and its config
  dataclass, whose fields are the hyperparameters with their defaults;
- a spec file, ``random-search.toml``, whose ``entry_point`` names that implementation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Self

import gymnasium as gym
import numpy as np
import torch

from metabench.algos.base import MetaRLAlgorithm, Policy
from metabench.algos.implementation import Implementation
from metabench.algos.run_envs import RunEnvs
from metabench.data import EpisodeBatch
from metabench.validation import check_config, option

__all__ = ["IMPLEMENTATION", "LinearPolicy", "RandomSearch", "RandomSearchConfig"]


@dataclass(frozen=True)
class RandomSearchConfig:
    """The hyperparameters (``--set KEY=VALUE``, ``metabench list``): defaults, ranges, docs."""

    init_std: float = option(1.0, "std of the initial weights", low=0.0)
    step_size: float = option(0.1, "std of each random change to a weight", low=0.0, low_open=True)
    steps_per_candidate: int = option(200, "environment steps each candidate is scored on", low=1)

    def __post_init__(self) -> None:
        check_config(self)


class LinearPolicy(Policy):
    """``action = clip(weights @ [observation, 1])``: deterministic, no state."""

    def __init__(self, weights: np.ndarray, action_space: gym.spaces.Box) -> None:
        self.weights = weights
        self.action_space = action_space

    def get_action(self, observation: np.ndarray) -> np.ndarray:
        features = np.append(np.ravel(observation), 1.0)
        action = self.weights @ features
        return np.clip(action, self.action_space.low, self.action_space.high)


class RandomSearch(MetaRLAlgorithm):
    """Random search for the linear policy with the best mean reward per step over tasks.

    :param env: a task env of the training distribution; ``reset(seed=...)`` draws its task.
    :param config: the hyperparameters.
    :param seed: seeds every random draw of training.
    """

    def __init__(self, env: gym.Env[Any, Any], config: RandomSearchConfig, seed: int) -> None:
        if not isinstance(env.action_space, gym.spaces.Box):
            raise ValueError(f"random-search needs a Box action space, got {env.action_space}")
        self.env = env
        self.config = config
        self.rng = np.random.default_rng(seed)
        n_features = gym.spaces.flatdim(env.observation_space) + 1
        shape = (int(np.prod(env.action_space.shape)), n_features)
        self.weights = config.init_std * self.rng.standard_normal(shape)
        # the contract: environment steps of one train() iteration (two candidates scored)
        self.steps_per_iteration = 2 * config.steps_per_candidate

    @classmethod
    def from_benchmark(
        cls,
        envs: RunEnvs,
        config: RandomSearchConfig,
        *,
        log_dir: str | None = None,
        device: str = "cpu",
    ) -> Self:
        """The algorithm on the run's training env, seeded with the run's seed; the rest is not
        used.

        ``envs`` is the run's environments (``docs/own-algorithm.md``): the task env's id and
        its arguments for meta-training (``envs.benchmark``'s, ``horizon`` and the spec file's
        ``env.*`` settings included) and the run's seed."""
        env = gym.make(envs.env_id, **envs.train_env_kwargs()).unwrapped
        return cls(env, config, envs.seed)

    def train(self, n_iterations: int) -> dict[str, float]:
        """Per iteration: score the current weights and a random change of them on the same
        tasks, and keep the better."""
        stats: dict[str, float] = {}
        for _ in range(n_iterations):
            change = self.config.step_size * self.rng.standard_normal(self.weights.shape)
            tasks_seed = int(self.rng.integers(2**31))
            current = self._score(self.weights, tasks_seed)
            candidate = self._score(self.weights + change, tasks_seed)
            if candidate > current:
                self.weights = self.weights + change
            stats = {
                "metatrain/reward_per_step": max(current, candidate),
                "metatrain/accepted": float(candidate > current),
            }
        return stats

    def _score(self, weights: np.ndarray, tasks_seed: int) -> float:
        """Mean reward per step of ``weights`` over ``steps_per_candidate`` steps, each episode
        on a task drawn from ``tasks_seed``'s stream."""
        assert isinstance(self.env.action_space, gym.spaces.Box)
        policy = LinearPolicy(weights, self.env.action_space)
        tasks = np.random.default_rng(tasks_seed)
        total, done = 0.0, True
        observation: np.ndarray = np.zeros(0)  # replaced by the first reset
        for _ in range(self.config.steps_per_candidate):
            if done:  # a seeded reset draws a new task (an unseeded one would keep the task)
                observation, _ = self.env.reset(seed=int(tasks.integers(2**31)))
            observation, reward, terminated, truncated, _ = self.env.step(
                policy.get_action(observation)
            )
            total += float(reward)
            done = terminated or truncated
        return total / self.config.steps_per_candidate

    @property
    def deterministic_test(self) -> bool:
        return True  # a linear policy: no sampling

    def get_exploration_policy(self) -> LinearPolicy:
        assert isinstance(self.env.action_space, gym.spaces.Box)
        return LinearPolicy(self.weights.copy(), self.env.action_space)

    def adapt_policy(
        self, exploration_policy: Policy, exploration_episodes: EpisodeBatch
    ) -> Policy:
        """No adaptation: one policy for every task.

        ``exploration_episodes`` holds the test task's ``spec.exploration_episodes`` episodes,
        steps concatenated: observations, actions, unscaled rewards, step types, lengths, last
        observations and, where the task env reports it, ``env_infos["success"]``, nothing else
        of the env's info (``docs/own-algorithm.md``, "What adapt_policy receives")."""
        return exploration_policy

    def state_dict(self) -> dict[str, Any]:
        # tensors and plain values only: a NumPy array here would be refused when saved
        return {"weights": torch.as_tensor(self.weights), "rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.weights = state["weights"].numpy()
        self.rng.bit_generator.state = state["rng"]


# -- the implementation that random-search.toml's entry_point names -------------------------------
IMPLEMENTATION = Implementation(RandomSearch, RandomSearchConfig)
