"""Ant-Dir and Ant-Goal: PEARL's and VariBAD's ant tasks on Gymnasium's v5 Ant model.

Both subclass Gymnasium's ``Ant-v5`` for its body, frame skip 5 (``dt`` 0.05) and reset noise
(``qpos`` uniform in +-0.1, ``qvel`` 0.1 times a standard normal, as oyster's ``reset_model``).
oyster's ``rlkit/envs/assets/ant.xml`` (commit 44e20fd; VariBAD's copy at 57e1795 is the same
file reformatted) is gym's ``ant.xml`` with two hidden visual sites added, and Gymnasium's lacks
only those sites and adds a camera: the same bodies, joints, actuators and contacts.

The reward terms are oyster's ``rlkit/envs/ant_dir.py`` and ``ant_goal.py`` (VariBAD's
``environments/mujoco/ant_dir.py`` and ``ant_goal.py`` compute the same):

- the task term from the torso's position (``get_body_com("torso")``, MuJoCo's ``xpos``)
  before and after the step;
- a control cost, ``0.5 |a|^2`` for Ant-Dir and ``0.1 |a|^2`` for Ant-Goal;
- a contact cost, ``5e-4`` times the sum of squares of ``cfrc_ext`` clipped to ``[-1, 1]``,
  every body's (Gymnasium's ``do_simulation`` calls ``mj_rnePostConstraint``, which computes
  them as MuJoCo 1.50 did: under MuJoCo 2.0 they were zero);
- a survive reward, 1 on every step of Ant-Dir (the step that ends the episode too), 0 for
  Ant-Goal.

Ant-Dir terminates when the state is not finite or the torso's height leaves ``[0.2, 1.0]``;
Ant-Goal never terminates. Both are truncated at the horizon, 200 in both codes.

What differs between the codes is the task distribution and the action path, so each is a named
protocol. With ``"oyster"`` protocols the policy's action is clipped to ``[-1, 1]`` before the
physics and the control cost, as rlkit's ``NormalizedBoxEnv`` does; with ``"varibad"`` ones the
raw action reaches the env, its control cost is computed on it, and MuJoCo clamps the actuators'
input to their control range.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Mapping
from typing import Any, ClassVar, Literal, get_args

import numpy as np
from gymnasium import utils
from gymnasium.envs.mujoco.ant_v5 import AntEnv
from gymnasium.spaces import Box

from metabench.tasks.base import (
    ActionScaling,
    CheckedKeywords,
    EzPickleWithTask,
    Task,
    TaskState,
    check_action,
    check_n_tasks,
    validated_angle,
    validated_goal,
)
from metabench.validation import ConfigError, check_count

HORIZON = 200
"""Episode length of both codes (oyster's default ``max_path_length``, VariBAD's
``max_episode_steps``)."""

CONTACT_COST_WEIGHT = 0.5 * 1e-3
"""Both codes' ``0.5 * 1e-3 * sum(clip(cfrc_ext, -1, 1)**2)``."""

HEALTHY_Z_RANGE = (0.2, 1.0)
"""Ant-Dir's ``notdone``: the torso's height in this range (bounds included)."""

OYSTER_TASK_COUNTS: Mapping[str, tuple[int, int]] = {"ant-dir": (2, 2), "ant-goal": (150, 30)}
"""oyster's ``(n_train_tasks, n_eval_tasks)`` in ``configs/ant-dir.json`` and
``configs/ant-goal.json``: the first and the last of ``n_tasks`` (2 and 180) tasks drawn at
launch without a seed; Ant-Dir's train and test tasks are the same two."""

