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
iterations end at episode boundaries and a resumed run continues exactly. With ``normalize`` the
sub-envs are seen through SB3's ``VecNormalize`` (running means of the observations and of the
discounted returns, as the RL Zoo trains PPO on MuJoCo); the statistics travel in the checkpoint
and the trained agent, and the meta-test normalises with them, frozen.
"""

from __future__ import annotations

import functools
import math
import pickle
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.running_mean_std import RunningMeanStd
from stable_baselines3.common.vec_env import VecNormalize

from metabench.algos.base import MetaRLAlgorithm, Policy
from metabench.algos.common.sb3 import (
    SB3Checkpoints,
    quiet_logger,
    rescale_actions,
)
from metabench.algos.implementation import Implementation
from metabench.data import EpisodeBatch
from metabench.devices import resolve_device
from metabench.tasks.base import Task, TaskSampler
from metabench.validation import MAX_COUNT, MAX_LAYER_WIDTH, check_config, option, recorded_config
from metabench.vector import MetaBatchVecEnv, make_meta_vec_env
from metabench.wrappers import EPISODE_END, EPISODE_RETURN

__all__ = [
    "MultitaskPPO",
    "OraclePPO",
    "ReferenceConfig",
    "ReferencePPO",
    "TaskInObservation",
    "task_features",
]


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


def _reference_env(env: gym.Env[Any, Any], oracle: bool) -> gym.Env[Any, Any]:
    return rescale_actions(TaskInObservation(env) if oracle else env)


class TaskInObservation(gym.ObservationWrapper[np.ndarray, Any, np.ndarray]):
    """Appends the current task (:func:`task_features` of ``env.unwrapped.task``) to a Box
    observation: the oracle's view of any task env.

    Example::

        >>> from metabench.tasks.toy.envs import PointGoalEnv
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
    """Hyperparameters of the reference PPO: Stable-Baselines3's PPO defaults, with one episode
    per sub-env per iteration."""

    n_envs: int = option(
        20,
        "sub-envs, each with its own task; one episode each per iteration",
        low=1,
        high=MAX_COUNT,
    )
    learning_rate: float = option(3e-4, "Adam step size", low=0.0, low_open=True)
    n_minibatches: int = option(
        8,
        "minibatches per epoch (the minibatch is the iteration's steps divided by it)",
        low=1,
        high=MAX_COUNT,
    )
    n_epochs: int = option(10, "PPO epochs per iteration", low=1)
    discount: float = option(0.99, "reward discount", low=0.0, high=1.0)
    gae_lambda: float = option(0.95, "GAE lambda", low=0.0, high=1.0)
    clip_range: float = option(0.2, "PPO clipping of the probability ratio", low=0.0, low_open=True)
    ent_coef: float = option(0.0, "entropy bonus coefficient", low=0.0)
    vf_coef: float = option(0.5, "value loss coefficient", low=0.0)
    max_grad_norm: float = option(0.5, "gradient clipping norm", low=0.0, low_open=True)
    hidden_sizes: tuple[int, ...] = option(
        (64, 64),
        "hidden layers of the policy and of the value function (tanh)",
        low=1,
        high=MAX_LAYER_WIDTH,
    )
    log_std_init: float = option(0.0, "initial log standard deviation of the Gaussian policy")
    normalize: bool = option(
        False,
        "train on observations and rewards scaled by their running statistics (SB3's "
        "VecNormalize, the RL Zoo's setting for MuJoCo); the meta-test scales observations "
        "with the trained statistics",
        recorded_at_default=False,
    )
    deterministic_eval: bool = option(
        True, "act with the distribution's mean at meta-test (how a PPO policy is evaluated)"
    )

    def __post_init__(self) -> None:
        check_config(self)


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
    """The trained PPO policy acting alone; it keeps no state between steps.

    :param normalizer: the training's ``VecNormalize`` statistics, detached from its envs
        (``None``: observations as they come).
    """

    def __init__(
        self, model: PPO, deterministic: bool, normalizer: VecNormalize | None = None
    ) -> None:
        self.model = model
        self.deterministic = deterministic
        self.normalizer = normalizer

    def get_action(self, observation: np.ndarray) -> np.ndarray:
        batch = observation[None]
        if self.normalizer is not None:
            batch = self.normalizer.normalize_obs(batch)  # type: ignore[assignment]
        action, _ = self.model.predict(batch, deterministic=self.deterministic)
        return np.asarray(action[0])


def _statistics_state(normalizer: VecNormalize) -> dict[str, dict[str, Any]]:
    """The running statistics of observations and returns, as tensors and floats (what a
    ``weights_only`` load accepts)."""
    return {
        name: {
            "mean": torch.from_numpy(np.array(rms.mean, dtype=np.float64)),
            "var": torch.from_numpy(np.array(rms.var, dtype=np.float64)),
            "count": float(rms.count),
        }
        for name, rms in _statistics(normalizer).items()
    }


def _load_statistics(normalizer: VecNormalize, state: dict[str, dict[str, Any]]) -> None:
    for name, rms in _statistics(normalizer).items():
        rms.mean = state[name]["mean"].numpy().copy()
        rms.var = state[name]["var"].numpy().copy()
        rms.count = float(state[name]["count"])


