"""Reference points for every meta-RL number: ``oracle`` and ``multitask`` (SB3 PPO).

Both are plain PPO (Stable-Baselines3) trained on the benchmark's task distribution, a fresh task
every episode, and meta-tested through the same protocol as the meta-RL algorithms; they ignore
the exploration episodes (``adapt_policy`` returns the policy unchanged).

``oracle``
    sees the task appended to its observation (:class:`TaskInObservation`): what a policy that
    knew the task from the first step could do, the ceiling of adaptation.
``multitask``
    sees the task env's observation only: the best single policy for the whole distribution,
    the floor that adaptation must beat to be worth anything.

One iteration collects one episode on each of ``n_envs`` sub-envs (each with its own task), so
iterations end at episode boundaries and a resumed run continues exactly.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import torch as th
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback

from metabench.algos.base import MetaRLAlgorithm, Policy
from metabench.algos.rl2.algorithm import rescale_actions
from metabench.data import EpisodeBatch
from metabench.tasks.base import Task, TaskSampler
from metabench.vector import MetaBatchVecEnv, make_meta_vec_env
from metabench.wrappers import EPISODE_END, EPISODE_RETURN

__all__ = ["ReferenceConfig", "ReferencePPO", "TaskInObservation", "task_features"]


def task_features(task: Task) -> np.ndarray:
    """A task as a flat float vector: the numbers of a dict task in key order
    (``{"velocity": 1.3}`` -> ``[1.3]``, ``{"goal": [x, y]}`` -> ``[x, y]``).

    :raises ValueError: a task that is not a dict of numbers and lists of numbers (a Meta-World
        task hides its goal in serialised state, so the oracle does not support it).
    """
    if not isinstance(task, Mapping):
        raise ValueError(
            f"the oracle needs tasks that are dicts of numbers, got {type(task).__name__}: "
            f"use multitask on this benchmark"
        )
    parts = []
    for key in sorted(task):
        value = np.asarray(task[key], dtype=np.float64).ravel()
        if not np.isfinite(value).all():
            raise ValueError(f"task[{key!r}] = {task[key]!r} is not a finite number")
        parts.append(value)
    return np.concatenate(parts)


class TaskInObservation(gym.ObservationWrapper[np.ndarray, Any, np.ndarray]):
    """Appends the current task (:func:`task_features` of ``env.unwrapped.task``) to a Box
    observation: the oracle's view of any task env.

    Example::

        >>> from metabench.tasks.toy import PointGoalEnv
        >>> env = TaskInObservation(PointGoalEnv())
        >>> obs, _ = env.reset(seed=0, options={"task": {"goal": [0.3, -0.1]}})
        >>> obs[-2:].round(2).tolist()
        [0.3, -0.1]
    """

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        super().__init__(env)
        space = env.observation_space
        if not isinstance(space, gym.spaces.Box) or len(space.shape) != 1:
            raise ValueError(f"TaskInObservation needs a flat Box observation, got {space}")
        probe = env.unwrapped.sample_tasks(1, np.random.default_rng(0))[0]  # type: ignore[attr-defined]
        n_task = task_features(probe).size
        self._dtype = space.dtype
        self.observation_space = gym.spaces.Box(
            low=np.concatenate([space.low, np.full(n_task, -np.inf, space.dtype)]),
            high=np.concatenate([space.high, np.full(n_task, np.inf, space.dtype)]),
            dtype=space.dtype,
        )

    def observation(self, observation: np.ndarray) -> np.ndarray:
        task = self.env.unwrapped.task  # type: ignore[attr-defined]
        if task is None:
            raise ValueError("the task env has no task yet: reset it (with a task) first")
        return np.concatenate([observation, task_features(task)]).astype(self._dtype)


@dataclass(frozen=True)
class ReferenceConfig:
    """Hyperparameters of the reference PPO (Stable-Baselines3's PPO defaults, except where
    noted).

    :param oracle: append the task to the observation (``oracle``) or not (``multitask``).
    :param n_envs: sub-envs, each with its own task; one episode each per iteration.
    :param n_minibatches: minibatches per epoch (the PPO minibatch is the iteration's steps
        divided by it: 250 for 20 episodes of 100 steps).
    :param hidden_sizes: the MLP of the policy and of the value function.
    :param log_std_init: initial log standard deviation of the Gaussian policy.
    :param deterministic_eval: act with the distribution's mean at meta-test (the usual way a
        PPO policy is evaluated).
    """

    oracle: bool = False
    n_envs: int = 20
    learning_rate: float = 3e-4
    n_minibatches: int = 8
    n_epochs: int = 10
    discount: float = 0.99
    gae_lambda: float = 0.95
    clip_range: float = 0.2
    ent_coef: float = 0.0
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    hidden_sizes: tuple[int, ...] = (64, 64)
    log_std_init: float = 0.0
    deterministic_eval: bool = True

    def __post_init__(self) -> None:
        for name in ("n_envs", "n_minibatches", "n_epochs"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        for name in ("learning_rate", "clip_range"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a positive number, got {value!r}")
        if not (0.0 <= self.discount <= 1.0 and 0.0 <= self.gae_lambda <= 1.0):
            raise ValueError("discount and gae_lambda must lie in [0, 1]")
        if not self.hidden_sizes or any(
            isinstance(h, bool) or not isinstance(h, int) or h < 1 for h in self.hidden_sizes
        ):
            raise ValueError(f"hidden_sizes must be positive integers, got {self.hidden_sizes!r}")


class _EpisodeReturns(BaseCallback):
    """Meta-train return per episode, from the trial wrapper's ``info``."""

    def __init__(self) -> None:
        super().__init__()
        self.returns: list[float] = []

    def _on_step(self) -> bool:
        for info in self.locals["infos"]:
            if info.get(EPISODE_END):
                self.returns.append(float(info[EPISODE_RETURN]))
        return True


