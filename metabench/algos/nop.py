"""NOP: a meta-RL algorithm that learns nothing, the floor of every results table.

Its policy takes a fixed "zero" action or uniformly random actions, :meth:`NOP.train` only counts
iterations and :meth:`NOP.adapt_policy` hands back the exploration policy unchanged, so any
difference between its exploration and test episodes comes from the env alone.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Literal, Self

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from metabench.algos.base import MetaRLAlgorithm, Policy
from metabench.algos.implementation import Implementation
from metabench.algos.run_envs import RunEnvs
from metabench.data import EpisodeBatch
from metabench.validation import check_config, check_count, option

__all__ = ["NOP", "NOPConfig", "NOPPolicy"]

ACTIONS = ("zero", "random")


@dataclass(frozen=True)
class NOPConfig:
    """NOP's one setting."""

    action: Literal["zero", "random"] = option(
        "zero", "zero: the all-zero action; random: uniform samples of the action space"
    )

    def __post_init__(self) -> None:
        check_config(self)


def _zero_action(space: gym.spaces.Space[Any]) -> np.ndarray:
    """The all-zero action of a Box (clipped into its bounds) or the first action of a Discrete."""
    if isinstance(space, spaces.Box):
        return np.clip(np.zeros(space.shape, dtype=space.dtype), space.low, space.high)
    if isinstance(space, spaces.Discrete):
        return np.asarray(space.start, dtype=space.dtype)
    raise ValueError(
        f"NOP(action='zero') supports Box and Discrete action spaces, got {space}; "
        f"use action='random'"
    )


class NOPPolicy(Policy):
    """Acts without looking at the observation.

    :param action_space: the env's action space.
    :param action: ``"zero"`` (see :class:`NOP`) or ``"random"``.
    :param rng: draws the seed of this policy's copy of ``action_space`` (``"random"`` only).
    """

    def __init__(
        self,
        action_space: gym.spaces.Space[Any],
        action: Literal["zero", "random"] = "zero",
        rng: np.random.Generator | None = None,
    ) -> None:
        self.action_space = action_space
        self.action = action
        self.n_resets = 0
        self.n_actions = 0
        self._zero = _zero_action(action_space) if action == "zero" else None
        self._space: gym.spaces.Space[Any] | None = None
        if action == "random":
            self._space = copy.deepcopy(action_space)
            rng = np.random.default_rng() if rng is None else rng
            self._space.seed(int(rng.integers(2**32)))

    def reset(self) -> None:
        self.n_resets += 1

    def get_action(self, observation: np.ndarray) -> np.ndarray:
        self.n_actions += 1
        if self._space is not None:
            return np.asarray(self._space.sample())
        assert self._zero is not None
        return self._zero.copy()


class NOP(MetaRLAlgorithm):
    """No optimisation performed: the baseline that does not learn or adapt.

    :param action_space: the action space of the task env (``env.action_space``).
    :param action: ``"zero"``: always the all-zero action (clipped into a Box's bounds; the first
        action of a Discrete space); ``"random"``: uniform samples of ``action_space``.
    :param seed: seeds the random actions. Each :meth:`get_exploration_policy` call gets its own
        stream drawn from it, so the same seed and the same sequence of calls give the same
        actions. ``None`` draws fresh entropy.

    Example::

        >>> algo = NOP(gym.spaces.Box(-1.0, 1.0, shape=(2,)))
        >>> policy = algo.get_exploration_policy()
        >>> policy.get_action(np.zeros(3)).tolist()
        [0.0, 0.0]
        >>> algo.train(5), algo.n_iterations
        ({}, 5)
    """

    steps_per_iteration = 0  # nothing is meta-trained

    def __init__(
        self,
        action_space: gym.spaces.Space[Any],
        action: Literal["zero", "random"] = "zero",
        seed: int | None = None,
    ) -> None:
        if not isinstance(action_space, gym.spaces.Space):
            raise ValueError(
                f"NOP needs the env's action space (env.action_space), got "
                f"{type(action_space).__name__}"
            )
        if action not in ACTIONS:
            raise ValueError(f"action must be 'zero' or 'random', got {action!r}")
        if action == "zero":
            _zero_action(action_space)  # unsupported spaces fail here, not at the first step
        self.action_space = action_space
        self.action = action
        self.seed = seed
        self.n_iterations = 0
        self._rng = np.random.default_rng(seed)

    @classmethod
    def from_benchmark(
        cls, envs: RunEnvs, config: NOPConfig, *, log_dir: str | None = None, device: str = "cpu"
    ) -> Self:
        """NOP on the meta-test env's action space (the rest is unused)."""
        env = envs.test_env()
        try:
            return cls(env.action_space, action=config.action, seed=envs.seed)
        finally:
            env.close()

    def train(self, n_iterations: int) -> dict[str, float]:
        """Learn nothing; only count ``n_iterations``. Returns ``{}``: no meta-training numbers."""
        self.n_iterations += check_count("n_iterations", n_iterations, 0)
        return {}

    # exploration policies draw from self._rng: seeded per meta-test, restored afterwards
    evaluation_streams = MetaRLAlgorithm._own_generator_streams

    @property
    def deterministic_test(self) -> bool:
        """The zero action is a fixed action; random actions are not."""
        return self.action == "zero"

    def get_exploration_policy(self) -> NOPPolicy:
        return NOPPolicy(self.action_space, self.action, self._rng)

    def adapt_policy(
        self, exploration_policy: Policy, exploration_episodes: EpisodeBatch
    ) -> Policy:
        """Return ``exploration_policy`` itself: NOP does not adapt."""
        return exploration_policy


# -- the entry point of baselines/nop.toml ---------------------------------------------------------
NOP_IMPLEMENTATION = Implementation(NOP, NOPConfig)
"""NOP on a benchmark: ``entry_point = "metabench.algos.nop:NOP_IMPLEMENTATION"``."""
