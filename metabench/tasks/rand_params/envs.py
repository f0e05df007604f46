"""Walker-Rand-Params and Hopper-Rand-Params: PEARL's and VariBAD's tasks of random physics, on
Gymnasium's v5 Walker2d and Hopper.

The originals are ``rand_param_envs``' ``Walker2DRandParamsEnv`` and ``HopperRandParamsEnv``
(``dennisl88/rand_param_envs`` 4d1529d, the commit oyster 44e20fd pins as a submodule; VariBAD
57e1795 vendors the same code in ``environments/mujoco/rand_param_envs/``). A task is a set of
the model's masses, inertias, joint damping and friction (:mod:`.sampling`); the reward and the
termination are those of gym's old Walker2d-v1 and Hopper-v1, computed here:

- reward ``(x after - x before) / dt + 1 - 1e-3 |a|^2``, ``x`` the root's ``qpos[0]``; the alive
  bonus is paid on every step, the terminal one included (Gymnasium's v5 pays it only while
  healthy);
- Walker terminates unless the height ``qpos[1]`` is in ``(0.8, 2.0)`` and the angle ``qpos[2]``
  in ``(-1, 1)``; Hopper unless the state is finite, ``|state[2:]| < 100``, the height is above
  0.7 and ``|angle| < 0.2``;
- observation ``qpos[1:]`` and ``clip(qvel, -10, 10)``, reset noise ``U(±0.005)`` on ``qpos`` and
  ``qvel`` (Gymnasium's v5 ``_get_obs`` and ``reset_model`` do the same).

The model: ``rand_param_envs`` ships gym's ``walker2d.xml`` and ``hopper.xml`` with the
timestep raised from 0.002 to 0.004 s ("increase env step", c662ac8), and its ``RandomEnv``
hard-codes frame skip 4, so a step lasts 0.016 s. Both envs load Gymnasium's conversion of those
files to local coordinates (MuJoCo 3 no longer reads global ones): the same bodies, masses,
inertias, joints, actuators and contacts, with a tracking camera. Walker loads ``walker2d.xml``
(Gymnasium's v4 model) instead of Walker2d-v5's ``walker2d_v5.xml``, whose right foot has
friction 1.9 where the original's has 0.9: friction is one of the randomised parameters, each
drawn as a multiple of the model's own. The timestep is set to 0.004 s after loading.

Setting a task writes the fields into the model without ``mj_setConst``, as the original's
``setattr`` did: quantities MuJoCo derives from the masses at compile time (``dof_invweight0``,
which scales the constraints' regularisation) stay the nominal model's.

With the ``"oyster"`` protocol the action is clipped to ``[-1, 1]`` before the physics and the
control cost (rlkit's ``NormalizedBoxEnv``); with ``"varibad"`` the raw action reaches the env,
its control cost is computed on it, and MuJoCo clamps the actuators' input
(``norm_actions_*_sampling=False`` in VariBAD's ``config/mujoco/args_walker_varibad.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Literal, get_args

import mujoco
import numpy as np
from gymnasium import utils
from gymnasium.envs.mujoco.hopper_v5 import HopperEnv
from gymnasium.envs.mujoco.walker2d_v5 import Walker2dEnv
from gymnasium.spaces import Box, Space

from metabench.tasks.base import (
    ActionScaling,
    CheckedKeywords,
    EzPickleWithTask,
    Task,
    TaskState,
    check_action,
    check_n_tasks,
)
from metabench.tasks.rand_params.sampling import (
    RAND_PARAMS,
    nominal_parameters,
    sample_parameters,
    validated_parameters,
)
from metabench.validation import ConfigError, check_count

HORIZON = 200
"""Episode length of both codes (oyster's default ``max_path_length``, VariBAD's
``max_episode_steps``)."""

TIMESTEP = 0.004
"""The models' timestep in ``rand_param_envs`` (gym's was 0.002): with frame skip 4, ``dt`` is
0.016 s."""

ALIVE_BONUS = 1.0
CTRL_COST_WEIGHT = 1e-3

OYSTER_TASK_COUNTS: Mapping[str, tuple[int, int]] = {
    "walker-rand-params": (40, 10),
    "hopper-rand-params": (40, 10),
}
"""oyster's ``(n_train_tasks, n_eval_tasks)`` in ``configs/walker_rand_params.json`` and
``configs/hopper_rand_params.json``: the first 40 and the last 10 of ``n_tasks`` 50 tasks drawn
at launch with the unseeded global ``np.random``."""

RandParamsProtocol = Literal["oyster", "varibad"]
"""The action path: oyster's clipped one or VariBAD's raw one (the task distribution, the reward
and the horizon are the same)."""

_FIXED_KEYWORDS: Mapping[str, str] = {
    "xml_file": "the original's model",
    "model_path": "the original's model",
    "observation_space": "the original's",
} | {
    key: "the original's"
    for key in (
        "forward_reward_weight",
        "ctrl_cost_weight",
        "healthy_reward",
        "terminate_when_unhealthy",
        "healthy_state_range",
        "healthy_z_range",
        "healthy_angle_range",
        "reset_noise_scale",
        "exclude_current_positions_from_observation",
    )
}


class RandParamsEnv(CheckedKeywords, TaskState, EzPickleWithTask):
    """Common body of the Rand-Params envs, mixed in before Gymnasium's env: the task protocol,
    the reward, the horizon and the action path; a pickled or deep-copied env keeps its task and
    so its model's parameters.

    :param protocol: ``"oyster"`` (actions clipped) or ``"varibad"`` (raw actions).
    :param horizon: episode length.
    :param kwargs: passed on to Gymnasium's env (``render_mode``, ``frame_skip``, ...); the
        model, the reward's weights and the observation are the original's, not the caller's.
    """

    xml_file: ClassVar[str] = ""
    fixed_keywords = _FIXED_KEYWORDS

    if TYPE_CHECKING:  # the Gymnasium env this is mixed into
        model: mujoco.MjModel
        data: mujoco.MjData
        frame_skip: int
        render_mode: str | None
        action_space: Any
        observation_space: Space[Any]
        np_random: np.random.Generator

        @property
        def dt(self) -> float: ...

        def do_simulation(self, ctrl: Any, n_frames: int) -> None: ...

        def render(self) -> Any: ...

        def state_vector(self) -> np.ndarray: ...

    def __init__(
        self, protocol: RandParamsProtocol = "oyster", horizon: int = HORIZON, **kwargs: Any
    ) -> None:
        if protocol not in get_args(RandParamsProtocol):
            raise ConfigError(
                f"{type(self).__name__}'s protocol must be 'oyster' or 'varibad', got {protocol!r}"
            )
        check_count("horizon", horizon)
        # Gymnasium's env, next in the MRO
        super().__init__(xml_file=self.xml_file, reset_noise_scale=5e-3, **kwargs)
        utils.EzPickle.__init__(self, protocol, horizon, **kwargs)
        self.protocol = protocol
        self.horizon = horizon
        obs_dim = len(self._get_obs())
        self.observation_space = Box(-np.inf, np.inf, shape=(obs_dim,), dtype=np.float64)
        assert isinstance(self.action_space, Box)  # the actuators' [-1, 1]
        self.action_scaling: ActionScaling | None = (
            ActionScaling(self.action_space, 1.0) if protocol == "oyster" else None
        )
        """rlkit's ``NormalizedBoxEnv`` for ``"oyster"``: ``[-1, 1]`` onto the actuators'
        ``[-1, 1]``, clipped."""
        self.nominal = nominal_parameters(self.model)
        """The randomised fields as loaded, which every task scales."""
        self._start_task_state()

    def _initialize_simulation(self) -> tuple[mujoco.MjModel, mujoco.MjData]:
        model, data = super()._initialize_simulation()  # type: ignore[misc]
        model.opt.timestep = TIMESTEP
        return model, data

    # -- task protocol: TaskState's, with these ----------------------------------------------
    def _public(self, task: dict[str, np.ndarray]) -> dict[str, Any]:
        return {name: values.tolist() for name, values in task.items()}

    def sample_tasks(self, n: int, rng: np.random.Generator | None = None) -> list[Task]:
        """Draw ``n`` tasks as ``rand_param_envs`` does (``rng`` defaults to ``np_random``)."""
        check_n_tasks(n)
        return sample_parameters(self.nominal, n, self.np_random if rng is None else rng)

    def _validated(self, task: Task) -> dict[str, np.ndarray]:
        return validated_parameters(task, self.nominal, type(self).__name__)

    def _use(self, arrays: dict[str, np.ndarray]) -> None:
        """Write the task's parameters into the model at once."""
        for name in RAND_PARAMS:
            getattr(self.model, name)[:] = arrays[name]
        self._task = arrays

    # -- Gymnasium API -------------------------------------------------------------------------
    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self._guard.check()
        action = check_action(action, self.action_space)
        if self.action_scaling is not None:
            action = self.action_scaling(action)
        qpos = self.data.qpos
        x_before = float(qpos[0])
        self.do_simulation(action, self.frame_skip)
        x_after = float(qpos[0])
        forward_reward = (x_after - x_before) / self.dt
        action64 = np.asarray(action, dtype=np.float64)
        ctrl_cost = CTRL_COST_WEIGHT * float(np.dot(action64, action64))
        reward = forward_reward + ALIVE_BONUS - ctrl_cost
        terminated = not self._alive()
        self._steps += 1
        truncated = self._steps >= self.horizon
        if terminated or truncated:
            self._guard.active = False
        if self.render_mode == "human":
            self.render()
        info = {
            "x_position": x_after,
            "x_velocity": forward_reward,
            "reward_forward": forward_reward,
            "reward_ctrl": -ctrl_cost,
            "reward_survive": ALIVE_BONUS,
        }
        return self._get_obs(), reward, terminated, truncated, info

    def _alive(self) -> bool:
        """The original's ``not done``."""
        raise NotImplementedError

    def _get_obs(self) -> np.ndarray:
        data = self.data
        return np.concatenate((data.qpos[1:], np.clip(data.qvel, -10.0, 10.0)))


