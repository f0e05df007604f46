"""HalfCheetahVel and HalfCheetahDir: the MuJoCo meta-RL tasks of garage, MAML, ProMP and PEARL.

Both subclass Gymnasium's ``HalfCheetah-v5`` (same body, frame skip 5, reset noise), replacing its
observation with garage's 20 floats (``qpos[1:]``, ``qvel``, torso centre of mass) and its reward
with the task's. Only the horizon ends an episode (``truncated``); nothing terminates it.
Source: ``garage/envs/mujoco/half_cheetah_vel_env.py`` and ``half_cheetah_dir_env.py``.

PEARL's and VariBAD's variants are named protocols of the same envs (``protocol="oyster"`` or
``"varibad"``; ``"garage"`` is the default and unchanged). oyster's ``rlkit/envs/half_cheetah*.py``
(commit 44e20fd) and VariBAD's ``environments/mujoco/half_cheetah*.py`` (57e1795) subclass gym's
``HalfCheetahEnv``, whose ``half_cheetah.xml`` (unchanged since gym's 3c8a68a, 2018) is
Gymnasium's, with the same frame skip and reset noise. Both compute garage's reward and
observation; what differs:

- the observation is cast to float32 (their ``_get_obs``), so the observation space is float32;
- goal velocities are U(0, 3), not garage's U(0, 2);
- the action path: oyster's ``NormalizedBoxEnv`` clips the policy's action to ``[-1, 1]`` before
  the physics and the control cost; VariBAD passes the raw action on (its cheetah configs set
  ``norm_actions_post_sampling = False``), charges the control cost on it, and MuJoCo clamps the
  actuators' input, as garage's path without ``action_scale`` does;
- oyster's Cheetah-Dir draws ``2 * Binomial(1, 0.5) - 1`` (garage and VariBAD: a choice of -1
  and 1), and oyster trains on fixed task lists (:func:`oyster_tasks`).

Both codes' horizon is 200 (oyster's ``max_path_length``, VariBAD's ``max_episode_steps``): the
``horizon`` keyword, which the benchmark sets.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Mapping
from typing import Any, ClassVar, Literal, get_args

import mujoco
import numpy as np
from gymnasium import utils
from gymnasium.envs.mujoco.half_cheetah_v5 import HalfCheetahEnv
from gymnasium.spaces import Box

from metabench.errors import InvalidTaskError
from metabench.tasks.base import (
    ActionScaling,
    CheckedKeywords,
    EzPickleWithTask,
    Task,
    TaskState,
    check_action,
    check_n_tasks,
)
from metabench.validation import ConfigError, check_count

CTRL_COST_WEIGHT = 0.05
"""garage's control cost: ``0.5 * 1e-1 * sum(action**2)``."""

OBS_DIM = 20

HalfCheetahProtocol = Literal["garage", "oyster", "varibad"]
"""Whose variant of the task: garage's (the default), oyster's (PEARL) or VariBAD's (see the
module doc for how they differ)."""

PROTOCOLS: tuple[str, ...] = get_args(HalfCheetahProtocol)

GARAGE_VELOCITY_RANGE = (0.0, 2.0)
"""garage's goal velocities (``half_cheetah_vel_env.py``)."""

ORIGINAL_VELOCITY_RANGE = (0.0, 3.0)
"""oyster's ``np.random.uniform(0.0, 3.0)`` and VariBAD's ``random.uniform(0.0, 3.0)``."""

OYSTER_TASK_COUNTS: Mapping[str, tuple[int, int]] = {
    "cheetah-vel": (100, 30),
    "cheetah-dir": (2, 2),
}
"""oyster's ``(n_train_tasks, n_eval_tasks)`` in ``configs/cheetah-vel.json`` and
``configs/cheetah-dir.json``: the first and the last of ``n_tasks`` (130 and 2) tasks
(``launch_experiment.py``); Cheetah-Dir's train and test tasks are the same two."""

OYSTER_N_TASKS: Mapping[str, int] = {"cheetah-vel": 130, "cheetah-dir": 2}
"""oyster's ``env_params.n_tasks`` in the same configs."""

OYSTER_VELOCITY_SEED = 1337
"""oyster's Cheetah-Vel ``sample_tasks`` calls ``np.random.seed(1337)`` first: every run trains
and tests on the same 130 velocities."""


