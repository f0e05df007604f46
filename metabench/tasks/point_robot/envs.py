"""Point-Robot and Sparse-Point-Robot: PEARL's and VariBAD's 2-D navigation, each as its protocol.

A point in the plane moves by an action clipped to ``0.1`` per axis and step; its goal, a point
the agent cannot see, is the task. The two codes that produced the published curves differ, so
each is a named protocol instead of a merge of the two:

- ``"oyster"`` (PEARL, ``katerakelly/oyster`` ``rlkit/envs/point_robot.py``, commit 44e20fd):
  dense goals uniform on the square ``[-1, 1]^2`` and a start uniform on that square; sparse goals
  on a grid of 100 evenly spaced angles of the upper unit half circle and a start at the origin;
  horizon 20 (``configs/point-robot.json``); the policy's ``[-1, 1]`` is mapped onto the
  env's ``[-0.1, 0.1]`` by rlkit's ``NormalizedBoxEnv``. :func:`oyster_tasks` rebuilds oyster's
  exact lists of 100 tasks (seed 1337), of which PEARL trains on the first 80 and meta-tests on
  the last 20.
- ``"varibad"`` (``lmzintgraf/varibad`` ``environments/navigation/point_robot.py``, commit
  57e1795): goals on the upper unit half circle at an angle uniform in ``[0, pi]``, dense and
  sparse alike, drawn afresh for every task; start at the origin; horizon 100
  (``environments/__init__.py``); the env clips the action to ``[-1, 1]`` and scales it by 0.1.

The dense reward is ``-||position - goal||``. The sparse one, in a goal radius of 0.2, is
``1 - ||position - goal||`` inside the radius and 0 outside (both codes' ``sparsify_rewards`` plus
the ``+1`` that makes it positive). Only the horizon ends an episode.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar, Literal, get_args

import gymnasium as gym
import numpy as np
from gymnasium import spaces, utils

from metabench.tasks.base import (
    ActionScaling,
    CheckedKeywords,
    EpisodeGuard,
    EzPickleWithTask,
    Task,
    apply_reset_task,
    check_action,
    check_n_tasks,
    validated_goal,
)
from metabench.validation import ConfigError, check_count, check_number

Protocol = Literal["oyster", "varibad"]
"""Whose code the env follows: PEARL's (oyster) or VariBAD's (see the module docstring)."""

PROTOCOLS: tuple[str, ...] = get_args(Protocol)

HORIZONS: Mapping[str, int] = {"oyster": 20, "varibad": 100}
"""Episode length of each protocol: oyster's ``max_path_length`` in
``configs/point-robot.json`` and ``configs/sparse-point-robot.json``, VariBAD's
``max_episode_steps`` of ``PointEnv-v0`` and ``SparsePointEnv-v0``."""

MAX_STEP = 0.1
"""Largest move per axis and step (oyster's action space ``[-0.1, 0.1]``, VariBAD's ``0.1 *``)."""

GOAL_RADIUS = 0.2
"""Sparse reward radius of both codes."""

OYSTER_SEED = 1337
"""The seed oyster's ``PointEnv`` and ``SparsePointEnv`` give ``np.random`` before drawing tasks."""

OYSTER_N_TASKS = 100
"""oyster's ``env_params.n_tasks`` for both point-robot configs."""

OYSTER_N_TRAIN_TASKS = 80
"""oyster's ``n_train_tasks``: the first 80 of :func:`oyster_tasks`."""

OYSTER_N_TEST_TASKS = 20
"""oyster's ``n_eval_tasks``: the last 20 of :func:`oyster_tasks`."""


def oyster_goals(sparse: bool, n_tasks: int = OYSTER_N_TASKS) -> np.ndarray:
    """oyster's task list with ``randomize_tasks=True`` (its default config), as an
    ``(n_tasks, 2)`` array of goals in oyster's order.

    Dense: ``np.random.seed(1337)``, then ``[uniform(-1, 1), uniform(-1, 1)]`` per task. Sparse:
    ``np.random.seed(1337)`` again, ``n_tasks`` evenly spaced angles of ``[0, pi]`` on the unit
    circle, shuffled. NumPy's legacy ``RandomState`` is frozen, so the same seed gives oyster's
    goals to the last bit; no global random state is touched.
    """
    n_tasks = check_count("n_tasks", n_tasks)
    legacy = np.random.RandomState(OYSTER_SEED)
    if not sparse:
        return np.array(
            [[legacy.uniform(-1.0, 1.0), legacy.uniform(-1.0, 1.0)] for _ in range(n_tasks)]
        )
    angles = np.linspace(0, np.pi, num=n_tasks)
    goals = np.stack([np.cos(angles), np.sin(angles)], axis=1)
    legacy.shuffle(goals)
    return goals


