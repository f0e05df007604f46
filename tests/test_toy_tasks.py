"""The toy task envs that need no MuJoCo: PointGoal and HiddenSide."""

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from metabench.errors import InvalidActionError, InvalidTaskError, StepBeforeResetError
from metabench.tasks.toy import HiddenSideEnv, PointGoalEnv


@pytest.mark.parametrize("cls", [PointGoalEnv, HiddenSideEnv])
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


@pytest.mark.parametrize("side", [-1.0, 1.0])
def test_hidden_side_pays_side_times_position_at_the_last_step_only(side):
    env = HiddenSideEnv(max_step=0.2, horizon=4)
    env.reset(seed=0, options={"task": {"side": side}})
    actions = [1, 1, 0, 1]  # right, right, left, right
    rewards = [env.step(a)[1] for a in actions]
    assert rewards[:3] == [0.0, 0.0, 0.0]
    assert rewards[3] == pytest.approx(side * 0.2 * (1 + 1 - 1 + 1))
    with pytest.raises(StepBeforeResetError):
        env.step(0)


def test_hidden_side_observation_hides_the_side():
    observations = []
    for side in (-1.0, 1.0):
        env = HiddenSideEnv()
        obs, _ = env.reset(seed=0, options={"task": {"side": side}})
        observations.append([obs, *(env.step(1)[0] for _ in range(4))])
    np.testing.assert_array_equal(np.array(observations[0]), np.array(observations[1]))


@pytest.mark.parametrize("action", [2, -1, 0.5, np.array([1])])
def test_hidden_side_rejects_invalid_actions(action):
    env = HiddenSideEnv()
    env.reset(seed=0)
    with pytest.raises(InvalidActionError):
        env.step(action)


def test_hidden_side_tasks_are_both_sides_and_validated():
    env = HiddenSideEnv()
    assert {t["side"] for t in env.sample_tasks(40, np.random.default_rng(0))} == {-1.0, 1.0}
    for bad in ({"side": 0.5}, {"goal": 1.0}, 1.0):
        with pytest.raises(InvalidTaskError):
            env.set_task(bad)