def oyster_tasks(name: str) -> list[Task]:
    """oyster's fixed task list for ``"cheetah-vel"`` or ``"cheetah-dir"`` (all ``n_tasks`` of
    them: train on the first, test on the last, :data:`OYSTER_TASK_COUNTS`).

    Cheetah-Vel: ``np.random.seed(1337); np.random.uniform(0.0, 3.0, size=(130,))``;
    Cheetah-Dir: ``[-1, 1]`` (its ``__init__`` ignores ``sample_tasks``).
    """
    if name == "cheetah-vel":
        state = np.random.RandomState(OYSTER_VELOCITY_SEED)  # oyster's legacy seeded draw
        velocities = state.uniform(*ORIGINAL_VELOCITY_RANGE, size=(OYSTER_N_TASKS[name],))
        return [{"velocity": float(v)} for v in velocities]
    if name == "cheetah-dir":
        return [{"direction": -1.0}, {"direction": 1.0}]
    raise ConfigError(
        f"oyster has no HalfCheetah task list {name!r}: use one of {list(OYSTER_N_TASKS)}"
    )


class HalfCheetahTaskEnv(CheckedKeywords, TaskState, EzPickleWithTask, HalfCheetahEnv, abc.ABC):
    """Common body of the HalfCheetah task envs: observation, horizon, task protocol; a pickled
    or deep-copied env keeps its task (:class:`~metabench.tasks.base.EzPickleWithTask`).

    :param horizon: episode length.
    :param action_scale: if set, the policy acts in ``[-action_scale, action_scale]``, mapped onto
        the actuators' ``[-1, 1]`` as garage's ``normalize`` does (see
        :class:`~metabench.tasks.base.ActionScaling`); the control cost is computed on the
        mapped action. garage's and pytorch-maml-rl's MAML setups use 10.
    :param protocol: whose variant (:data:`HalfCheetahProtocol`); ``"oyster"`` and
        ``"varibad"`` fix the action path, so they take no ``action_scale``.
    :param kwargs: passed on to Gymnasium's ``HalfCheetahEnv`` (its control cost weight is
        garage's, :data:`CTRL_COST_WEIGHT`).
    """

    task_key: str = ""
    fixed_keywords: ClassVar[Mapping[str, str]] = {
        "ctrl_cost_weight": f"garage's {CTRL_COST_WEIGHT}",
        "model_path": "HalfCheetah-v5's; xml_file chooses another model",
        "observation_space": f"garage's {OBS_DIM} floats",
    }

    def __init__(
        self,
        horizon: int = 200,
        action_scale: float | None = None,
        *,
        protocol: HalfCheetahProtocol = "garage",
        **kwargs: Any,
    ) -> None:
        if protocol not in PROTOCOLS:
            raise ConfigError(
                f"{type(self).__name__}'s protocol must be one of "
                f"{', '.join(map(repr, PROTOCOLS))}, got {protocol!r}"
            )
        if protocol != "garage" and action_scale is not None:
            raise ConfigError(
                f"protocol={protocol!r} fixes the action path, got action_scale={action_scale!r}: "
                f"remove action_scale, or use protocol='garage'"
            )
        self.protocol = protocol
        self._float32_obs = protocol != "garage"
        """oyster's and VariBAD's ``_get_obs`` cast the observation to float32."""
        check_count("horizon", horizon)
        super().__init__(ctrl_cost_weight=CTRL_COST_WEIGHT, **kwargs)
        self.horizon = horizon
        self.observation_space = Box(-np.inf, np.inf, shape=(OBS_DIM,), dtype=np.float64)
        self.action_scale = action_scale
        self.action_scaling: ActionScaling | None = None
        """garage's action normalisation, when ``action_scale`` is set: the policy acts in
        ``[-action_scale, action_scale]`` and the actuators (and the control cost) receive
        ``clip(action / action_scale, -1, 1)``."""
        if action_scale is not None:
            assert isinstance(self.action_space, Box)  # HalfCheetah-v5's [-1, 1]^6
            self.action_scaling = ActionScaling(self.action_space, action_scale)
            self.action_space = self.action_scaling.space
        if protocol != "garage":
            self.observation_space = Box(-np.inf, np.inf, shape=(OBS_DIM,), dtype=np.float32)
        if protocol == "oyster":
            # rlkit's NormalizedBoxEnv: [-1, 1] onto the actuators' [-1, 1], clipped (garage's
            # normalize with scale 1 is the same formula, in the same order)
            assert isinstance(self.action_space, Box)
            self.action_scaling = ActionScaling(self.action_space, 1.0)
        self._torso_id = self.model.body("torso").id
        self._step_dt = float(self.dt)
        self._start_task_state()

    # -- task protocol: TaskState's, with these ----------------------------------------------

    @abc.abstractmethod
    def sample_tasks(self, n: int, rng: np.random.Generator | None = None) -> list[Task]:
        """Draw ``n`` tasks from this env's distribution (``rng`` defaults to ``np_random``)."""

    @abc.abstractmethod
    def _check_task_value(self, value: float) -> None:
        """Raise :class:`InvalidTaskError` if ``value`` is not a valid task parameter."""

    def _validated(self, task: Task) -> dict[str, float]:
        key = self.task_key
        if not isinstance(task, Mapping) or set(task) != {key}:
            raise InvalidTaskError(
                f"{type(self).__name__} expects a task like {{'{key}': <float>}}, got {task!r}; "
                f"use env.sample_tasks(n) to make valid tasks"
            )
        value = task[key]
        if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
            raise InvalidTaskError(f"task['{key}'] must be a number, got {value!r}")
        value = float(value)
        if not math.isfinite(value):
            raise InvalidTaskError(f"task['{key}'] must be finite, got {value}")
        self._check_task_value(value)
        return {key: value}

    # -- Gymnasium API -------------------------------------------------------------------------
    def step(  # type: ignore[override]  # MujocoEnv's hint is narrower than what it returns
        self, action: Any
    ) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        # A lean version of HalfCheetah-v5's step: the same physics and x-velocity, without
        # do_simulation's re-validation of the action and without mj_rnePostConstraint, whose
        # contact forces neither the observation nor the reward uses (garage's mujoco-py env did
        # not compute them either). Measured in tests/benchmarks/test_env_speed.py.
        self._guard.check()
        action = check_action(action, self.action_space)
        if self.action_scaling is not None:
            action = self.action_scaling(action)
        data = self.data
        # Python floats, not NumPy scalars: SB3's DummyVecEnv deep-copies every info dict, and
        # NumPy scalars make that copy several times slower.
        x_before = float(data.qpos[0])
        data.ctrl[:] = action
        mujoco.mj_step(self.model, data, nstep=self.frame_skip)
        x_after = float(data.qpos[0])
        x_velocity = (x_after - x_before) / self._step_dt
        assert self._task is not None  # reset() always sets one
        task_reward = self._task_reward(x_velocity, self._task[self.task_key])
        action64 = action.astype(np.float64)
        ctrl_cost = CTRL_COST_WEIGHT * float(np.dot(action64, action64))
        self._steps += 1
        truncated = self._steps >= self.horizon
        if truncated:
            self._guard.active = False
        if self.render_mode == "human":
            self.render()
        info = {
            "x_position": x_after,
            "x_velocity": x_velocity,
            "reward_task": task_reward,
            "reward_ctrl": -ctrl_cost,
        }
        return self._get_obs(), task_reward - ctrl_cost, False, truncated, info

    def _get_obs(self) -> np.ndarray:
        data = self.data
        obs = np.concatenate((data.qpos[1:], data.qvel, data.xpos[self._torso_id]))
        return obs.astype(np.float32) if self._float32_obs else obs

    @staticmethod
    @abc.abstractmethod
    def _task_reward(x_velocity: float, task_value: float) -> float:
        """The task part of the reward, before the control cost."""


