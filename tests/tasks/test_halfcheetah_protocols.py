"""HalfCheetahVel/Dir's oyster and VariBAD protocols: reward, observation and episode end
recomputed from the MuJoCo state, task sampling against the originals' sampling code, re-done
here.

oyster: ``katerakelly/oyster`` 44e20fd ``rlkit/envs/half_cheetah_vel.py``, ``half_cheetah_dir.py``,
``half_cheetah.py``, ``wrappers.py`` (``NormalizedBoxEnv``), ``configs/cheetah-{vel,dir}.json``;
VariBAD: ``lmzintgraf/varibad`` 57e1795 ``environments/mujoco/half_cheetah_vel.py``,
``half_cheetah_dir.py`` and ``half_cheetah.py``.
"""

from __future__ import annotations

import copy
import itertools
import pickle

import gymnasium as gym
import mujoco
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from scipy import stats

import metabench  # noqa: F401  (registers the ids)
from metabench.tasks.halfcheetah.envs import (
    OYSTER_N_TASKS,
    OYSTER_TASK_COUNTS,
    HalfCheetahDirEnv,
    HalfCheetahVelEnv,
    oyster_tasks,
)
from metabench.tasks.halfcheetah.vector import HalfCheetahDirVectorEnv, HalfCheetahVelVectorEnv
from metabench.validation import ConfigError

pytestmark = pytest.mark.mujoco

PROTOCOLS = ["oyster", "varibad"]
CLASSES = [HalfCheetahVelEnv, HalfCheetahDirEnv]


def normalized_box_action(action: np.ndarray) -> np.ndarray:
    """rlkit's ``NormalizedBoxEnv.step`` around the cheetah's float32 ``Box(-1, 1)``."""
    lb = np.full(6, -1.0, dtype=np.float32)
    ub = np.full(6, 1.0, dtype=np.float32)
    scaled_action = lb + (action + 1.0) * 0.5 * (ub - lb)
    return np.clip(scaled_action, lb, ub)


def original_step(
    task: dict[str, float], xposbefore: float, data: mujoco.MjData, action: np.ndarray, dt: float
) -> tuple[np.ndarray, float, bool]:
    """The originals' ``step`` (identical in oyster and VariBAD) on the state after the physics:
    observation (``HalfCheetahEnv._get_obs``), reward and ``done``."""
    xposafter = data.qpos[0]
    forward_vel = (xposafter - xposbefore) / dt
    if "velocity" in task:
        forward_reward = -1.0 * abs(forward_vel - task["velocity"])
    else:
        forward_reward = task["direction"] * forward_vel
    ctrl_cost = 0.5 * 1e-1 * np.sum(np.square(action))
    observation = (
        np.concatenate([data.qpos.flat[1:], data.qvel.flat, data.body("torso").xpos.flat])
        .astype(np.float32)
        .flatten()
    )
    return observation, float(forward_reward - ctrl_cost), False


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("cls", CLASSES)
def test_check_env_passes(cls, protocol):
    check_env(cls(protocol=protocol), skip_render_check=True)


