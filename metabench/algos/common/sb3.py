"""What the algorithms built on Stable-Baselines3 (RL2-PPO, the oracle and multitask references)
share: the action scale SB3's Gaussian policies start at, their logger, and what a checkpoint keeps
of them."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3.common.logger import Logger
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm

from metabench.devices import to_cpu
from metabench.rng import global_rng_state, set_global_rng_state
from metabench.vector import MetaBatchVecEnv

__all__ = [
    "UnclippedActions",
    "load_training_state",
    "quiet_logger",
    "rescale_actions",
    "training_state",
    "unclipped_actions",
]


def quiet_logger(model: OnPolicyAlgorithm, tensorboard_log: str | None) -> None:
    """Without a TensorBoard folder, give ``model`` a logger with no outputs. SB3 would otherwise
    configure one at every ``learn()`` call, which creates an empty ``SB3-<time>`` folder in the
    temporary directory each time: one per training iteration here."""
    if tensorboard_log is None:
        model.set_logger(Logger(folder=None, output_formats=[]))


def rescale_actions(env: gym.Env[Any, Any]) -> gym.Env[Any, Any]:
    """Present a bounded Box action space as [-1, 1], the scale SB3's Gaussian policy starts at
    (std 1); envs with other bounds would have almost every action clipped."""
    space = env.action_space
    if (
        isinstance(space, gym.spaces.Box)
        and np.isfinite(space.low).all()
        and np.isfinite(space.high).all()
        and not (np.all(space.low == -1.0) and np.all(space.high == 1.0))
    ):
        # bounds in the space's dtype: float32 ones on a float64 Box make gymnasium warn of an
        # overflow when it compares them with float64's range
        one = space.dtype.type(1.0)
        return gym.wrappers.RescaleAction(env, -one, one)
    return env


UNCLIPPED_BOUND = 1e6
"""The bounds :class:`UnclippedActions` shows SB3: far beyond any sample of a Gaussian policy."""


class UnclippedActions(gym.ActionWrapper[Any, np.ndarray, np.ndarray]):
    """Present the action space as ``[-1e6, 1e6]``, so SB3 passes its Gaussian sample on
    unclipped (SB3 clips to the env's bounds before ``step`` and in ``predict``, and refuses
    infinite bounds).

    garage's policies step the env with the raw sample: the task env (HalfCheetah) charges its
    control cost on it, so exploration noise beyond the bounds is paid for, and MuJoCo clamps
    the actuators. Actions pass through unchanged.
    """

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        super().__init__(env)
        space = env.action_space
        if not isinstance(space, gym.spaces.Box):
            raise TypeError(f"UnclippedActions needs a Box action space, got {space}")
        self.action_space = gym.spaces.Box(
            -UNCLIPPED_BOUND, UNCLIPPED_BOUND, space.shape, space.dtype
        )

    def action(self, action: np.ndarray) -> np.ndarray:
        return action


def unclipped_actions(env: gym.Env[Any, Any]) -> gym.Env[Any, Any]:
    """``env`` in :class:`UnclippedActions` (a picklable wrapper factory for worker processes)."""
    return UnclippedActions(env)


def training_state(
    model: OnPolicyAlgorithm, venv: MetaBatchVecEnv, iterations: int
) -> dict[str, Any]:
    """Weights, optimizer, counters and task schedule, as tensors and plain values. SB3 seeds and
    draws from the global generators (minibatch order from NumPy's, action noise from torch's):
    resuming exactly needs all three, and on a GPU the GPU's generator (``"cuda_rng"``) too.
    The tensors are on the CPU, so the checkpoint loads on either device."""
    state = {
        "policy": model.policy.state_dict(),
        "optimizer": model.policy.optimizer.state_dict(),
        "iterations": iterations,
        "num_timesteps": model.num_timesteps,
        "tasks": venv.state_dict(),
        "global_rng": global_rng_state(),
    }
    if model.device.type == "cuda":  # on the CPU the state stays as it always was
        state = to_cpu(state)
        state["cuda_rng"] = torch.cuda.get_rng_state(model.device)
    return state


TRAINING_ONLY = ("optimizer", "num_timesteps", "tasks")
"""What of :func:`training_state` only training reads: a trained agent leaves it out."""


def agent_state(state: dict[str, Any]) -> dict[str, Any]:
    """:func:`training_state` without what only training reads (:data:`TRAINING_ONLY`): the
    policy's weights, the iteration count and the random states a meta-test draws from."""
    return {key: value for key, value in state.items() if key not in TRAINING_ONLY}


def load_agent_state(model: OnPolicyAlgorithm, state: dict[str, Any]) -> int:
    """Restore :func:`agent_state` (or a whole :func:`training_state`) into ``model``'s policy
    and the random states; returns the iteration count."""
    model.policy.load_state_dict(state["policy"])
    set_global_rng_state(state["global_rng"])
    if model.device.type == "cuda" and "cuda_rng" in state:  # saved on a GPU, resumed on one
        torch.cuda.set_rng_state(state["cuda_rng"], model.device)
    return int(state["iterations"])


def load_training_state(
    model: OnPolicyAlgorithm, venv: MetaBatchVecEnv, state: dict[str, Any]
) -> int:
    """Restore :func:`training_state`; returns the iteration count. Iterations end where trials
    (or episodes) end, so the next ``learn()`` starts with a reset: the one that was due."""
    iterations = load_agent_state(model, state)
    model.policy.optimizer.load_state_dict(state["optimizer"])
    model.num_timesteps = int(state["num_timesteps"])
    venv.load_state_dict(state["tasks"])
    model._last_obs = None
    return iterations


class SB3Checkpoints:
    """The checkpoint methods of an algorithm that trains an SB3 ``model`` on a meta-batch
    ``venv`` (RL2, the oracle and multitask references): :func:`training_state` under the
    :meth:`checkpoint_identity` that a checkpoint must match to be loaded, and
    :func:`agent_state` as the trained agent. Put it before ``MetaRLAlgorithm`` in the bases."""

    model: OnPolicyAlgorithm
    venv: MetaBatchVecEnv
    iterations: int
    config: Any

    def checkpoint_identity(self) -> dict[str, Any]:
        """Plain values a checkpoint records and must match to be loaded (its configuration)."""
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue training: weights, optimizer, counters, task schedule."""
        return {
            **self.checkpoint_identity(),
            **training_state(self.model, self.venv, self.iterations),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._check_identity(state)
        self.iterations = load_training_state(self.model, self.venv, state)

    def agent_state(self, state: dict[str, Any]) -> dict[str, Any]:
        """The policy and the random states, without the optimiser and the task schedule."""
        return agent_state(state)

    def load_agent_state(self, state: dict[str, Any]) -> None:
        self._check_identity(state)
        self.iterations = load_agent_state(self.model, state)

    def _check_identity(self, state: dict[str, Any]) -> None:
        """:raises ValueError: naming what differs, for a checkpoint of another configuration."""
        differing = [
            type(self.config).__name__ if key == "config" else key
            for key, value in self.checkpoint_identity().items()
            if state.get(key) != value
        ]
        if differing:
            raise ValueError(f"checkpoint was written with a different {' or '.join(differing)}")
