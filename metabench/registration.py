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
from metabench.tasks.family import task_envs
from metabench.validation import check_count
from metabench.wrappers import RL2Env, Trial

NAMESPACE = "metabench"

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
    """Register ``metabench/<Task>-v0`` and ``metabench/RL2-<Task>-v0`` for every task env of
    every family (:func:`~metabench.tasks.family.task_families`; idempotent)."""
    for name, declaration in task_envs().items():
        task_id = f"{NAMESPACE}/{name}-v0"
        if task_id in gym.registry:
            continue
        gym.register(
            id=task_id,
            entry_point=declaration.entry_point,
            vector_entry_point=declaration.vector_entry_point,
            order_enforce=False,
        )
        gym.register(
            id=f"{NAMESPACE}/RL2-{name}-v0",
            entry_point="metabench.registration:make_rl2_env",
            vector_entry_point="metabench.registration:make_rl2_vector_env",
            kwargs={
                "task_entry_point": declaration.entry_point,
                "episodes_per_trial": declaration.episodes_per_trial,
                "reward_scale": declaration.reward_scale,
            },
            order_enforce=False,
        )