AntDirProtocol = Literal["oyster", "oyster-2d", "varibad", "varibad-2d"]
"""Whose Ant-Dir directions the env draws (angles in radians, ``(cos, sin)`` the direction):

- ``"oyster"``: forward or backward, 0 or pi (``forward_backward=True``: the script behind
  PEARL's Figure 3, ``scripts/sac_ant_forwards_backwards.py`` at oyster's first commit a40a98c);
- ``"oyster-2d"``: uniform in ``[0, 2 pi)`` (``forward_backward=False``, which oyster's
  ``configs/ant-dir.json`` runs at 44e20fd);
- ``"varibad"``: -1 or +1 *radian*: VariBAD's ``AntDirEnv`` draws a direction of -1 or +1 and
  its ``step`` takes it as an angle, so its "backward" is 57 degrees to the right and its
  "forward" 57 degrees to the left;
- ``"varibad-2d"``: VariBAD's ``AntDir2DEnv`` draws a unit vector (two Gaussians, normalised),
  and its ``set_task`` keeps the first component, taken as an angle in radians.
"""

AntGoalProtocol = Literal["oyster", "varibad"]
"""Ant-Goal's action path: oyster's clipped one or VariBAD's raw one (the goal distribution is
the same)."""

OBS_DIM_DIR = 27
"""Ant-Dir's observation: ``qpos[2:]`` and ``qvel`` (oyster's ``AntEnv._get_obs``)."""

OBS_DIM_GOAL = 113
"""Ant-Goal's observation: ``qpos``, ``qvel`` and every body's ``cfrc_ext`` (the world body's,
always zero, included) clipped to ``[-1, 1]`` (oyster's ``AntGoalEnv._get_obs``)."""


