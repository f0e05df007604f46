"""Small task envs that need no MuJoCo: fast tests and quick learning checks.

``PointGoalEnv`` is the 2-D navigation toy of the MAML paper (Finn et al. 2017, section 5.2): a
point moves by bounded steps and is rewarded by its negative distance to a goal it cannot see,
so a policy must find the goal from rewards alone, which takes memory (RL2) or adaptation (MAML).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from metabench.errors import InvalidActionError, InvalidTaskError
from metabench.tasks.base import (
    CheckedKeywords,
    EpisodeGuard,
    Task,
    apply_reset_task,
    check_action,
    check_n_tasks,
)
from metabench.validation import check_count, check_number


class PointGoalEnv(CheckedKeywords, gym.Env[np.ndarray, np.ndarray]):
    """A point in the plane rewarded by ``-||position - goal||``; the goal is the task.

    :param goal_range: goals are drawn uniformly from this square, per axis (MAML: (-0.5, 0.5)).
    :param max_step: largest move per axis and step; actions are clipped to it, as in MAML.
    :param horizon: episode length.

    Example::

        >>> env = PointGoalEnv()
        >>> obs, info = env.reset(seed=0, options={"task": {"goal": [0.3, -0.2]}})
        >>> env.step(np.array([0.1, 0.0]))[1]  # distance from (0.1, 0) to the goal
        -0.282842712474619
    """

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 - Gymnasium's convention

    def __init__(
        self,
        goal_range: tuple[float, float] = (-0.5, 0.5),
        max_step: float = 0.1,
        horizon: int = 20,
    ) -> None:
        check_count("horizon", horizon)
        if not max_step > 0:
            raise ValueError(f"max_step must be positive, got {max_step}")
        try:
            low, high = (check_number("goal_range", bound) for bound in goal_range)
        except (TypeError, ValueError):
            raise ValueError(
                f"goal_range must be two numbers [low, high], got {goal_range!r}"
            ) from None
        if not low <= high:
            raise ValueError(f"goal_range must be [low, high] with low <= high, got {goal_range!r}")
        self.goal_range = (low, high)
        self.max_step = float(max_step)
        self.horizon = horizon
        self.observation_space = spaces.Box(-np.inf, np.inf, shape=(2,), dtype=np.float64)
        self.action_space = spaces.Box(-max_step, max_step, shape=(2,), dtype=np.float64)
        self._position = np.zeros(2)
        self._goal: np.ndarray | None = None
        self._task_drawn = False
        self._steps = 0
        self._guard = EpisodeGuard()

    @property
    def task(self) -> dict[str, list[float]] | None:
        return None if self._goal is None else {"goal": self._goal.tolist()}

    def sample_tasks(self, n: int, rng: np.random.Generator | None = None) -> list[Task]:
        check_n_tasks(n)
        rng = self.np_random if rng is None else rng
        goals = rng.uniform(*self.goal_range, size=(n, 2))
        return [{"goal": goal.tolist()} for goal in goals]

    def set_task(self, task: Task) -> None:
        self._goal = self._validated(task)
        self._task_drawn = False

    @staticmethod
    def _validated(task: Task) -> np.ndarray:
        if not isinstance(task, Mapping) or set(task) != {"goal"}:
            raise InvalidTaskError(
                f"PointGoalEnv expects a task like {{'goal': [x, y]}}, got {task!r}; "
                f"use env.sample_tasks(n) to make valid tasks"
            )
        goal = np.asarray(task["goal"], dtype=np.float64)
        if goal.shape != (2,) or not all(math.isfinite(g) for g in goal):
            raise InvalidTaskError(f"task['goal'] must be two finite numbers, got {task['goal']!r}")
        return goal

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        apply_reset_task(self, options, has_task=self._goal is not None, seed=seed)
        self._position = np.zeros(2)
        self._steps = 0
        self._guard.active = True
        return self._position.copy(), {"task": self.task}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self._guard.check()
        action = check_action(action, self.action_space)
        assert self._goal is not None
        self._position = self._position + np.clip(action, -self.max_step, self.max_step)
        self._steps += 1
        distance = float(np.linalg.norm(self._position - self._goal))
        truncated = self._steps >= self.horizon
        if truncated:
            self._guard.active = False
        info = {"distance": distance, "success": distance < self.max_step}
        return self._position.copy(), -distance, False, truncated, info


class BanditEnv(CheckedKeywords, gym.Env[np.ndarray, np.int64]):
    """A multi-armed bandit whose paying arm is the task: one pull per episode.

    The best arm pays 1, every other arm 0. An RL2 trial of ``n_arms`` episodes can find it for
    sure, but only by remembering which arms already failed: the previous action and reward in
    RL2's observation are not enough beyond two arms. The optimal trial returns ``1/k``,
    ``2/k``, ..., ``1`` in its successive episodes; a policy that does not adapt stays at ``1/k``.
    (Duan et al. 2016 meta-learn bandits the same way, with stochastic arms.)

    :param n_arms: number of arms (``k``).
    """

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 - Gymnasium's convention

    def __init__(self, n_arms: int = 3) -> None:
        if isinstance(n_arms, bool) or not isinstance(n_arms, int) or n_arms < 2:
            raise ValueError(f"n_arms must be an integer >= 2, got {n_arms!r}")
        self.n_arms = n_arms
        self.horizon = 1
        self.observation_space = spaces.Box(0.0, 0.0, shape=(1,), dtype=np.float64)
        self.action_space = spaces.Discrete(n_arms)
        self._best: int | None = None
        self._task_drawn = False
        self._guard = EpisodeGuard()

    @property
    def task(self) -> dict[str, int] | None:
        return None if self._best is None else {"best_arm": self._best}

    def sample_tasks(self, n: int, rng: np.random.Generator | None = None) -> list[Task]:
        check_n_tasks(n)
        rng = self.np_random if rng is None else rng
        return [{"best_arm": int(arm)} for arm in rng.integers(self.n_arms, size=n)]

    def set_task(self, task: Task) -> None:
        arm = (
            task.get("best_arm")
            if isinstance(task, Mapping) and set(task) == {"best_arm"}
            else None
        )
        if (
            isinstance(arm, bool)
            or not isinstance(arm, (int, np.integer))
            or not 0 <= arm < self.n_arms
        ):
            raise InvalidTaskError(
                f"BanditEnv({self.n_arms}) expects {{'best_arm': 0..{self.n_arms - 1}}}, "
                f"got {task!r}"
            )
        self._best = int(arm)
        self._task_drawn = False

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        apply_reset_task(self, options, has_task=self._best is not None, seed=seed)
        self._guard.active = True
        return np.zeros(1), {"task": self.task}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self._guard.check()
        if np.shape(action) != () or int(action) != action or not 0 <= int(action) < self.n_arms:
            raise InvalidActionError(
                f"BanditEnv takes an arm index in 0..{self.n_arms - 1}, got {action!r}"
            )
        self._guard.active = False
        reward = float(int(action) == self._best)
        # the pull ends the episode by the env's nature (terminated), not by a time limit
        return np.zeros(1), reward, True, False, {"success": reward > 0.5}
