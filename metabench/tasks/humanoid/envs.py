"""Humanoid-Dir: PEARL's and VariBAD's humanoid task on Gymnasium's v5 Humanoid model.

The env subclasses Gymnasium's ``Humanoid-v5``, whose ``humanoid.xml`` is gym's (0.12.1, which
oyster runs, and 0.17.2, which VariBAD pins) byte for byte but for its line endings; frame skip 5
(``dt`` 0.015) and the reset noise (``qpos`` and ``qvel`` each plus U(+-0.01)) are gym's
``HumanoidEnv``'s too.

The reward, termination and observation are oyster's ``rlkit/envs/humanoid_dir.py`` (commit
44e20fd), which VariBAD's ``environments/mujoco/humanoid_dir.py`` (57e1795) copies term for term:

- ``0.25 * (cos a, sin a) . (c_after - c_before) / timestep``, ``c`` the planar mass centre
  (``xipos`` weighted by ``body_mass``) before and after the step: 1.25 times its velocity along
  the task's direction at frame skip 5;
- a control cost ``0.1 |ctrl|^2`` of the control the env writes to MuJoCo;
- an impact cost ``min(0.5e-6 |cfrc_ext|^2, 10)`` over every body (Gymnasium's
  ``do_simulation`` calls ``mj_rnePostConstraint``, as MuJoCo 1.50 computed them);
- an alive bonus of 5 on every step, the one that ends the episode included.

The episode terminates when the torso's height leaves ``[1, 2]`` and is truncated at the horizon
(200 in both codes). The observation is gym's ``Humanoid-v2`` one, 376 floats: ``qpos[2:]``,
``qvel``, and every body's ``cinert``, ``cvel``, ``qfrc_actuator`` and ``cfrc_ext``, the world
body's and the free joint's always-zero entries included (``Humanoid-v5`` drops them: 348).

The codes differ only in how the policy's ``[-1, 1]`` reaches the actuators' ``[-0.4, 0.4]``,
so each is a named protocol. ``"oyster"``: rlkit's ``NormalizedBoxEnv`` maps it linearly and
clips (``0.4 a`` inside the box). ``"varibad"``: the env multiplies it by 0.4 and does not clip,
VariBAD's policy having squashed it with ``tanh`` (``norm_actions_post_sampling=True``); the
control cost is then on the unclipped control and MuJoCo clamps the actuators' input.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar, Literal, get_args

import mujoco
import numpy as np
from gymnasium import utils
from gymnasium.envs.mujoco.humanoid_v5 import HumanoidEnv
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
)
from metabench.validation import ConfigError, check_count

HORIZON = 200
"""Episode length of both codes (oyster's default ``max_path_length``, VariBAD's
``max_episode_steps``)."""

LIN_VEL_WEIGHT = 0.25
"""The originals' ``0.25 * displacement / model.opt.timestep`` (1.25 times the velocity)."""

CTRL_COST_WEIGHT = 0.1
IMPACT_COST_WEIGHT = 0.5e-6
IMPACT_COST_MAX = 10.0
ALIVE_BONUS = 5.0
RESET_NOISE_SCALE = 0.01

HEALTHY_Z_RANGE = (1.0, 2.0)
"""``done = qpos[2] < 1.0 or qpos[2] > 2.0``: the bounds themselves are healthy."""

OBS_DIM = 376
"""``qpos[2:]`` 22, ``qvel`` 23, ``cinert`` 14 x 10, ``cvel`` 14 x 6, ``qfrc_actuator`` 23 and
``cfrc_ext`` 14 x 6."""

OYSTER_TASK_COUNTS: Mapping[str, tuple[int, int]] = {"humanoid-dir": (100, 30)}
"""oyster's ``(n_train_tasks, n_eval_tasks)`` in ``configs/humanoid-dir.json``: the first 100
and the last 30 of ``n_tasks`` = 130 directions drawn at launch without a seed."""

HumanoidDirProtocol = Literal["oyster", "varibad"]
"""Whose action path the env follows (both draw the direction's angle uniformly in
``[0, 2 pi)``): oyster's clipped ``NormalizedBoxEnv`` or VariBAD's unclipped ``0.4 a``."""


