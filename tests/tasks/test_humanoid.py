"""Humanoid-Dir: reward, termination and observation recomputed from the MuJoCo state, the
action path of each protocol, and the direction distribution against the originals' sampling
code, re-done here.

oyster: ``katerakelly/oyster`` 44e20fd ``rlkit/envs/humanoid_dir.py`` and ``wrappers.py``
(``NormalizedBoxEnv``); VariBAD: ``lmzintgraf/varibad`` 57e1795
``environments/mujoco/humanoid_dir.py``; gym 0.12.1 ``gym/envs/mujoco/humanoid.py`` for the reset.
"""

from __future__ import annotations

import copy
import math
import pickle
import random
from typing import Any

import mujoco
import numpy as np
import pytest
from gymnasium.envs.mujoco.humanoid_v5 import HumanoidEnv
from gymnasium.spaces import Box
from gymnasium.utils.env_checker import check_env
from scipy import stats

from metabench.errors import InvalidTaskError, StepBeforeResetError
from metabench.tasks.humanoid.envs import OYSTER_TASK_COUNTS, HumanoidDirEnv
from metabench.validation import ConfigError

pytestmark = pytest.mark.mujoco

NU = 17
CTRL_BOUND = np.float32(0.4)  # humanoid.xml's ctrlrange, as gym's float32 Box holds it


def original_control(protocol: str, action: np.ndarray) -> np.ndarray:
    """What reaches ``data.ctrl``: rlkit's ``NormalizedBoxEnv.step`` around gym's float32
    ``Box(-0.4, 0.4)`` (oyster), or VariBAD's ``action * self.action_scale``."""
    if protocol == "oyster":
        lb = np.full(NU, -CTRL_BOUND, dtype=np.float32)
        ub = np.full(NU, CTRL_BOUND, dtype=np.float32)
        scaled_action = lb + (action + 1.0) * 0.5 * (ub - lb)
        return np.clip(scaled_action, lb, ub)
    return action * CTRL_BOUND


def mass_center(model: mujoco.MjModel, data: mujoco.MjData) -> np.ndarray:
    mass = np.expand_dims(model.body_mass, 1)
    return np.sum(mass * data.xipos, 0) / np.sum(mass)


def original_step(
    goal: float, model: mujoco.MjModel, before: np.ndarray, data: mujoco.MjData
) -> tuple[float, bool, float]:
    """The originals' ``HumanoidDirEnv.step`` on the state after the physics: reward, ``done``
    and the impact cost."""
    pos_after = mass_center(model, data)[:2]
    goal_direction = (np.cos(goal), np.sin(goal))
    lin_vel_cost = 0.25 * np.sum(goal_direction * (pos_after - before)) / model.opt.timestep
    quad_ctrl_cost = 0.1 * np.square(data.ctrl).sum()
    quad_impact_cost = 0.5e-6 * np.square(data.cfrc_ext).sum()
    quad_impact_cost = min(quad_impact_cost, 10)
    reward = lin_vel_cost - quad_ctrl_cost - quad_impact_cost + 5.0
    qpos = data.qpos
    done = bool((qpos[2] < 1.0) or (qpos[2] > 2.0))
    return float(reward), done, float(quad_impact_cost)


def original_observation(data: mujoco.MjData) -> np.ndarray:
    return np.concatenate(
        [
            data.qpos.flat[2:],
            data.qvel.flat,
            data.cinert.flat,
            data.cvel.flat,
            data.qfrc_actuator.flat,
            data.cfrc_ext.flat,
        ]
    )


@pytest.mark.parametrize("protocol", ["oyster", "varibad"])
def test_check_env_passes(protocol):
    check_env(HumanoidDirEnv(protocol=protocol), skip_render_check=True)


@pytest.mark.parametrize(
    ("protocol", "angle", "drop"),
    [("oyster", 2.2, False), ("varibad", 5.0, False), ("oyster", 0.0, True)],
)
def test_physics_reward_and_observation_recomputed_from_the_mujoco_state(protocol, angle, drop):
    """Each step is replayed on a copy of the MuJoCo state before it: five ``mj_step`` with the
    original's control, then the original's reward, ``done`` and observation on that copy.
    Actions reach 1.5, so oyster's clipping and VariBAD's unclipped control (MuJoCo clamps it,
    the control cost does not) both matter; ``drop`` starts the body sunk into the floor and
    falling, so the impact cost reaches its cap of 10."""
    env = HumanoidDirEnv(protocol=protocol)
    env.reset(seed=1, options={"task": {"angle": angle}})
    model, data = env.model, env.data
    if drop:
        qpos, qvel = data.qpos.copy(), data.qvel.copy()
        qpos[2], qvel[2] = 0.6, -5.0
        env.set_state(qpos, qvel)
    rng = np.random.default_rng(0)
    impacts = []
    for _ in range(60):
        action = rng.uniform(-1.5, 1.5, size=NU).astype(np.float32)
        replay = copy.copy(data)  # MuJoCo's mj_copyData: the whole state, warm start included
        before = mass_center(model, replay)[:2]
        control = original_control(protocol, action)
        replay.ctrl[:] = control
        mujoco.mj_step(model, replay, nstep=5)
        mujoco.mj_rnePostConstraint(model, replay)
        obs, reward, terminated, truncated, info = env.step(action)
        np.testing.assert_array_equal(data.ctrl, control)
        np.testing.assert_array_equal(data.qpos, replay.qpos)
        np.testing.assert_array_equal(data.qvel, replay.qvel)
        np.testing.assert_array_equal(obs, original_observation(replay))
        expected, done, impact = original_step(angle, model, before, replay)
        assert reward == pytest.approx(expected, rel=1e-12, abs=1e-12)
        assert terminated is done
        assert truncated is False
        # 0.25 / timestep is 1.25 / dt: Gymnasium's forward_reward_weight on the velocity
        velocity = (mass_center(model, replay)[:2] - before) / env.dt
        direction = np.array([math.cos(angle), math.sin(angle)])
        assert info["reward_task"] == pytest.approx(1.25 * velocity @ direction, abs=1e-9)
        assert info["reward_survive"] == 5.0
        impacts.append(impact)
        if terminated:
            break
    assert max(impacts) > 0  # the contact forces are computed, as under MuJoCo 1.50
    assert (max(impacts) == 10) is drop


