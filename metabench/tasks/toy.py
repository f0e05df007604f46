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
from metabench.tasks.base import EpisodeGuard, Task, check_action, check_n_tasks


class PointGoalEnv(gym.Env[np.ndarray, np.ndarray]):
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
        if isinstance(horizon, bool) or not isinstance(horizon, int) or horizon < 1:
            raise ValueError(f"horizon must be a positive integer, got {horizon!r}")
        if not max_step > 0:
            raise ValueError(f"max_step must be positive, got {max_step}")
        self.goal_range = (float(goal_range[0]), float(goal_range[1]))
        self.max_step = float(max_step)
        self.horizon = horizon
        self.observation_space = spaces.Box(-np.inf, np.inf, shape=(2,), dtype=np.float64)
        self.action_space = spaces.Box(-max_step, max_step, shape=(2,), dtype=np.float64)
        self._position = np.zeros(2)
        self._goal: np.ndarray | None = None
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
        if options and options.get("task") is not None:
            self.set_task(options["task"])
        elif self._goal is None:
            self.set_task(self.sample_tasks(1)[0])
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


class HiddenSideEnv(gym.Env[np.ndarray, np.int64]):
    """A point on a line, rewarded only at the episode's last step by ``side * position``.

    The task is the hidden side (-1 or +1). The reward comes too late to help within an episode,
    so one episode can do no better than chance (expected return 0); the next episode of the same
    task can reach ``+horizon * max_step`` if the policy remembers where the reward was. A small
    test of memory for RL2: the return must rise from the first episode of a trial to the second.

    Actions are discrete, 0 (left) or 1 (right), each a move of ``max_step``: a Gaussian policy
    clipped to a bounded action tends to saturate at one bound in this task and stop exploring,
    which hides whether the memory was learned.

    :param max_step: the length of one move.
    :param horizon: episode length.
    """

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 - Gymnasium's convention

    def __init__(self, max_step: float = 0.2, horizon: int = 5) -> None:
        if isinstance(horizon, bool) or not isinstance(horizon, int) or horizon < 1:
            raise ValueError(f"horizon must be a positive integer, got {horizon!r}")
        if not max_step > 0:
            raise ValueError(f"max_step must be positive, got {max_step}")
        self.max_step = float(max_step)
        self.horizon = horizon
        self.observation_space = spaces.Box(-np.inf, np.inf, shape=(2,), dtype=np.float64)
        self.action_space = spaces.Discrete(2)
        self._side: float | None = None
        self._position = 0.0
        self._steps = 0
        self._guard = EpisodeGuard()

    @property
    def task(self) -> dict[str, float] | None:
        return None if self._side is None else {"side": self._side}

    def sample_tasks(self, n: int, rng: np.random.Generator | None = None) -> list[Task]:
        check_n_tasks(n)
        rng = self.np_random if rng is None else rng
        return [{"side": float(side)} for side in rng.choice((-1.0, 1.0), size=n)]

    def set_task(self, task: Task) -> None:
        if not isinstance(task, Mapping) or set(task) != {"side"} or task["side"] not in (-1, 1):
            raise InvalidTaskError(
                f"HiddenSideEnv expects {{'side': -1.0}} or {{'side': 1.0}}, got {task!r}"
            )
        self._side = float(task["side"])

    def _observation(self) -> np.ndarray:
        # position and the fraction of the episode left: enough to act, nothing about the side
        return np.array([self._position, 1.0 - self._steps / self.horizon])

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        if options and options.get("task") is not None:
            self.set_task(options["task"])
        elif self._side is None:
            self.set_task(self.sample_tasks(1)[0])
        self._position = 0.0
        self._steps = 0
        self._guard.active = True
        return self._observation(), {"task": self.task}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self._guard.check()
        if np.shape(action) != () or int(action) not in (0, 1) or int(action) != action:
            raise InvalidActionError(f"HiddenSideEnv takes the action 0 or 1, got {action!r}")
        assert self._side is not None
        self._position += self.max_step * (2 * int(action) - 1)
        self._steps += 1
        truncated = self._steps >= self.horizon
        if truncated:
            self._guard.active = False
        reward = self._side * self._position if truncated else 0.0
        return self._observation(), reward, False, truncated, {"success": reward > 0.5}