def oyster_tasks(sparse: bool, n_tasks: int = OYSTER_N_TASKS) -> list[Task]:
    """:func:`oyster_goals` as metabench tasks; PEARL's training tasks are the first
    :data:`OYSTER_N_TRAIN_TASKS`, its meta-test tasks the last :data:`OYSTER_N_TEST_TASKS`."""
    return [{"goal": goal.tolist()} for goal in oyster_goals(sparse, n_tasks)]


def _protocol(value: Any) -> str:
    if value not in PROTOCOLS:
        raise ConfigError(
            f"protocol must be one of {', '.join(map(repr, PROTOCOLS))}, got {value!r}: "
            f"'oyster' is PEARL's code, 'varibad' VariBAD's"
        )
    return str(value)


class PointRobotEnv(CheckedKeywords, EzPickleWithTask, gym.Env[np.ndarray, np.ndarray]):
    """Point-Robot: a point rewarded by ``-||position - goal||``; the goal is the task.

    The observation is the position (the goal is hidden); the action, in ``[-1, 1]^2``, moves it
    by at most :data:`MAX_STEP` per axis, as each protocol maps it.

    :param protocol: ``"oyster"`` (PEARL's code) or ``"varibad"`` (VariBAD's): the goal
        distribution, the start, the action mapping and the default horizon.
    :param horizon: episode length; ``None``: the protocol's (:data:`HORIZONS`).

    Example::

        >>> env = PointRobotEnv(protocol="varibad")
        >>> obs, info = env.reset(seed=0, options={"task": {"goal": [0.0, 1.0]}})
        >>> env.step(np.array([0.0, 1.0]))[1]  # from the origin to (0, 0.1)
        -0.9
    """

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 - Gymnasium's convention
    sparse: ClassVar[bool] = False

    def __init__(self, protocol: Protocol = "oyster", horizon: int | None = None) -> None:
        utils.EzPickle.__init__(self, protocol, horizon)
        self.protocol = _protocol(protocol)
        self.horizon = check_count(
            "horizon", HORIZONS[self.protocol] if horizon is None else horizon
        )
        self.observation_space = spaces.Box(-np.inf, np.inf, shape=(2,), dtype=np.float64)
        self.action_space = spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float64)
        self._oyster_scaling = ActionScaling(
            spaces.Box(-MAX_STEP, MAX_STEP, shape=(2,), dtype=np.float32), 1.0
        )
        """rlkit's ``NormalizedBoxEnv`` around oyster's ``Box(-0.1, 0.1)``, float32 as gym 0.12
        made it (bounds of 0.10000000149): the same formula as garage's ``normalize`` with scale
        1, ``clip(lb + (a + 1) (ub - lb) / 2, lb, ub)``."""
        self._position = np.zeros(2)
        self._goal: np.ndarray | None = None
        self._task_drawn = False
        self._steps = 0
        self._guard = EpisodeGuard()

    # -- task protocol -------------------------------------------------------------------------
    @property
    def task(self) -> dict[str, list[float]] | None:
        """The current task, ``{"goal": [x, y]}`` (``None`` until a reset or ``set_task``)."""
        return None if self._goal is None else {"goal": self._goal.tolist()}

    def sample_tasks(self, n: int, rng: np.random.Generator | None = None) -> list[Task]:
        """Draw ``n`` goals from the protocol's distribution (``rng`` defaults to
        ``np_random``): see the module docstring."""
        check_n_tasks(n)
        rng = self.np_random if rng is None else rng
        if self.protocol == "varibad":
            angles = rng.uniform(0.0, math.pi, size=n)
        elif self.sparse:  # oyster's grid of angles; oyster_tasks gives its exact list
            angles = np.linspace(0, np.pi, num=OYSTER_N_TASKS)[rng.integers(OYSTER_N_TASKS, size=n)]
        else:
            return [{"goal": goal.tolist()} for goal in rng.uniform(-1.0, 1.0, size=(n, 2))]
        goals = np.stack([np.cos(angles), np.sin(angles)], axis=1)
        return [{"goal": goal.tolist()} for goal in goals]

    def listed_tasks(self, n: int) -> list[Task] | None:
        """oyster's own list of ``n`` tasks, its goals drawn after ``np.random.seed(1337)``
        (:func:`oyster_tasks`), where it has one; ``None`` otherwise."""
        if self.protocol == "oyster" and n == OYSTER_N_TASKS:
            return oyster_tasks(self.sparse, n)
        return None

    def set_task(self, task: Task) -> None:
        """Switch to ``task`` (``{"goal": [x, y]}``, any finite point: a meta-test may probe
        outside the training distribution); the reward uses it at once."""
        self._goal = self._validated(task)
        self._task_drawn = False

    def _validated(self, task: Task) -> np.ndarray:
        return validated_goal(task, type(self).__name__)

    # -- Gymnasium API -------------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start an episode: oyster's dense robot starts uniformly on ``[-1, 1]^2`` (its
        ``reset_model``), every other variant at the origin."""
        if options and options.get("task") is not None:
            self._validated(options["task"])  # an invalid task leaves the env as it was
        super().reset(seed=seed)
        apply_reset_task(self, options, has_task=self._goal is not None, seed=seed)
        if self.protocol == "oyster" and not self.sparse:
            self._position = self.np_random.uniform(-1.0, 1.0, size=2)
        else:
            self._position = np.zeros(2)
        self._steps = 0
        self._guard.active = True
        return self._position.copy(), {"task": self.task}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self._guard.check()
        action = check_action(action, self.action_space)
        assert self._goal is not None  # reset() always sets one
        if self.protocol == "oyster":
            move = self._oyster_scaling(action)
        else:  # VariBAD's PointEnv.step
            move = MAX_STEP * np.clip(action, -1.0, 1.0)
        self._position = self._position + move
        dx, dy = self._position - self._goal
        distance = float((dx**2 + dy**2) ** 0.5)
        self._steps += 1
        truncated = self._steps >= self.horizon
        if truncated:
            self._guard.active = False
        info: dict[str, Any] = {"distance": distance, "reward_dense": -distance}
        return self._position.copy(), self._reward(distance, info), False, truncated, info

    def _reward(self, distance: float, info: dict[str, Any]) -> float:
        """The step's reward (``info`` may gain entries)."""
        return -distance