@pytest.mark.parametrize(
    ("cls", "protocol", "task"),
    [
        (HalfCheetahVelEnv, "oyster", {"velocity": 2.6}),
        (HalfCheetahVelEnv, "varibad", {"velocity": 0.4}),
        (HalfCheetahDirEnv, "oyster", {"direction": -1.0}),
        (HalfCheetahDirEnv, "varibad", {"direction": 1.0}),
    ],
)
def test_physics_reward_and_observation_recomputed_from_the_mujoco_state(cls, protocol, task):
    """Each step is replayed on a copy of the MuJoCo state before it: five ``mj_step`` with the
    original's control (oyster's ``NormalizedBoxEnv`` clips it, VariBAD passes the raw action
    and MuJoCo clamps it), then the original's observation, reward and ``done`` on that copy.
    Actions reach 1.5, so the clipping and the control cost on the raw action both matter."""
    env = cls(protocol=protocol, horizon=200)
    env.reset(seed=2, options={"task": task})
    model, data = env.model, env.data
    dt = model.opt.timestep * 5  # gym's HalfCheetahEnv: frame_skip 5
    rng = np.random.default_rng(0)
    for _ in range(60):
        action = rng.uniform(-1.5, 1.5, size=6).astype(np.float32)
        replay = copy.copy(data)  # MuJoCo's mj_copyData: the whole state, warm start included
        xposbefore = replay.qpos[0]
        control = normalized_box_action(action) if protocol == "oyster" else action
        replay.ctrl[:] = control
        mujoco.mj_step(model, replay, nstep=5)
        obs, reward, terminated, truncated, info = env.step(action)
        np.testing.assert_array_equal(data.qpos, replay.qpos)
        np.testing.assert_array_equal(data.qvel, replay.qvel)
        expected_obs, expected_reward, done = original_step(
            task, xposbefore, replay, control.astype(np.float64), dt
        )
        assert obs.dtype == np.float32 and obs.shape == (20,)
        np.testing.assert_array_equal(obs, expected_obs)
        assert reward == pytest.approx(expected_reward, rel=1e-12, abs=1e-12)
        assert terminated is done
        assert truncated is False
        assert info["reward_ctrl"] == pytest.approx(
            -0.05 * float(np.sum(control.astype(float) ** 2))
        )


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("cls", CLASSES)
def test_spaces_are_the_originals(cls, protocol):
    env = cls(protocol=protocol)
    assert env.observation_space == gym.spaces.Box(-np.inf, np.inf, (20,), np.float32)
    # both codes' policies act in gym's HalfCheetah Box(-1, 1)^6 (NormalizedBoxEnv maps it onto
    # itself): there is no action_scale
    assert env.action_space == gym.spaces.Box(-1.0, 1.0, (6,), np.float32)
    with pytest.raises(ConfigError, match="remove action_scale"):
        cls(protocol=protocol, action_scale=10.0)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_action_path_clips_for_oyster_and_passes_the_raw_action_for_varibad(protocol):
    """An action of 1.5 everywhere: oyster's wrapper turns it into 1.0 (cost 0.05 * 6), VariBAD
    charges the raw 1.5 (cost 0.05 * 6 * 2.25); MuJoCo's control clamp makes the physics the
    same."""
    env = HalfCheetahVelEnv(protocol=protocol)
    env.reset(seed=4, options={"task": {"velocity": 1.0}})
    _, _, _, _, info = env.step(np.full(6, 1.5, dtype=np.float32))
    sent = env.data.ctrl.copy()
    clipped = np.ones(6)
    if protocol == "oyster":
        np.testing.assert_array_equal(sent, clipped)
        assert info["reward_ctrl"] == pytest.approx(-0.05 * 6)
    else:
        np.testing.assert_array_equal(sent, np.full(6, 1.5, dtype=np.float32))
        assert info["reward_ctrl"] == pytest.approx(-0.05 * 6 * 1.5**2)
    reference = HalfCheetahVelEnv(protocol=protocol)
    reference.reset(seed=4, options={"task": {"velocity": 1.0}})
    data = reference.data
    data.ctrl[:] = clipped  # what the actuators see after MuJoCo's clamp
    mujoco.mj_step(reference.model, data, nstep=5)
    np.testing.assert_array_equal(env.data.qpos, data.qpos)


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("cls", CLASSES)
def test_only_the_horizon_ends_an_episode(cls, protocol):
    env = cls(protocol=protocol, horizon=200)  # both codes' 200
    env.reset(seed=0)
    for step in range(1, 201):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        assert terminated is False
        assert truncated is (step == 200)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_velocities_follow_the_originals_sampler(protocol):
    """oyster: ``np.random.uniform(0.0, 3.0, size=(num_tasks,))``; VariBAD:
    ``[random.uniform(0.0, 3.0) for _ in range(n_tasks)]``; on a NumPy generator both are one
    uniform draw per task, in order."""
    env = HalfCheetahVelEnv(protocol=protocol)
    assert env.velocity_range == (0.0, 3.0)
    tasks = env.sample_tasks(500, np.random.default_rng(11))
    rng = np.random.default_rng(11)
    if protocol == "oyster":
        expected = rng.uniform(0.0, 3.0, size=(500,)).tolist()
    else:
        expected = [rng.uniform(0.0, 3.0) for _ in range(500)]
    assert [task["velocity"] for task in tasks] == expected
    many = [t["velocity"] for t in env.sample_tasks(5000, np.random.default_rng(1))]
    assert stats.kstest(many, stats.uniform(0.0, 3.0).cdf).pvalue > 1e-3
    assert HalfCheetahVelEnv(protocol=protocol, velocity_range=(0.5, 1.0)).velocity_range == (
        0.5,
        1.0,
    )
    assert HalfCheetahVelEnv().velocity_range == (0.0, 2.0)  # garage's stays the default