@pytest.mark.parametrize("protocol", ["oyster", "varibad"])
def test_the_policy_acts_in_the_unit_box_mapped_onto_the_ctrlrange(protocol):
    """Inside ``[-1, 1]`` both codes send ``0.4 a`` to the actuators; outside, oyster clips to
    the ctrlrange and VariBAD does not."""
    env = HumanoidDirEnv(protocol=protocol)
    assert isinstance(env.action_space, Box)
    assert env.action_space.shape == (NU,)
    np.testing.assert_array_equal(env.action_space.low, -1.0)
    np.testing.assert_array_equal(env.action_space.high, 1.0)
    np.testing.assert_array_equal(env.model.actuator_ctrlrange, [[-0.4, 0.4]] * NU)
    env.reset(seed=0)
    action = np.linspace(-1.5, 1.5, NU, dtype=np.float32)
    env.step(action)
    inside = np.abs(action) <= 1.0
    np.testing.assert_allclose(env.data.ctrl[inside], 0.4 * action[inside], rtol=1e-6)
    expected_outside = np.sign(action) * (0.4 if protocol == "oyster" else 0.4 * np.abs(action))
    np.testing.assert_allclose(env.data.ctrl[~inside], expected_outside[~inside], rtol=1e-6)


def test_observation_is_humanoid_v2s_376_floats_and_v5s_348_with_the_zero_entries():
    """gym's ``Humanoid-v2`` layout; dropping the world body's ``cinert``, ``cvel`` and
    ``cfrc_ext`` and the free joint's ``qfrc_actuator`` gives Gymnasium's v5 observation."""
    env = HumanoidDirEnv()
    obs, _ = env.reset(seed=3)
    for _ in range(10):
        obs, *_ = env.step(env.action_space.sample())
    model = env.model
    sizes = {
        "qpos": model.nq - 2,
        "qvel": model.nv,
        "cinert": 10 * model.nbody,
        "cvel": 6 * model.nbody,
        "qfrc_actuator": model.nv,
        "cfrc_ext": 6 * model.nbody,
    }
    assert (model.nq, model.nv, model.nbody) == (24, 23, 14)
    assert obs.shape == env.observation_space.shape == (sum(sizes.values()),) == (376,)
    starts = np.cumsum([0, *sizes.values()])
    block = dict(zip(sizes, starts[:-1], strict=True))
    dropped = np.r_[
        block["cinert"] : block["cinert"] + 10,
        block["cvel"] : block["cvel"] + 6,
        block["qfrc_actuator"] : block["qfrc_actuator"] + 6,
        block["cfrc_ext"] : block["cfrc_ext"] + 6,
    ]
    np.testing.assert_array_equal(obs[dropped], 0.0)
    np.testing.assert_array_equal(np.delete(obs, dropped), HumanoidEnv._get_obs(env))


def test_reset_is_gyms_uniform_noise_of_001_with_the_start_contact_forces():
    """gym's ``HumanoidEnv.reset_model``: ``init_qpos`` and ``init_qvel`` plus U(+-0.01), drawn
    in that order from the seeded generator; the observation as mujoco-py's ``forward`` left
    the data."""
    env = HumanoidDirEnv()
    obs, _ = env.reset(seed=5, options={"task": {"angle": 1.0}})
    rng = np.random.default_rng(5)
    np.testing.assert_array_equal(
        env.data.qpos, env.init_qpos + rng.uniform(low=-0.01, high=0.01, size=env.model.nq)
    )
    np.testing.assert_array_equal(
        env.data.qvel, env.init_qvel + rng.uniform(low=-0.01, high=0.01, size=env.model.nv)
    )
    replay = mujoco.MjData(env.model)
    replay.qpos[:], replay.qvel[:] = env.data.qpos, env.data.qvel
    mujoco.mj_forward(env.model, replay)
    mujoco.mj_rnePostConstraint(env.model, replay)
    np.testing.assert_array_equal(obs, original_observation(replay))