class HumanoidDirEnv(CheckedKeywords, TaskState, EzPickleWithTask, HumanoidEnv):
    """Humanoid-Dir: run in a hidden direction ``(cos a, sin a)``, ``a`` uniform in
    ``[0, 2 pi)``; a pickled or deep-copied env keeps its task.

    :param protocol: ``"oyster"`` (the default, actions clipped) or ``"varibad"`` (actions
        scaled, not clipped); see :data:`HumanoidDirProtocol`.
    :param horizon: episode length (200 in both codes).
    :param kwargs: passed on to Gymnasium's ``HumanoidEnv`` (``render_mode``, ``frame_skip``,
        ...); the reward's weights and the observation are the original's, not the caller's.

    Example::

        >>> env = HumanoidDirEnv()
        >>> obs, info = env.reset(seed=0, options={"task": {"angle": 0.5}})
        >>> obs.shape, env.action_space.high[0], info["task"]
        ((376,), np.float32(1.0), {'angle': 0.5})
    """

    protocols: ClassVar[tuple[str, ...]] = get_args(HumanoidDirProtocol)
    fixed_keywords: ClassVar[Mapping[str, str]] = {
        "model_path": "Humanoid-v5's; xml_file chooses another model",
        "observation_space": "the original's",
    } | {
        key: "the original's"
        for key in (
            "forward_reward_weight",
            "ctrl_cost_weight",
            "contact_cost_weight",
            "contact_cost_range",
            "healthy_reward",
            "terminate_when_unhealthy",
            "healthy_z_range",
            "reset_noise_scale",
            "exclude_current_positions_from_observation",
            "include_cinert_in_observation",
            "include_cvel_in_observation",
            "include_qfrc_actuator_in_observation",
            "include_cfrc_ext_in_observation",
        )
    }

    def __init__(
        self, protocol: HumanoidDirProtocol = "oyster", horizon: int = HORIZON, **kwargs: Any
    ) -> None:
        if protocol not in self.protocols:
            raise ConfigError(
                f"HumanoidDirEnv's protocol must be one of "
                f"{', '.join(map(repr, self.protocols))}, got {protocol!r}"
            )
        check_count("horizon", horizon)
        # Gymnasium's own terms set to the original's values; step() computes the reward itself
        super().__init__(
            forward_reward_weight=1.25,
            ctrl_cost_weight=CTRL_COST_WEIGHT,
            contact_cost_weight=IMPACT_COST_WEIGHT,
            contact_cost_range=(-np.inf, IMPACT_COST_MAX),
            healthy_reward=ALIVE_BONUS,
            terminate_when_unhealthy=True,
            healthy_z_range=HEALTHY_Z_RANGE,
            reset_noise_scale=RESET_NOISE_SCALE,
            exclude_current_positions_from_observation=True,
            **kwargs,
        )
        utils.EzPickle.__init__(self, protocol, horizon, **kwargs)
        self.protocol = protocol
        self.horizon = horizon
        self.observation_space = Box(
            -np.inf, np.inf, shape=(len(self._get_obs()),), dtype=np.float64
        )
        actuators = self.action_space
        assert isinstance(actuators, Box)  # the actuators' ctrlrange, float32
        self.action_scaling: ActionScaling | None = (
            ActionScaling(actuators, 1.0) if protocol == "oyster" else None
        )
        """rlkit's ``NormalizedBoxEnv`` for ``"oyster"``: ``[-1, 1]`` onto the ctrlrange,
        clipped."""
        if protocol == "varibad" and not np.array_equal(actuators.low, -actuators.high):
            raise ConfigError(
                "protocol 'varibad' scales actions by the ctrlrange's bound: use a model whose "
                "ctrlrange is symmetric"
            )
        self._action_scale = actuators.high[0]
        """VariBAD's ``action_scale``: ``action_space.high[0]``, float32 0.4."""
        self.action_space = Box(-1.0, 1.0, shape=actuators.shape, dtype=np.float32)
        self._mass = np.expand_dims(self.model.body_mass, 1)
        self._start_task_state()

    # -- task protocol: TaskState's, with these ----------------------------------------------

    def sample_tasks(self, n: int, rng: np.random.Generator | None = None) -> list[Task]:
        """Draw ``n`` directions, angle uniform in ``[0, 2 pi)`` as both codes draw them
        (``rng`` defaults to ``np_random``)."""
        check_n_tasks(n)
        rng = self.np_random if rng is None else rng
        return [{"angle": float(angle)} for angle in rng.uniform(0.0, 2.0 * math.pi, size=n)]

    def _validated(self, task: Task) -> dict[str, float]:
        return validated_angle(task, type(self).__name__)

    # -- Gymnasium API -------------------------------------------------------------------------
    def reset_model(self) -> np.ndarray:
        super().reset_model()
        # the contact forces at the start state, as mujoco-py 1.50's forward() left them
        mujoco.mj_rnePostConstraint(self.model, self.data)
        return self._get_obs()

    def step(  # type: ignore[override]  # MujocoEnv's hint is narrower than what it returns
        self, action: Any
    ) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self._guard.check()
        action = check_action(action, self.action_space)
        if self.action_scaling is not None:
            control = self.action_scaling(action)
        else:
            control = action * self._action_scale
        data = self.data
        position_before = self._mass_centre()
        self.do_simulation(control, self.frame_skip)
        position_after = self._mass_centre()
        assert self._task is not None  # reset() always sets one
        angle = self._task["angle"]
        direction = np.array((np.cos(angle), np.sin(angle)))
        displacement = float(np.sum(direction * (position_after - position_before)))
        lin_vel = LIN_VEL_WEIGHT * displacement / self.model.opt.timestep
        ctrl_cost = CTRL_COST_WEIGHT * float(np.square(data.ctrl).sum())
        impact_cost = min(
            IMPACT_COST_WEIGHT * float(np.square(data.cfrc_ext).sum()), IMPACT_COST_MAX
        )
        reward = lin_vel - ctrl_cost - impact_cost + ALIVE_BONUS
        low, high = HEALTHY_Z_RANGE
        height = data.qpos[2]
        terminated = bool(height < low or height > high)  # a NaN height does not end it
        self._steps += 1
        truncated = self._steps >= self.horizon
        if terminated or truncated:
            self._guard.active = False
        if self.render_mode == "human":
            self.render()
        info = {
            "x_position": float(data.qpos[0]),
            "y_position": float(data.qpos[1]),
            "reward_task": lin_vel,
            "reward_ctrl": -ctrl_cost,
            "reward_contact": -impact_cost,
            "reward_survive": ALIVE_BONUS,
        }
        return self._get_obs(), reward, terminated, truncated, info

    def _mass_centre(self) -> np.ndarray:
        """The planar mass centre, as the originals' ``mass_center`` computes it."""
        return (np.sum(self._mass * self.data.xipos, 0) / np.sum(self._mass))[:2]

    def _get_obs(self) -> np.ndarray:
        data = self.data
        return np.concatenate(
            (
                data.qpos.flat[2:],
                data.qvel.flat,
                data.cinert.flat,
                data.cvel.flat,
                data.qfrc_actuator.flat,
                data.cfrc_ext.flat,
            )
        )
