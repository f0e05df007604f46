"""The toy task envs that need no MuJoCo: PointGoal and Bandit."""

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from metabench.errors import InvalidActionError, InvalidTaskError, StepBeforeResetError
from metabench.tasks.toy.envs import BanditEnv, PointGoalEnv


@pytest.mark.parametrize("cls", [PointGoalEnv, BanditEnv])
def test_check_env_passes(cls):
    check_env(cls(), skip_render_check=True)


def test_point_goal_reward_is_negative_distance_after_clipped_move():
    env = PointGoalEnv()
    env.reset(seed=0, options={"task": {"goal": [0.3, -0.2]}})
    _, reward, *_ = env.step(np.array([0.1, 0.0]))
    assert reward == pytest.approx(-np.hypot(0.3 - 0.1, -0.2))
    # an action beyond max_step moves only max_step
    position, reward, *_ = env.step(np.array([0.1, -0.1]))
    np.testing.assert_allclose(position, [0.2, -0.1])


def test_bandit_pays_only_the_best_arm_once_per_episode():
    env = BanditEnv(n_arms=4)
    for arm in range(4):
        env.reset(seed=0, options={"task": {"best_arm": 2}})
        _, reward, terminated, truncated, info = env.step(arm)
        assert reward == float(arm == 2) and info["success"] == (arm == 2)
        assert (terminated, truncated) == (True, False)
    with pytest.raises(StepBeforeResetError):
        env.step(0)


@pytest.mark.parametrize(
    "task", [{"best_arm": 3}, {"best_arm": -1}, {"best_arm": 1.5}, {"arm": 0}, {"best_arm": True}]
)
def test_bandit_rejects_tasks_outside_its_arms(task):
    with pytest.raises(InvalidTaskError):
        BanditEnv(n_arms=3).set_task(task)


def test_bandit_samples_every_arm_and_rejects_bad_pulls():
    env = BanditEnv(n_arms=3)
    assert {t["best_arm"] for t in env.sample_tasks(60, np.random.default_rng(0))} == {0, 1, 2}
    env.reset(seed=0)
    for bad in (3, -1, 0.5):
        with pytest.raises(InvalidActionError):
            env.step(bad)
    with pytest.raises(ValueError, match="n_arms"):
        BanditEnv(n_arms=1)
