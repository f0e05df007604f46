"""HalfCheetahVel/Dir: observation and reward recomputed from the MuJoCo state, task protocol."""

import numpy as np
import pytest
from gymnasium.spaces import Box
from gymnasium.utils.env_checker import check_env

from metabench.errors import InvalidActionError, InvalidTaskError, StepBeforeResetError
from metabench.tasks.halfcheetah.envs import HalfCheetahDirEnv, HalfCheetahVelEnv

pytestmark = pytest.mark.mujoco


@pytest.mark.parametrize("cls", [HalfCheetahVelEnv, HalfCheetahDirEnv])
def test_check_env_passes(cls):
    check_env(cls(), skip_render_check=True)


def test_observation_is_garage_layout():
    env = HalfCheetahVelEnv()
    obs, _ = env.reset(seed=3)
    for _ in range(5):
        obs, *_ = env.step(env.action_space.sample())
    data = env.unwrapped.data
    assert obs.shape == (20,)
    np.testing.assert_array_equal(obs[:8], data.qpos[1:])
    np.testing.assert_array_equal(obs[8:17], data.qvel)
    np.testing.assert_array_equal(obs[17:], data.body("torso").xpos)


@pytest.mark.parametrize(
    ("cls", "task", "task_reward"),
    [
        (HalfCheetahVelEnv, {"velocity": 1.3}, lambda v: -abs(v - 1.3)),
        (HalfCheetahDirEnv, {"direction": -1.0}, lambda v: -v),
        (HalfCheetahDirEnv, {"direction": 1.0}, lambda v: v),
    ],
)
def test_reward_recomputed_from_mujoco_positions(cls, task, task_reward):
    env = cls()
    env.reset(seed=0, options={"task": task})
    rng = np.random.default_rng(0)
    for _ in range(30):
        action = rng.uniform(-1, 1, size=6).astype(np.float32)  # the action space dtype
        x_before = float(env.data.qpos[0])
        _, reward, terminated, _, _ = env.step(action)
        velocity = (float(env.data.qpos[0]) - x_before) / (env.model.opt.timestep * 5)
        expected = task_reward(velocity) - 0.05 * float(np.sum(action.astype(np.float64) ** 2))
        assert reward == pytest.approx(expected, rel=1e-9, abs=1e-12)
        assert terminated is False


def test_horizon_truncates_and_stepping_past_it_raises():
    env = HalfCheetahVelEnv(horizon=7)
    env.reset(seed=0)
    truncs = [env.step(np.zeros(6))[3] for _ in range(7)]
    assert truncs == [False] * 6 + [True]
    with pytest.raises(StepBeforeResetError, match="reset"):
        env.step(np.zeros(6))


def test_step_before_reset_raises():
    with pytest.raises(StepBeforeResetError):
        HalfCheetahVelEnv().step(np.zeros(6))


@pytest.mark.parametrize(
    "action", [np.zeros(5), np.zeros((2, 6)), np.array([np.nan] + [0.0] * 5), np.full(6, np.inf)]
)
def test_bad_actions_raise(action):
    env = HalfCheetahVelEnv()
    env.reset(seed=0)
    with pytest.raises(InvalidActionError):
        env.step(action)


def test_sampled_tasks_follow_the_configured_range_and_seed():
    env = HalfCheetahVelEnv(velocity_range=(0.0, 3.0))
    tasks = env.sample_tasks(500, rng=np.random.default_rng(1))
    velocities = np.array([t["velocity"] for t in tasks])
    assert velocities.min() >= 0.0 and velocities.max() <= 3.0
    assert velocities.max() > 2.5  # uses the whole (0, 3) range, not garage's (0, 2)
    assert tasks == env.sample_tasks(500, rng=np.random.default_rng(1))
    directions = {
        t["direction"] for t in HalfCheetahDirEnv().sample_tasks(50, np.random.default_rng(0))
    }
    assert directions == {-1.0, 1.0}


def test_same_seed_same_task_and_trajectory():
    def rollout(seed):
        env = HalfCheetahVelEnv()
        obs, info = env.reset(seed=seed)
        rewards = [env.step(np.full(6, 0.3))[1] for _ in range(10)]
        return obs, info["task"], rewards

    first, second, other = rollout(5), rollout(5), rollout(6)
    np.testing.assert_array_equal(first[0], second[0])
    assert first[1] == second[1] and first[2] == second[2]
    assert first[1] != other[1]


