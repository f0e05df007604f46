"""A trial: several episodes of one task that look like a single episode from outside."""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

from metabench.tasks.base import Task, TaskSampler
from metabench.validation import check_count

EPISODE_END = "episode_end"
"""``info`` key set to True on the step that ended an inner episode (the trial's last included)."""
EPISODE_INDEX = "trial_episode"
"""``info`` key: index, within the trial, of the inner episode the step belongs to."""
EPISODE_RETURN = "episode_return"
"""``info`` key, on inner episode ends: the undiscounted return of that episode."""
EPISODE_SUCCESS = "episode_success"
"""``info`` key, on inner episode ends: whether any step of the episode reported success."""
FINAL_OBSERVATION = "final_observation"
"""``info`` key, on inner episode ends inside a trial: the last observation of the episode
(the observation returned is already the first of the next episode)."""


class Trial(gym.Wrapper[Any, Any, Any, Any]):
    """Run ``episodes_per_trial`` episodes of one task as one outer episode (RL2's worker).

    When an inner episode ends, the inner env is reset with the same task and stepping goes on;
    ``terminated``/``truncated`` are reported only at the trial's end, so a recurrent policy in an
    SB3 or Gymnasium vector env keeps its hidden state for the whole trial. Inner episode ends are
    visible in ``info`` (:data:`EPISODE_END`, :data:`EPISODE_RETURN`, :data:`EPISODE_SUCCESS`,
    :data:`FINAL_OBSERVATION`) and, through :class:`~metabench.wrappers.RL2Env`, in the observation.

    Each trial reset takes its task from, in order: ``reset(options={"task": ...})`` (this trial
    only), a task pinned with :meth:`set_task` (every trial until ``set_task(None)``; the evaluator
    uses this), the ``sampler``, or the task env's own ``sample_tasks``.

    :param env: a task env (see :class:`metabench.tasks.TaskEnv`), possibly wrapped.
    :param episodes_per_trial: inner episodes per trial, at least 1.
    :param sampler: where new tasks come from; ``None`` uses the task env's own distribution.

    Example::

        >>> import gymnasium as gym, metabench
        >>> env = Trial(gym.make("metabench/HalfCheetahVel-v0", horizon=5), episodes_per_trial=2)
        >>> _ = env.reset(seed=0)
        >>> ends = [env.step(env.action_space.sample())[4].get(EPISODE_END) for _ in range(10)]
        >>> ends.index(True), ends[-1]
        (4, True)
    """

    def __init__(
        self,
        env: gym.Env[Any, Any],
        episodes_per_trial: int,
        sampler: TaskSampler | None = None,
    ) -> None:
        check_count("episodes_per_trial", episodes_per_trial)
        if sampler is not None:
            # A trial draws one task at a time: a sampler that needs whole meta-batches (a
            # balanced Meta-World sampler) fails here, where the message can name the fix.
            try:
                sampler.check_batch_size(1)
            except ValueError as error:
                raise ValueError(
                    f"Trial draws one task per trial, which this sampler cannot do ({error}); "
                    f"use make_meta_vec_env to spread meta-batches over sub-envs"
                ) from error
        super().__init__(env)
        self.episodes_per_trial = int(episodes_per_trial)
        self.sampler = sampler
        self._rng = np.random.default_rng()
        self._pinned: Task | None = None
        self._task: Task | None = None
        self._episode = 0
        self._return = 0.0
        self._success = False

    @property
    def task(self) -> Task | None:
        """The task of the current trial."""
        return self._task

    def set_task(self, task: Task | None) -> None:
        """Pin ``task`` for every following trial (``None`` returns to sampling)."""
        if task is not None:
            self.env.get_wrapper_attr("set_task")(task)  # validates it now, not at reset
        self._pinned = task

    @property
    def pinned_task(self) -> Task | None:
        """The task pinned with :meth:`set_task`; settable, so vector envs can ``set_attr`` it."""
        return self._pinned

    @pinned_task.setter
    def pinned_task(self, task: Task | None) -> None:
        self.set_task(task)

    @property
    def sampler_state(self) -> dict[str, Any]:
        """The sampler's checkpoint state (settable, so Gymnasium vector envs can ``set_attr``)."""
        return {} if self.sampler is None else self.sampler.state_dict()

    @sampler_state.setter
    def sampler_state(self, state: dict[str, Any]) -> None:
        self.load_sampler_state(state)

    def load_sampler_state(self, state: dict[str, Any]) -> None:
        """Restore the sampler from :attr:`sampler_state` (SB3 vector envs call this method)."""
        if self.sampler is not None:
            self.sampler.load_state_dict(state)

    def sample_tasks(self, n: int, rng: np.random.Generator | None = None) -> list[Task]:
        """Draw ``n`` tasks from the task env's distribution."""
        return list(self.env.get_wrapper_attr("sample_tasks")(n, rng=rng))

    def _next_task(self) -> Task:
        if self._pinned is not None:
            return self._pinned
        if self.sampler is not None:
            return self.sampler.sample(1, self._rng)[0]
        return self.sample_tasks(1, rng=self._rng)[0]

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        options = dict(options or {})
        if options.get("task") is None:
            options["task"] = self._next_task()
        obs, info = self.env.reset(seed=seed, options=options)
        self._task = options["task"]
        self._episode = 0
        self._return = 0.0
        self._success = False
        info[EPISODE_INDEX] = 0
        return obs, info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._return += float(reward)
        if info.get("success"):
            self._success = True
        info[EPISODE_INDEX] = self._episode
        if not (terminated or truncated):
            return obs, reward, False, False, info
        info[EPISODE_END] = True
        info[EPISODE_RETURN] = self._return
        info[EPISODE_SUCCESS] = self._success
        self._episode += 1
        if self._episode == self.episodes_per_trial:
            return obs, reward, terminated, truncated, info
        info[FINAL_OBSERVATION] = obs
        obs, _ = self.env.reset(options={"task": self._task})
        self._return = 0.0
        self._success = False
        return obs, reward, False, False, info