class AntTaskEnv(CheckedKeywords, TaskState, EzPickleWithTask, AntEnv, abc.ABC):
    """Common body of the ant task envs: reward terms, termination, horizon, task protocol; a
    pickled or deep-copied env keeps its task.

    :param protocol: the subclass's protocols (the task distribution and the action path).
    :param horizon: episode length.
    :param kwargs: passed on to Gymnasium's ``AntEnv`` (``render_mode``, ``frame_skip``, ...);
        the reward's weights and the observation are the original's, not the caller's.
    """

    protocols: ClassVar[tuple[str, ...]] = ()
    ctrl_cost_weight: ClassVar[float] = 0.0
    survive_reward: ClassVar[float] = 0.0
    terminates: ClassVar[bool] = False
    fixed_keywords: ClassVar[Mapping[str, str]] = {
        "model_path": "Ant-v5's; xml_file chooses another model",
        "observation_space": "the original's",
    } | {
        key: "the original's"
        for key in (
            "forward_reward_weight",
            "ctrl_cost_weight",
            "contact_cost_weight",
            "healthy_reward",
            "main_body",
            "terminate_when_unhealthy",
            "healthy_z_range",
            "contact_force_range",
            "reset_noise_scale",
            "exclude_current_positions_from_observation",
            "include_cfrc_ext_in_observation",
        )
    }

    def __init__(self, protocol: str, horizon: int = HORIZON, **kwargs: Any) -> None:
        if protocol not in self.protocols:
            raise ConfigError(
                f"{type(self).__name__}'s protocol must be one of "
                f"{', '.join(map(repr, self.protocols))}, got {protocol!r}"
            )
        check_count("horizon", horizon)
        super().__init__(
            ctrl_cost_weight=self.ctrl_cost_weight,
            contact_cost_weight=CONTACT_COST_WEIGHT,
            healthy_reward=self.survive_reward,
            terminate_when_unhealthy=self.terminates,
            healthy_z_range=HEALTHY_Z_RANGE,
            contact_force_range=(-1.0, 1.0),
            reset_noise_scale=0.1,
            **kwargs,
        )
        self.protocol = protocol
        self.horizon = horizon
        obs_dim = len(self._get_obs())
        self.observation_space = Box(-np.inf, np.inf, shape=(obs_dim,), dtype=np.float64)
        assert isinstance(self.action_space, Box)  # the actuators' [-1, 1]^8
        self.action_scaling: ActionScaling | None = (
            ActionScaling(self.action_space, 1.0) if protocol.startswith("oyster") else None
        )
        """rlkit's ``NormalizedBoxEnv`` for the oyster protocols: ``[-1, 1]`` onto the
        actuators' ``[-1, 1]``, clipped (garage's ``normalize`` with scale 1 is the same
        formula)."""
        self._torso_id = self.model.body("torso").id
        self._start_task_state()

    # -- task protocol: TaskState's, with these ----------------------------------------------

    @abc.abstractmethod
    def sample_tasks(self, n: int, rng: np.random.Generator | None = None) -> list[Task]:
        """Draw ``n`` tasks from the protocol's distribution (``rng`` defaults to
        ``np_random``)."""

    @abc.abstractmethod
    def _validated(self, task: Task) -> dict[str, Any]:
        """``task`` as the env keeps it, or :class:`InvalidTaskError` saying what to give."""

    # -- Gymnasium API -------------------------------------------------------------------------
    def step(  # type: ignore[override]  # MujocoEnv's hint is narrower than what it returns
        self, action: Any
    ) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self._guard.check()
        action = check_action(action, self.action_space)
        if self.action_scaling is not None:
            action = self.action_scaling(action)
        data = self.data
        xy_before = data.xpos[self._torso_id, :2].copy()
        self.do_simulation(action, self.frame_skip)
        xy_after = data.xpos[self._torso_id, :2].copy()
        assert self._task is not None  # reset() always sets one
        task_reward = self._task_reward(xy_before, xy_after)
        action64 = np.asarray(action, dtype=np.float64)
        ctrl_cost = self.ctrl_cost_weight * float(np.dot(action64, action64))
        contact_cost = CONTACT_COST_WEIGHT * float(np.sum(np.square(self.contact_forces)))
        reward = task_reward - ctrl_cost - contact_cost + self.survive_reward
        low, high = HEALTHY_Z_RANGE
        healthy = bool(np.isfinite(self.state_vector()).all() and low <= data.qpos[2] <= high)
        terminated = self.terminates and not healthy
        self._steps += 1
        truncated = self._steps >= self.horizon
        if terminated or truncated:
            self._guard.active = False
        if self.render_mode == "human":
            self.render()
        info = {
            "x_position": float(xy_after[0]),
            "y_position": float(xy_after[1]),
            "reward_task": task_reward,
            "reward_ctrl": -ctrl_cost,
            "reward_contact": -contact_cost,
            "reward_survive": self.survive_reward,
        }
        return self._get_obs(), reward, terminated, truncated, info

    @abc.abstractmethod
    def _task_reward(self, xy_before: np.ndarray, xy_after: np.ndarray) -> float:
        """The task's term of the reward, from the torso's position before and after."""