@pytest.mark.parametrize("height", [0.5, 0.95, 1.4, 2.2])
def test_termination_when_the_torso_leaves_1_to_2(height):
    """``done = qpos[2] < 1 or qpos[2] > 2``, the alive bonus paid on the last step too. The
    body is laid horizontal, so that no foot touches the floor at any of these heights."""
    env = HumanoidDirEnv()
    env.reset(seed=0)
    qpos, qvel = env.data.qpos.copy(), env.data.qvel.copy()
    qpos[2] = height
    qpos[3:7] = [math.cos(math.pi / 4), 0.0, math.sin(math.pi / 4), 0.0]
    env.set_state(qpos, qvel)
    _, _, terminated, truncated, info = env.step(np.zeros(NU, dtype=np.float32))
    z = env.data.qpos[2]
    assert terminated is bool(z < 1.0 or z > 2.0)
    assert terminated is (height != 1.4)
    assert truncated is False
    assert info["reward_survive"] == 5.0
    if terminated:  # a terminated episode cannot go on
        with pytest.raises(StepBeforeResetError):
            env.step(np.zeros(NU, dtype=np.float32))


def test_horizon_truncates_after_200_steps_by_default():
    env = HumanoidDirEnv(horizon=3)
    assert HumanoidDirEnv().horizon == 200
    env.reset(seed=0)
    assert [env.step(np.zeros(NU, dtype=np.float32))[3] for _ in range(3)] == [False, False, True]


def oyster_directions(num_tasks: int) -> np.ndarray:
    """oyster's ``sample_tasks`` (its ``np.random``: a legacy generator here)."""
    return np.random.RandomState(7).uniform(0.0, 2.0 * np.pi, size=(num_tasks,))


def varibad_directions(num_tasks: int) -> list[float]:
    """VariBAD's ``sample_tasks`` (Python's ``random``, seeded here)."""
    generator = random.Random(11)
    return [generator.uniform(0.0, 2.0 * np.pi) for _ in range(num_tasks)]


@pytest.mark.parametrize(
    ("protocol", "original"), [("oyster", oyster_directions), ("varibad", varibad_directions)]
)
def test_directions_follow_the_originals_sampler(protocol, original):
    env = HumanoidDirEnv(protocol=protocol)
    angles = np.array([t["angle"] for t in env.sample_tasks(4000, np.random.default_rng(3))])
    assert angles.min() >= 0.0
    assert angles.max() < 2 * math.pi
    assert stats.ks_2samp(angles, original(4000)).pvalue > 0.01


def test_sample_tasks_defaults_to_the_envs_generator():
    env = HumanoidDirEnv()
    env.reset(seed=4)
    state = copy.deepcopy(env.np_random)
    assert env.sample_tasks(3) == HumanoidDirEnv().sample_tasks(3, state)


def test_oyster_task_counts_are_its_config():
    assert OYSTER_TASK_COUNTS == {"humanoid-dir": (100, 30)}


@pytest.mark.parametrize("how", [copy.deepcopy, lambda env: pickle.loads(pickle.dumps(env))])
def test_a_copy_keeps_the_task_and_the_protocol(how):
    env = HumanoidDirEnv(protocol="varibad", horizon=9)
    env.set_task({"angle": 0.5})
    copied = how(env)
    assert (copied.task, copied.protocol, copied.horizon) == ({"angle": 0.5}, "varibad", 9)
    assert copied.action_scaling is None
    assert copied.observation_space.shape == (376,)
    assert copied.reset(seed=0)[1]["task"] == {"angle": 0.5}


def test_unseeded_reset_keeps_the_task_and_a_seeded_one_redraws_the_envs_own():
    env = HumanoidDirEnv()
    drawn_task = env.reset(seed=1)[1]["task"]
    assert env.reset()[1]["task"] == drawn_task
    assert env.reset(seed=2)[1]["task"] != drawn_task
    assert env.reset(seed=1)[1]["task"] == drawn_task


@pytest.mark.parametrize(
    "task",
    [{"goal": 1.0}, {"angle": float("inf")}, {"angle": "0"}, {"angle": True}, 0.5, None],
)
def test_invalid_tasks_raise_and_leave_the_env_as_it_was(task: Any) -> None:
    env = HumanoidDirEnv()
    env.reset(seed=0, options={"task": {"angle": 0.25}})
    with pytest.raises(InvalidTaskError):
        env.set_task(task)
    with pytest.raises(InvalidTaskError):
        env.reset(options={"task": task})
    assert env.task == {"angle": 0.25}


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"protocol": "pearl"}, ConfigError, "'oyster', 'varibad'"),
        ({"healthy_reward": 1.0}, ConfigError, "healthy_reward"),
        ({"include_cfrc_ext_in_observation": False}, ConfigError, "include_cfrc_ext"),
        ({"horizn": 10}, ConfigError, "horizon"),
        ({"horizon": 0}, ValueError, "horizon"),
    ],
)
def test_bad_arguments_raise_naming_the_fix(kwargs, error, match):
    with pytest.raises(error, match=match):
        HumanoidDirEnv(**kwargs)