def test_oyster_dir_directions_follow_its_binomial_sampler():
    """oyster's ``2 * self.np_random.binomial(1, p=0.5, size=(num_tasks,)) - 1``."""
    env = HalfCheetahDirEnv(protocol="oyster")
    tasks = env.sample_tasks(400, np.random.default_rng(3))
    expected = 2 * np.random.default_rng(3).binomial(1, p=0.5, size=(400,)) - 1
    assert [task["direction"] for task in tasks] == expected.astype(float).tolist()


def test_varibad_dir_directions_follow_its_choice_sampler():
    """VariBAD's ``[random.choice([-1.0, 1.0]) for _ in range(n_tasks)]``: a fair choice of the
    two directions, each task independent."""
    env = HalfCheetahDirEnv(protocol="varibad")
    directions = [t["direction"] for t in env.sample_tasks(4000, np.random.default_rng(5))]
    assert set(directions) == {-1.0, 1.0}
    forward = directions.count(1.0)
    assert stats.binomtest(forward, len(directions), 0.5).pvalue > 1e-3
    pairs = list(itertools.pairwise(directions))
    repeats = sum(a == b for a, b in pairs)
    assert stats.binomtest(repeats, len(pairs), 0.5).pvalue > 1e-3


def test_oyster_task_lists_and_counts_are_its_configs():
    """cheetah-vel: ``np.random.seed(1337)`` then 130 uniform velocities in [0, 3); train on the
    first 100, test on the last 30. cheetah-dir: ``[-1, 1]``, train and test on both."""
    saved = np.random.get_state()
    try:
        np.random.seed(1337)
        velocities = np.random.uniform(0.0, 3.0, size=(130,))
    finally:
        np.random.set_state(saved)
    assert oyster_tasks("cheetah-vel") == [{"velocity": v} for v in velocities.tolist()]
    assert oyster_tasks("cheetah-dir") == [{"direction": -1.0}, {"direction": 1.0}]
    assert OYSTER_N_TASKS == {"cheetah-vel": 130, "cheetah-dir": 2}
    assert OYSTER_TASK_COUNTS == {"cheetah-vel": (100, 30), "cheetah-dir": (2, 2)}
    n_train, n_eval = OYSTER_TASK_COUNTS["cheetah-vel"]
    assert n_train + n_eval == OYSTER_N_TASKS["cheetah-vel"]  # disjoint train and test tasks
    with pytest.raises(ConfigError, match="use one of"):
        oyster_tasks("ant-dir")