class AntDirEnv(AntTaskEnv):
    """Ant-Dir: walk in a hidden direction, reward ``v . (cos a, sin a) - 0.5 |a|^2 - contact
    + 1``, ``v`` the torso's planar velocity and ``a`` the task's angle.

    :param protocol: whose directions (see :data:`AntDirProtocol`); ``"oyster"``, the default,
        is PEARL's Ant-Fwd-Back.
    :param horizon: episode length (200 in both codes).
    :param kwargs: passed on to Gymnasium's ``AntEnv``.

    Example::

        >>> env = AntDirEnv()
        >>> obs, info = env.reset(seed=0, options={"task": {"angle": 0.0}})
        >>> obs.shape, info["task"]
        ((27,), {'angle': 0.0})
    """

    protocols = get_args(AntDirProtocol)
    ctrl_cost_weight = 0.5
    survive_reward = 1.0
    terminates = True

    def __init__(
        self, protocol: AntDirProtocol = "oyster", horizon: int = HORIZON, **kwargs: Any
    ) -> None:
        super().__init__(
            protocol,
            horizon,
            exclude_current_positions_from_observation=True,
            include_cfrc_ext_in_observation=False,
            **kwargs,
        )
        utils.EzPickle.__init__(self, protocol, horizon, **kwargs)

    def sample_tasks(self, n: int, rng: np.random.Generator | None = None) -> list[Task]:
        check_n_tasks(n)
        rng = self.np_random if rng is None else rng
        if self.protocol == "oyster":
            angles = rng.choice((0.0, math.pi), size=n)
        elif self.protocol == "oyster-2d":
            angles = rng.uniform(0.0, 2.0 * math.pi, size=n)
        elif self.protocol == "varibad":
            angles = rng.choice((-1.0, 1.0), size=n)
        else:  # varibad-2d: the first component of a random unit vector
            directions = rng.standard_normal((n, 2))
            directions /= np.linalg.norm(directions, axis=1)[..., np.newaxis]
            angles = directions[:, 0]
        return [{"angle": float(angle)} for angle in angles]

    def listed_tasks(self, n: int) -> list[Task] | None:
        """oyster's own list of ``n`` tasks, where it has one: ``forward_backward``'s
        ``[0, pi]`` (``sample_tasks`` there asserts ``n == 2``); ``None`` otherwise."""
        if self.protocol == "oyster" and n == 2:
            return [{"angle": 0.0}, {"angle": math.pi}]
        return None

    def _validated(self, task: Task) -> dict[str, Any]:
        return validated_angle(task, type(self).__name__)

    def _task_reward(self, xy_before: np.ndarray, xy_after: np.ndarray) -> float:
        assert self._task is not None
        angle = self._task["angle"]
        direction = np.array([np.cos(angle), np.sin(angle)])
        return float(np.dot((xy_after - xy_before) / self.dt, direction))

    def _get_obs(self) -> np.ndarray:
        return np.concatenate((self.data.qpos[2:], self.data.qvel))


class AntGoalEnv(AntTaskEnv):
    """Ant-Goal: walk to a hidden goal, reward ``-|x - gx| - |y - gy| - 0.1 |a|^2 - contact``;
    goals uniform on the disc of radius 3 (angle ``2 pi U``, radius ``3 sqrt(U)``, as oyster and
    VariBAD draw them). Never terminates.

    :param protocol: ``"oyster"`` (actions clipped) or ``"varibad"`` (raw actions).
    :param horizon: episode length (200 in both codes).
    :param kwargs: passed on to Gymnasium's ``AntEnv``.
    """

    protocols = get_args(AntGoalProtocol)
    ctrl_cost_weight = 0.1
    survive_reward = 0.0
    terminates = False

    def __init__(
        self, protocol: AntGoalProtocol = "oyster", horizon: int = HORIZON, **kwargs: Any
    ) -> None:
        super().__init__(
            protocol,
            horizon,
            exclude_current_positions_from_observation=False,
            include_cfrc_ext_in_observation=True,
            **kwargs,
        )
        utils.EzPickle.__init__(self, protocol, horizon, **kwargs)

    def sample_tasks(self, n: int, rng: np.random.Generator | None = None) -> list[Task]:
        check_n_tasks(n)
        rng = self.np_random if rng is None else rng
        angles = rng.random(n) * 2 * np.pi  # all angles, then all radii, as both codes draw
        radii = 3 * rng.random(n) ** 0.5
        goals = np.stack((radii * np.cos(angles), radii * np.sin(angles)), axis=-1)
        return [{"goal": goal.tolist()} for goal in goals]

    def _validated(self, task: Task) -> dict[str, Any]:
        return {"goal": validated_goal(task, type(self).__name__).tolist()}

    def _task_reward(self, xy_before: np.ndarray, xy_after: np.ndarray) -> float:
        assert self._task is not None
        return -float(np.sum(np.abs(xy_after - np.asarray(self._task["goal"]))))

    def _get_obs(self) -> np.ndarray:
        data = self.data
        return np.concatenate((data.qpos, data.qvel, np.clip(data.cfrc_ext, -1.0, 1.0).ravel()))
