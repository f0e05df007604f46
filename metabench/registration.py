"""Gymnasium ids for every metabench task env and its RL2-ready variant.

``import metabench`` calls :func:`register_envs`; afterwards ``gymnasium.make("metabench/…")`` and
``gymnasium.make_vec`` work. Entry points are strings, so nothing heavy is imported until an env is
made. Order enforcing is off because the envs raise their own, more specific
:class:`~metabench.errors.StepBeforeResetError` (a ``RuntimeError``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import load_env_creator

from metabench.tasks.base import TaskSampler, check_keywords
from metabench.validation import check_count
from metabench.wrappers import RL2Env, Trial

NAMESPACE = "metabench"

TASK_ENTRY_POINTS: dict[str, str] = {
    "HalfCheetahVel": "metabench.tasks.halfcheetah:HalfCheetahVelEnv",
    "HalfCheetahDir": "metabench.tasks.halfcheetah:HalfCheetahDirEnv",
    "ML1": "metabench.tasks.metaworld:ML1Env",
    "ML10": "metabench.tasks.metaworld:ML10Env",
    "ML45": "metabench.tasks.metaworld:ML45Env",
    "PointGoal": "metabench.tasks.toy:PointGoalEnv",
    "Bandit": "metabench.tasks.toy:BanditEnv",
}
"""Task env name -> entry point."""

RL2_DEFAULTS: dict[str, dict[str, Any]] = {
    # garage's RL2-PPO HalfCheetahVel example: 4 episodes per trial.
    "HalfCheetahVel": {"episodes_per_trial": 4, "reward_scale": 1.0},
    "HalfCheetahDir": {"episodes_per_trial": 4, "reward_scale": 1.0},
    # Meta-World protocol: 10 adaptation episodes; its RNN wrapper scales rewards by 1/10.
    "ML1": {"episodes_per_trial": 10, "reward_scale": 0.1},
    "ML10": {"episodes_per_trial": 10, "reward_scale": 0.1},
    "ML45": {"episodes_per_trial": 10, "reward_scale": 0.1},
    "PointGoal": {"episodes_per_trial": 2, "reward_scale": 1.0},
    "Bandit": {"episodes_per_trial": 3, "reward_scale": 1.0},
}
"""Default ``episodes_per_trial`` and ``reward_scale`` of each RL2 id: the benchmark's trial length
(``envs/*.toml``) and RL2-PPO's reward scale there, written here because registration sits below
the spec files' reader (``tests/test_registration.py`` checks that they agree)."""


RL2_KEYWORDS = ("episodes_per_trial", "reward_scale", "sampler")
"""The keyword arguments of an RL2 id besides its task env's (``task_entry_point`` is the id's
own, not the caller's)."""


def make_rl2_env(
    task_entry_point: str,
    episodes_per_trial: int,
    reward_scale: float = 1.0,
    sampler: TaskSampler | None = None,
    **task_kwargs: Any,
) -> RL2Env:
    """Build ``RL2Env(Trial(task_env))``: the env an RL2 policy is trained on.

    :param task_entry_point: ``"module:Class"`` of the task env.
    :param task_kwargs: passed to the task env (``horizon``, ``split``, ``env_name``, ``seed``…).
    :raises ConfigError: for a keyword argument neither the task env nor this function takes,
        naming both's.
    """
    creator = load_env_creator(task_entry_point)
    check_keywords(creator, task_kwargs, RL2_KEYWORDS, f"RL2 {getattr(creator, '__name__', '')}")
    task_env = creator(**task_kwargs)
    assert isinstance(task_env, gym.Env), f"{task_entry_point} did not build a gymnasium.Env"
    return RL2Env(Trial(task_env, episodes_per_trial, sampler=sampler), reward_scale=reward_scale)


def make_task_env(env: str | Callable[..., gym.Env[Any, Any]], **kwargs: Any) -> Any:
    """The bare task env of a registered id (or ``env(**kwargs)`` for a callable): metabench steps
    task envs without Gymnasium's wrappers, so it skips their passive checker too, which would
    check nothing and only warn, in every run's log, about Meta-World's zeroed goal (equal bounds).
    A user's own ``gymnasium.make`` still checks."""
    if callable(env):
        return env(**kwargs)
    return gym.make(env, disable_env_checker=True, **kwargs).unwrapped


def make_rl2_vector_env(num_envs: int, **kwargs: Any) -> gym.vector.SyncVectorEnv:
    """``gym.make_vec``'s default for the RL2 ids: a ``SyncVectorEnv`` of :func:`make_rl2_env`
    envs, as its ``"sync"`` mode builds (without Gymnasium's passive env checker), but with a
    one-line ``ValueError`` for a ``num_envs`` below 1 where Gymnasium's ends in an
    ``IndexError``. ``vectorization_mode="sync"`` or ``"async"`` gives Gymnasium's own, which
    take ``wrappers`` and ``vector_kwargs``."""
    check_count("num_envs", num_envs)
    return gym.vector.SyncVectorEnv([functools.partial(make_rl2_env, **kwargs)] * num_envs)


def register_envs() -> None:
    """Register ``metabench/<Task>-v0`` and ``metabench/RL2-<Task>-v0`` (idempotent)."""
    for name, entry_point in TASK_ENTRY_POINTS.items():
        task_id = f"{NAMESPACE}/{name}-v0"
        if task_id in gym.registry:
            continue
        gym.register(
            id=task_id,
            entry_point=entry_point,
            # HalfCheetah steps many envs as one (make_vec's default for these ids).
            vector_entry_point=(
                f"metabench.vector.halfcheetah:{name}VectorEnv"
                if name.startswith("HalfCheetah")
                else None
            ),
            order_enforce=False,
        )
        gym.register(
            id=f"{NAMESPACE}/RL2-{name}-v0",
            entry_point="metabench.registration:make_rl2_env",
            vector_entry_point="metabench.registration:make_rl2_vector_env",
            kwargs={"task_entry_point": entry_point, **RL2_DEFAULTS[name]},
            order_enforce=False,
        )