class HalfCheetahVelEnv(HalfCheetahTaskEnv):
    """Run forward at a goal velocity: reward ``-|v - goal| - 0.05 |a|^2``.

    :param velocity_range: goal velocities are drawn uniformly from it; ``None``: the
        protocol's, garage's (0, 2) or oyster's and VariBAD's (0, 3) (ProMP's too).
    :param horizon: episode length (200 as in PEARL, VariBAD and garage's MAML benchmark).
    :param protocol: whose variant (:data:`HalfCheetahProtocol`).
    :param kwargs: ``action_scale`` and the other arguments of :class:`HalfCheetahTaskEnv`
        (``action_scale=10.0`` is garage's and pytorch-maml-rl's MAML setup).

    Example::

        >>> env = HalfCheetahVelEnv()
        >>> obs, info = env.reset(seed=0, options={"task": {"velocity": 1.5}})
        >>> obs.shape, info["task"]
        ((20,), {'velocity': 1.5})
    """

    task_key = "velocity"

    def __init__(
        self,
        velocity_range: tuple[float, float] | None = None,
        horizon: int = 200,
        *,
        protocol: HalfCheetahProtocol = "garage",
        **kwargs: Any,
    ) -> None:
        if velocity_range is None:
            garage = protocol == "garage"
            velocity_range = GARAGE_VELOCITY_RANGE if garage else ORIGINAL_VELOCITY_RANGE
        low, high = _velocity_range(velocity_range)
        if protocol == "garage":
            super().__init__(horizon=horizon, **kwargs)
            utils.EzPickle.__init__(self, velocity_range, horizon, **kwargs)
        else:
            super().__init__(horizon=horizon, protocol=protocol, **kwargs)
            utils.EzPickle.__init__(self, velocity_range, horizon, protocol=protocol, **kwargs)
        self.velocity_range = (low, high)

    def listed_tasks(self, n: int) -> list[Task] | None:
        """oyster's own list of ``n`` tasks, its 130 seeded velocities (:func:`oyster_tasks`),
        where it has one; ``None`` otherwise."""
        if self.protocol == "oyster" and n == OYSTER_N_TASKS["cheetah-vel"]:
            return oyster_tasks("cheetah-vel")
        return None

    def sample_tasks(self, n: int, rng: np.random.Generator | None = None) -> list[Task]:
        check_n_tasks(n)
        rng = self.np_random if rng is None else rng
        return [{"velocity": float(v)} for v in rng.uniform(*self.velocity_range, size=n)]

    def _check_task_value(self, value: float) -> None:
        """Any finite velocity is valid: meta-test may probe outside the training range."""

    @staticmethod
    def _task_reward(x_velocity: float, task_value: float) -> float:
        return -abs(x_velocity - task_value)