@pytest.mark.parametrize("how", [copy.deepcopy, lambda env: pickle.loads(pickle.dumps(env))])
@pytest.mark.parametrize(
    ("cls", "protocol", "task"),
    [
        (HalfCheetahVelEnv, "oyster", {"velocity": 2.75}),
        (HalfCheetahVelEnv, "varibad", {"velocity": 0.25}),
        (HalfCheetahDirEnv, "oyster", {"direction": -1.0}),
        (HalfCheetahDirEnv, "varibad", {"direction": 1.0}),
    ],
)
def test_a_copy_keeps_the_task_and_the_protocol(cls, protocol, task, how):
    env = cls(protocol=protocol, horizon=200)
    env.set_task(task)
    clone = how(env)
    assert clone.protocol == protocol and clone.task == task and clone.horizon == 200
    assert clone.observation_space == env.observation_space
    assert (clone.action_scaling is None) == (protocol == "varibad")
    if cls is HalfCheetahVelEnv:
        assert clone.velocity_range == (0.0, 3.0)
    obs, _ = env.reset(seed=6)
    clone_obs, _ = clone.reset(seed=6)
    np.testing.assert_array_equal(obs, clone_obs)
    action = np.full(6, 1.25, dtype=np.float32)
    assert env.step(action)[1] == clone.step(action)[1]


@pytest.mark.parametrize("cls", CLASSES)
def test_an_unknown_protocol_is_refused(cls):
    with pytest.raises(ConfigError, match=r"protocol must be one of 'garage', 'oyster'"):
        cls(protocol="pearl")


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize(
    ("name", "vector_cls", "single_cls", "tasks"),
    [
        ("HalfCheetahVel", HalfCheetahVelVectorEnv, HalfCheetahVelEnv,
         [{"velocity": v} for v in (0.3, 1.4, 2.9)]),
        ("HalfCheetahDir", HalfCheetahDirVectorEnv, HalfCheetahDirEnv,
         [{"direction": d} for d in (1.0, -1.0, 1.0)]),
    ],
)  # fmt: skip
def test_the_batched_vector_env_steps_them_as_the_single_env(
    name, vector_cls, single_cls, tasks, protocol
):
    """The same bits as single envs of the protocol, for a whole episode of actions beyond
    [-1, 1] (oyster clips them, VariBAD hands them on and MuJoCo clamps the actuators)."""
    n = len(tasks)
    venv = gym.make_vec(f"metabench/{name}-v0", num_envs=n, protocol=protocol, horizon=20,
                        processes=2).unwrapped  # fmt: skip
    assert isinstance(venv, vector_cls)
    single = single_cls(protocol=protocol, horizon=20)
    assert venv.single_observation_space == single.observation_space  # float32
    assert venv.single_action_space == single.action_space
    obs, _ = venv.reset(seed=0, options={"tasks": tasks})
    qpos, qvel = venv.get_states()
    envs = [single_cls(protocol=protocol, horizon=20) for _ in range(n)]
    for i, env in enumerate(envs):
        env.reset(seed=i, options={"task": tasks[i]})
        mujoco.mj_resetData(env.model, env.data)  # the vector env's start state
        env.set_state(qpos[i], qvel[i])
        np.testing.assert_array_equal(obs[i], env._get_obs())
    rng = np.random.default_rng(3)
    for t in range(20):
        actions = rng.normal(0.0, 1.5, size=(n, 6))
        obs, rewards, terminated, truncated, _ = venv.step(actions)
        assert obs.dtype == np.float32
        for i, env in enumerate(envs):
            obs_i, reward_i, term_i, trunc_i, _ = env.step(actions[i])
            np.testing.assert_array_equal(obs[i], obs_i, err_msg=f"t={t} env {i}")
            assert rewards[i] == reward_i
            assert (terminated[i], truncated[i]) == (term_i, trunc_i)
    assert truncated.all()
    # the protocol's task distribution: oyster's and VariBAD's velocities reach 3
    drawn = venv.sample_tasks(200, np.random.default_rng(0))
    assert drawn == single.sample_tasks(200, np.random.default_rng(0))
    venv.close()