# MujocoEnv's hint for step is narrower than what Gymnasium's envs return
class WalkerRandParamsEnv(RandParamsEnv, Walker2dEnv):  # type: ignore[misc]
    """Walker-Rand-Params: run forward with a walker whose masses, inertias, damping and
    friction are the task's; reward ``v_x + 1 - 1e-3 |a|^2``.

    :param protocol: ``"oyster"`` (the default, actions clipped) or ``"varibad"`` (raw).
    :param horizon: episode length (200 in both codes).
    :param kwargs: passed on to Gymnasium's ``Walker2dEnv``.

    Example::

        >>> env = WalkerRandParamsEnv()
        >>> obs, info = env.reset(seed=0)
        >>> obs.shape, sorted(info["task"])
        ((17,), ['body_inertia', 'body_mass', 'dof_damping', 'geom_friction'])
    """

    xml_file = "walker2d.xml"

    def _alive(self) -> bool:
        height, angle = self.data.qpos[1:3]
        return bool(0.8 < height < 2.0 and -1.0 < angle < 1.0)


class HopperRandParamsEnv(RandParamsEnv, HopperEnv):  # type: ignore[misc]  # as Walker's
    """Hopper-Rand-Params: hop forward with a hopper whose masses, inertias, damping and
    friction are the task's; reward ``v_x + 1 - 1e-3 |a|^2``.

    :param protocol: ``"oyster"`` (the default, actions clipped) or ``"varibad"`` (raw).
    :param horizon: episode length (200 in both codes).
    :param kwargs: passed on to Gymnasium's ``HopperEnv``.
    """

    xml_file = "hopper.xml"

    def _alive(self) -> bool:
        state = self.state_vector()
        height, angle = state[1:3]
        return bool(
            np.isfinite(state).all()
            and (np.abs(state[2:]) < 100).all()
            and height > 0.7
            and abs(angle) < 0.2
        )