def _velocity_range(value: Any) -> tuple[float, float]:
    """``velocity_range`` as its two bounds, or :class:`ConfigError` saying what to give."""
    example = "e.g. velocity_range=(0.0, 2.0)"
    try:
        if isinstance(value, (str, bytes)):  # its characters would be read as the bounds
            raise ValueError
        low, high = (float(v) for v in value)
    except (TypeError, ValueError):
        raise ConfigError(
            f"velocity_range must be two numbers (low, high), got {value!r}: {example}"
        ) from None
    if not (math.isfinite(low) and math.isfinite(high)):
        raise ConfigError(f"velocity_range must be finite, got {value!r}: {example}")
    if low > high:
        raise ConfigError(
            f"velocity_range must be (low, high) with low <= high, got {value!r}: swap them, "
            f"velocity_range=({high!r}, {low!r})"
        )
    return low, high


class HalfCheetahDirEnv(HalfCheetahTaskEnv):
    """Run forward (+1) or backward (-1): reward ``direction * v - 0.05 |a|^2``.

    :param horizon: episode length (100 as in the MAML paper and learn2learn; PEARL and VariBAD
        use 200).
    :param protocol: whose variant (:data:`HalfCheetahProtocol`).
    :param kwargs: ``action_scale`` and the other arguments of :class:`HalfCheetahTaskEnv`.
    """

    task_key = "direction"

    def __init__(
        self, horizon: int = 100, *, protocol: HalfCheetahProtocol = "garage", **kwargs: Any
    ) -> None:
        if protocol == "garage":
            super().__init__(horizon=horizon, **kwargs)
            utils.EzPickle.__init__(self, horizon, **kwargs)
        else:
            super().__init__(horizon=horizon, protocol=protocol, **kwargs)
            utils.EzPickle.__init__(self, horizon, protocol=protocol, **kwargs)

    def sample_tasks(self, n: int, rng: np.random.Generator | None = None) -> list[Task]:
        check_n_tasks(n)
        rng = self.np_random if rng is None else rng
        if self.protocol == "oyster":  # oyster's 2 * binomial(1, p=0.5) - 1
            directions = 2 * rng.binomial(1, p=0.5, size=n) - 1
            return [{"direction": float(d)} for d in directions]
        return [{"direction": float(d)} for d in rng.choice((-1.0, 1.0), size=n)]

    def listed_tasks(self, n: int) -> list[Task] | None:
        """oyster's own list of ``n`` tasks, ``[-1, 1]`` (:func:`oyster_tasks`), where it has
        one; ``None`` otherwise."""
        if self.protocol == "oyster" and n == OYSTER_N_TASKS["cheetah-dir"]:
            return oyster_tasks("cheetah-dir")
        return None

    def _check_task_value(self, value: float) -> None:
        if value not in (-1.0, 1.0):
            raise InvalidTaskError(f"task['direction'] must be -1.0 or 1.0, got {value}")

    @staticmethod
    def _task_reward(x_velocity: float, task_value: float) -> float:
        return task_value * x_velocity