class SparsePointRobotEnv(PointRobotEnv):
    """Sparse-Point-Robot: reward ``1 - ||position - goal||`` within ``goal_radius`` of the
    goal, 0 elsewhere; goals on the upper unit half circle.

    The step's reward is the sparse one, which both codes report: VariBAD returns it, oyster's
    env returns the dense reward and PEARL swaps in the sparse one (``sparse_rewards``) for its
    encoder's context and for evaluation, while its critic trains on the dense one. Both are in
    ``info`` (``reward_dense``, ``reward_sparse``), with ``success``: inside the radius.

    :param protocol: ``"oyster"`` or ``"varibad"`` (see :class:`PointRobotEnv`).
    :param horizon: episode length; ``None``: the protocol's.
    :param goal_radius: where the reward is given (0.2 in both codes).
    """

    sparse = True

    def __init__(
        self,
        protocol: Protocol = "oyster",
        horizon: int | None = None,
        goal_radius: float = GOAL_RADIUS,
    ) -> None:
        super().__init__(protocol, horizon)
        utils.EzPickle.__init__(self, protocol, horizon, goal_radius)
        self.goal_radius = check_number("goal_radius", goal_radius, low=0.0, low_open=True)

    def _reward(self, distance: float, info: dict[str, Any]) -> float:
        inside = -distance >= -self.goal_radius  # both codes compare the dense reward
        sparse = 1.0 - distance if inside else 0.0
        info["reward_sparse"] = sparse
        info["success"] = inside
        return sparse