def _statistics(normalizer: VecNormalize) -> dict[str, RunningMeanStd]:
    assert isinstance(normalizer.obs_rms, RunningMeanStd)  # a Box observation
    return {"observations": normalizer.obs_rms, "returns": normalizer.ret_rms}


class ReferencePPO(SB3Checkpoints, MetaRLAlgorithm):
    """PPO on the task distribution, with (:class:`OraclePPO`) or without
    (:class:`MultitaskPPO`) the task in its observation; see the module docstring.

    :param env: a task env id or a task env factory.
    :param sampler: training tasks; ``None`` uses the task env's ``sample_tasks``.
    :param config: hyperparameters.
    :param seed: seeds the sub-envs, the task sequence and torch.
    :param env_kwargs: passed to the task env.
    :param log_dir: SB3's TensorBoard folder (``None``: no logging).
    :param device: where PPO acts and trains (``"auto"``, ``"cpu"``, ``"cuda"``).

    Example::

        >>> import metabench
        >>> config = ReferenceConfig(n_envs=4)
        >>> algo = OraclePPO("metabench/PointGoal-v0", config=config)
        >>> algo.steps_per_iteration  # 4 episodes of 20 steps
        80
    """

    oracle: ClassVar[bool]
    """Whether the task is appended to the observation."""
    model: PPO
    uses_device = True

    def __init__(
        self,
        env: Any,
        sampler: TaskSampler | None = None,
        config: ReferenceConfig | None = None,
        *,
        seed: int = 0,
        env_kwargs: dict[str, Any] | None = None,
        log_dir: str | None = None,
        device: str | torch.device = "cpu",
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
        self.normalizer = (
            VecNormalize(self.venv, gamma=config.discount) if config.normalize else None
        )
        self.model = PPO(
            "MlpPolicy",
            self.venv if self.normalizer is None else self.normalizer,
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
            tensorboard_log=log_dir,
            seed=seed,
            device=resolve_device(device),
        )
        quiet_logger(self.model, log_dir)
        self.iterations = 0

    def wrap_env(self, env: gym.Env[Any, Any]) -> gym.Env[Any, Any]:
        """The oracle's task-augmented observation; actions presented as [-1, 1] to SB3."""
        return _reference_env(env, self.oracle)

    def env_wrapper(self) -> Callable[[gym.Env[Any, Any]], gym.Env[Any, Any]]:
        return functools.partial(_reference_env, oracle=self.oracle)

    def train(self, n_iterations: int) -> dict[str, float]:
        """``n_iterations`` PPO iterations of one episode per sub-env; their mean return."""
        if n_iterations < 1:
            raise ValueError(f"n_iterations must be >= 1, got {n_iterations}")
        returns = _EpisodeReturns()
        self.model.learn(
            total_timesteps=n_iterations * self.steps_per_iteration,
            callback=returns,
            reset_num_timesteps=False,
            tb_log_name="oracle" if self.oracle else "multitask",
        )
        self.iterations += n_iterations
        mean = float(np.mean(returns.returns)) if returns.returns else math.nan
        return {"metatrain/average_return": mean}

    def get_exploration_policy(self) -> Policy:
        frozen = None if self.normalizer is None else pickle.loads(pickle.dumps(self.normalizer))
        return ReferencePolicy(self.model, self.config.deterministic_eval, frozen)

    def adapt_policy(
        self, exploration_policy: Policy, exploration_episodes: EpisodeBatch
    ) -> Policy:
        """No adaptation: the same policy acts after the exploration episodes."""
        return exploration_policy

    # -- checkpoints -----------------------------------------------------------------------------
    def checkpoint_identity(self) -> dict[str, Any]:
        return {"config": recorded_config(self.config), "oracle": self.oracle}

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        if self.normalizer is not None:
            state["normalization"] = _statistics_state(self.normalizer)
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        if self.normalizer is not None:
            _load_statistics(self.normalizer, state["normalization"])
            # The next learn() would reset the sub-envs, and VecNormalize counts a reset's
            # observations in its statistics: the run that went on counted these already,
            # at its last step's automatic reset. Reset here without counting them again.
            self.normalizer.training = False
            self.model._last_obs = self.normalizer.reset()
            self.normalizer.training = True
            self.model._last_episode_starts = np.ones(self.venv.num_envs, dtype=bool)

    def load_agent_state(self, state: dict[str, Any]) -> None:
        super().load_agent_state(state)
        if self.normalizer is not None:
            _load_statistics(self.normalizer, state["normalization"])


class MultitaskPPO(ReferencePPO):
    """``multitask``: PPO that sees the task env's observation only."""

    oracle = False


class OraclePPO(ReferencePPO):
    """``oracle``: PPO that sees the task appended to its observation."""

    oracle = True


# -- the entry points of baselines/oracle.toml and baselines/multitask.toml ------------------------
ORACLE = Implementation(OraclePPO, ReferenceConfig)
"""PPO that sees the task: ``entry_point = "metabench.algos.reference:ORACLE"``."""
MULTITASK = Implementation(MultitaskPPO, ReferenceConfig)
"""PPO on the task distribution: ``entry_point = "metabench.algos.reference:MULTITASK"``."""