def test_task_set_by_reset_option_and_set_task_is_json_plain():
    env = HalfCheetahVelEnv()
    _, info = env.reset(seed=0, options={"task": {"velocity": 2}})
    assert info["task"] == {"velocity": 2.0} and env.task == {"velocity": 2.0}
    env.set_task({"velocity": 0.5})
    assert env.reset()[1]["task"] == {"velocity": 0.5}


@pytest.mark.parametrize(
    "task",
    [{"direction": 1.0}, {"velocity": "fast"}, {"velocity": float("nan")}, 1.0, {"velocity": True}],
)
def test_wrong_task_for_vel_raises(task):
    with pytest.raises(InvalidTaskError):
        HalfCheetahVelEnv().set_task(task)


def test_direction_must_be_plus_or_minus_one():
    with pytest.raises(InvalidTaskError, match=r"-1\.0 or 1\.0"):
        HalfCheetahDirEnv().set_task({"direction": 0.5})


def test_invalid_task_in_reset_options_leaves_env_unchanged():
    env = HalfCheetahVelEnv()
    env.reset(seed=0, options={"task": {"velocity": 1.0}})
    with pytest.raises(InvalidTaskError):
        env.reset(options={"task": {"direction": 1.0}})
    assert env.task == {"velocity": 1.0}


@pytest.mark.parametrize("horizon", [0, -1, 2.5])
def test_bad_horizon_raises(horizon):
    with pytest.raises(ValueError, match="horizon"):
        HalfCheetahVelEnv(horizon=horizon)


@pytest.mark.parametrize(
    ("cls", "task", "task_reward"),
    [
        (HalfCheetahVelEnv, {"velocity": 0.8}, lambda v: -abs(v - 0.8)),
        (HalfCheetahDirEnv, {"direction": -1.0}, lambda v: -v),
    ],
)
def test_action_scale_maps_policy_actions_as_garage_normalize(cls, task, task_reward):
    """garage's normalize(expected_action_scale=10): the actuators receive clip(a / 10, -1, 1)
    and the control cost is computed on that, recomputed here in float64 from the MuJoCo state."""
    env = cls(action_scale=10.0)
    assert env.action_space == Box(-10.0, 10.0, (6,), np.float32)
    env.reset(seed=0, options={"task": task})
    rng = np.random.default_rng(1)
    for _ in range(30):
        action = rng.normal(0.0, 8.0, size=6).astype(np.float32)  # some beyond +-10: clipped
        x_before = float(env.data.qpos[0])
        _, reward, *_ = env.step(action)
        expected_ctrl = np.clip(action.astype(np.float64) / 10.0, -1.0, 1.0)
        np.testing.assert_allclose(env.data.ctrl, expected_ctrl, rtol=1e-6, atol=1e-7)
        velocity = (float(env.data.qpos[0]) - x_before) / (env.model.opt.timestep * 5)
        expected = task_reward(velocity) - 0.05 * float(np.sum(expected_ctrl**2))
        assert reward == pytest.approx(expected, rel=1e-6, abs=1e-6)


def test_action_scale_of_zero_is_zero_and_unscaled_env_is_unchanged():
    scaled, plain = HalfCheetahVelEnv(action_scale=10.0), HalfCheetahVelEnv()
    assert plain.action_space == Box(-1.0, 1.0, (6,), np.float32)
    for env in (scaled, plain):
        env.reset(seed=4, options={"task": {"velocity": 1.0}})
    for _ in range(5):
        obs_s, rew_s, *_ = scaled.step(np.zeros(6))
        obs_p, rew_p, *_ = plain.step(np.zeros(6))
        np.testing.assert_array_equal(obs_s, obs_p)
        assert rew_s == rew_p


@pytest.mark.parametrize("scale", [0.0, -1.0, float("nan"), float("inf"), True, "10"])
def test_action_scale_must_be_a_positive_number(scale):
    with pytest.raises(ValueError, match="action_scale"):
        HalfCheetahVelEnv(action_scale=scale)