class ReferencePolicy(Policy):
    """The trained PPO policy acting alone; it keeps no state between steps."""

    def __init__(self, model: PPO, deterministic: bool) -> None:
        self.model = model
        self.deterministic = deterministic

    def get_action(self, observation: np.ndarray) -> np.ndarray:
        action, _ = self.model.predict(observation[None], deterministic=self.deterministic)
        return np.asarray(action[0])


class ReferencePPO(MetaRLAlgorithm):
    """PPO on the task distribution, with (``oracle``) or without (``multitask``) the task in
    its observation; see the module docstring.

    :param env: a task env id or a task env factory.
    :param sampler: training tasks; ``None`` uses the task env's ``sample_tasks``.
    :param config: hyperparameters.
    :param seed: seeds the sub-envs, the task sequence and torch.
    :param env_kwargs: passed to the task env.

    Example::

        >>> import metabench
        >>> algo = ReferencePPO("metabench/PointGoal-v0", config=ReferenceConfig(n_envs=4))
        >>> algo.steps_per_iteration  # 4 episodes of 20 steps
        80
    """

    def __init__(
        self,
        env: Any,
        sampler: TaskSampler | None = None,
        config: ReferenceConfig | None = None,
        seed: int = 0,
        env_kwargs: dict[str, Any] | None = None,
        tensorboard_log: str | None = None,
    ) -> None:
        self.config = config = config or ReferenceConfig()
        self.venv: MetaBatchVecEnv = make_meta_vec_env(  # type: ignore[assignment]
            env,
            config.n_envs,
            episodes_per_trial=1,
            sampler=sampler,
            rl2=False,
            seed=seed,
            backend="sb3",
            env_kwargs=env_kwargs,
            wrapper=self.wrap_env,
        )
        horizon = int(self.venv.get_attr("horizon", indices=[0])[0])
        self.steps_per_iteration = horizon * config.n_envs
        self.model = PPO(
            "MlpPolicy",
            self.venv,
            learning_rate=config.learning_rate,
            n_steps=horizon,
            batch_size=max(1, self.steps_per_iteration // config.n_minibatches),
            n_epochs=config.n_epochs,
            gamma=config.discount,
            gae_lambda=config.gae_lambda,
            clip_range=config.clip_range,
            ent_coef=config.ent_coef,
            vf_coef=config.vf_coef,
            max_grad_norm=config.max_grad_norm,
            policy_kwargs={
                "net_arch": list(config.hidden_sizes),
                "log_std_init": config.log_std_init,
            },
            tensorboard_log=tensorboard_log,
            seed=seed,
            device="cpu",
        )
        self.iterations = 0

    def wrap_env(self, env: gym.Env[Any, Any]) -> gym.Env[Any, Any]:
        """The oracle's task-augmented observation; actions presented as [-1, 1] to SB3."""
        return rescale_actions(TaskInObservation(env) if self.config.oracle else env)

    def train(self, n_iterations: int) -> dict[str, float]:
        """``n_iterations`` PPO iterations of one episode per sub-env; their mean return."""
        if n_iterations < 1:
            raise ValueError(f"n_iterations must be >= 1, got {n_iterations}")
        returns = _EpisodeReturns()
        self.model.learn(
            total_timesteps=n_iterations * self.steps_per_iteration,
            callback=returns,
            reset_num_timesteps=False,
            tb_log_name="oracle" if self.config.oracle else "multitask",
        )
        self.iterations += n_iterations
        mean = float(np.mean(returns.returns)) if returns.returns else math.nan
        return {"metatrain/average_return": mean}

    def get_exploration_policy(self) -> Policy:
        return ReferencePolicy(self.model, self.config.deterministic_eval)

    def adapt_policy(
        self, exploration_policy: Policy, exploration_episodes: EpisodeBatch
    ) -> Policy:
        """No adaptation: the same policy acts after the exploration episodes."""
        return exploration_policy

    # -- checkpoints -----------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Weights, optimizer, counters, task schedule and the global generators SB3 draws from."""
        return {
            "config": dataclasses.asdict(self.config),
            "policy": self.model.policy.state_dict(),
            "optimizer": self.model.policy.optimizer.state_dict(),
            "iterations": self.iterations,
            "num_timesteps": self.model.num_timesteps,
            "tasks": self.venv.state_dict(),
            "torch_rng": th.get_rng_state(),
            "numpy_rng": np.random.get_state(),
            "python_rng": random.getstate(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("config") != dataclasses.asdict(self.config):
            raise ValueError("checkpoint was written with a different ReferenceConfig")
        self.model.policy.load_state_dict(state["policy"])
        self.model.policy.optimizer.load_state_dict(state["optimizer"])
        self.iterations = int(state["iterations"])
        self.model.num_timesteps = int(state["num_timesteps"])
        self.venv.load_state_dict(state["tasks"])
        th.set_rng_state(state["torch_rng"])
        np.random.set_state(state["numpy_rng"])
        random.setstate(state["python_rng"])
        self.model._last_obs = None  # the next learn() resets the envs: a fresh episode
