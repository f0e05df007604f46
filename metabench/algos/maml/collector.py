"""Collect one batch of episodes per task, stepping a whole meta-batch in one vector env (the
episode *collector*; where tasks come from is a task sampler's job, :mod:`metabench.tasks`).

MAML needs ``episodes_per_task`` episodes for each of ``meta_batch_size`` tasks, twice per
iteration. Stepping them one env at a time would call the policy ``meta_batch_size *
episodes_per_task`` times per time step; here every sub-env of one Gymnasium ``VectorEnv`` steps
together and the policy is called once per time step on the stacked observations (garage's
``VecWorker`` idea).

The vector env is anything with the Gymnasium ``VectorEnv`` API plus ``set_tasks(tasks)`` (one
task per sub-env, applied at the next reset): :func:`metabench.vector.make_task_vec_env` builds
the default one, every sub-env in this process, and a faster env (a family's batched env, or
sub-envs sharded over worker processes: :class:`~metabench.algos.run_envs.RunEnvs` picks) can
be passed to :class:`VectorEpisodeCollector` instead, unchanged.

Each time step is recorded for all sub-envs at once (one array per step), not with a
:class:`~metabench.data.EpisodeRecorder` per sub-env as the evaluator records its single env:
for a meta-batch of hundreds of sub-envs that would cost 17 times as much recording
(``scripts/bench_episode_recording.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from metabench.data import EpisodeBatch, StepType
from metabench.tasks.base import Task

__all__ = ["Actor", "TaskVectorEnv", "VectorEpisodeCollector"]

Actor = Callable[[np.ndarray], np.ndarray]
"""Maps stacked observations ``(num_envs, obs_dim)`` to actions ``(num_envs, action_dim)``."""


@runtime_checkable
class TaskVectorEnv(Protocol):
    """What the collector needs beyond the ``VectorEnv`` API: pinning one task per sub-env."""

    num_envs: int

    def set_tasks(self, tasks: Sequence[Task] | None) -> None:
        """Use ``tasks[i]`` in sub-env ``i`` from the next reset on."""
        ...


class VectorEpisodeCollector:
    """Collects ``episodes_per_task`` whole episodes per task with one vector env.

    Sub-envs ``[k * episodes_per_task, (k + 1) * episodes_per_task)`` run task ``k``. After a
    reset, all sub-envs step together until each one's episode has ended; a sub-env that ended
    early keeps being stepped (vector envs step all or none) but nothing it returns is recorded.
    All three Gymnasium autoreset modes are handled: the final observation of a ``SAME_STEP``
    env is read from ``info["final_obs"]``, and ended sub-envs of a ``DISABLED`` env are reset
    with a ``reset_mask`` so that stepping them stays legal.

    :param vec_env: a Gymnasium ``VectorEnv`` with ``set_tasks`` (see :class:`TaskVectorEnv`).
    :param episodes_per_task: sub-envs per task; must divide ``vec_env.num_envs``.
    :param max_episode_length: cut episodes longer than this (their last step becomes
        ``TIMEOUT``); ``None`` trusts the env to end every episode.
    """

    def __init__(
        self,
        vec_env: gym.vector.VectorEnv[Any, Any, Any],
        episodes_per_task: int,
        max_episode_length: int | None = None,
    ) -> None:
        if not isinstance(vec_env, TaskVectorEnv):
            raise TypeError(
                f"{type(vec_env).__name__} has no set_tasks(tasks): build the vector env with "
                f"metabench.vector.make_task_vec_env or give it a set_tasks method"
            )
        if episodes_per_task < 1 or vec_env.num_envs % episodes_per_task:
            raise ValueError(
                f"episodes_per_task ({episodes_per_task}) must be >= 1 and divide the vector "
                f"env's num_envs ({vec_env.num_envs})"
            )
        if max_episode_length is not None and max_episode_length < 1:
            raise ValueError(f"max_episode_length must be >= 1 or None, got {max_episode_length}")
        self.vec_env = vec_env
        self.episodes_per_task = int(episodes_per_task)
        self.max_episode_length = max_episode_length
        self.autoreset_mode = vec_env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)

    @property
    def n_tasks(self) -> int:
        """Tasks per call to :meth:`collect` (the meta-batch size)."""
        return self.vec_env.num_envs // self.episodes_per_task

    def collect(
        self, tasks: Sequence[Task], actor: Actor, seed: int | None = None
    ) -> list[EpisodeBatch]:
        """Run ``episodes_per_task`` episodes of every task; one :class:`EpisodeBatch` per task.

        :param tasks: ``n_tasks`` tasks, in the order of the returned batches.
        :param actor: called once per time step with all sub-envs' observations (sub-envs of
            task ``k`` are rows ``[k * episodes_per_task, (k + 1) * episodes_per_task)``).
        :param seed: passed to ``vec_env.reset`` (sub-env ``i`` gets ``seed + i``).
        :return: per task, its episodes with ``episode_infos["task"]`` set to the task.
        """
        if len(tasks) != self.n_tasks:
            raise ValueError(
                f"got {len(tasks)} tasks for a vector env of {self.vec_env.num_envs} sub-envs "
                f"with {self.episodes_per_task} episodes per task: pass {self.n_tasks} tasks"
            )
        num_envs = self.vec_env.num_envs
        self.vec_env.set_tasks([task for task in tasks for _ in range(self.episodes_per_task)])
        observations, _ = self.vec_env.reset(seed=seed)
        observations = np.array(observations)  # copies: a vector env may reuse its buffers

        obs_steps: list[np.ndarray] = []
        action_steps: list[np.ndarray] = []
        reward_steps: list[np.ndarray] = []
        type_steps: list[np.ndarray] = []
        lengths = np.zeros(num_envs, dtype=np.int64)
        last_observations = np.zeros_like(observations)
        active = np.ones(num_envs, dtype=bool)
        step = 0
        while active.any():
            actions = np.array(actor(observations))
            if actions.shape[0] != num_envs:
                raise ValueError(
                    f"actor returned {actions.shape[0]} actions for {num_envs} sub-envs"
                )
            next_observations, rewards, terminated, truncated, infos = self.vec_env.step(actions)
            next_observations = np.array(next_observations)
            step += 1
            terminated = np.asarray(terminated, dtype=bool)
            ended = terminated | np.asarray(truncated, dtype=bool)
            if self.max_episode_length is not None and step >= self.max_episode_length:
                ended = np.ones(num_envs, dtype=bool)
            types = np.full(num_envs, StepType.FIRST if step == 1 else StepType.MID, np.int8)
            types[ended] = StepType.TIMEOUT
            types[terminated] = StepType.TERMINAL

            obs_steps.append(observations)
            action_steps.append(actions)
            reward_steps.append(np.asarray(rewards, dtype=np.float64))
            type_steps.append(types)
            finishing = active & ended
            lengths[finishing] = step
            final = next_observations
            if self.autoreset_mode == AutoresetMode.SAME_STEP and "final_obs" in infos:
                final = next_observations.copy()
                has_final = np.asarray(infos.get("_final_obs", ended), dtype=bool)
                for i in np.flatnonzero(has_final):
                    final[i] = infos["final_obs"][i]
            last_observations[finishing] = final[finishing]
            active &= ~finishing
            if self.autoreset_mode == AutoresetMode.DISABLED and active.any() and ended.any():
                next_observations, _ = self.vec_env.reset(options={"reset_mask": ended})
                next_observations = np.array(next_observations)
            observations = next_observations

        return self._per_task_batches(
            tasks,
            np.stack(obs_steps, axis=1),
            np.stack(action_steps, axis=1),
            np.stack(reward_steps, axis=1),
            np.stack(type_steps, axis=1),
            lengths,
            last_observations,
        )

    def _per_task_batches(
        self,
        tasks: Sequence[Task],
        observations: np.ndarray,
        actions: np.ndarray,
        rewards: np.ndarray,
        step_types: np.ndarray,
        lengths: np.ndarray,
        last_observations: np.ndarray,
    ) -> list[EpisodeBatch]:
        """Cut the ``(num_envs, T, ...)`` recordings into one flat batch per task."""
        batches = []
        for k, task in enumerate(tasks):
            envs = range(k * self.episodes_per_task, (k + 1) * self.episodes_per_task)

            def flat(array: np.ndarray, envs: range = envs) -> np.ndarray:
                return np.concatenate([array[i, : lengths[i]] for i in envs])

            task_column = np.empty(self.episodes_per_task, dtype=object)
            for j in range(self.episodes_per_task):  # element-wise: a task may be a tuple
                task_column[j] = task
            batches.append(
                EpisodeBatch(
                    observations=flat(observations),
                    last_observations=last_observations[envs.start : envs.stop],
                    actions=flat(actions),
                    rewards=flat(rewards),
                    step_types=flat(step_types),
                    lengths=lengths[envs.start : envs.stop].copy(),
                    episode_infos={"task": task_column},
                )
            )
        return batches
