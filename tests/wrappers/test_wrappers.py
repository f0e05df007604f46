"""RL2Env and Trial: observation element by element, trial semantics, vector-env behaviour."""

import gymnasium as gym
import numpy as np
import pytest
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

from metabench.errors import InvalidActionError, InvalidTaskError, StepBeforeResetError
from metabench.tasks import ListTaskSampler
from metabench.tasks.toy.envs import PointGoalEnv
from metabench.wrappers import (
    EPISODE_END,
    EPISODE_INDEX,
    EPISODE_RETURN,
    EPISODE_SUCCESS,
    FINAL_OBSERVATION,
    RL2Env,
    Trial,
)

HORIZON = 4
GOAL = {"goal": [0.25, -0.1]}


def make_rl2(episodes_per_trial=3, reward_scale=1.0, sampler=None, horizon=HORIZON):
    trial = Trial(PointGoalEnv(horizon=horizon), episodes_per_trial, sampler=sampler)
    return RL2Env(trial, reward_scale=reward_scale)


def test_rl2_observation_element_by_element():
    env = make_rl2(episodes_per_trial=2, reward_scale=0.5)
    obs, _ = env.reset(seed=0, options={"task": GOAL})
    np.testing.assert_array_equal(obs, [0, 0, 0, 0, 0, 0])
    position = np.zeros(2)
    rng = np.random.default_rng(0)
    for t in range(2 * HORIZON):
        action = rng.uniform(-0.1, 0.1, size=2)
        obs, reward, terminated, truncated, info = env.step(action)
        inner_end = (t + 1) % HORIZON == 0
        moved = position + action
        expected_reward = -np.linalg.norm(moved - GOAL["goal"])
        if inner_end and t + 1 < 2 * HORIZON:
            np.testing.assert_allclose(info[FINAL_OBSERVATION], moved)
        # inside the trial an inner end restarts the point at the origin at once
        position = np.zeros(2) if inner_end and t + 1 < 2 * HORIZON else moved
        assert reward == pytest.approx(expected_reward)
        np.testing.assert_allclose(obs[:2], position)
        np.testing.assert_array_equal(obs[2:4], action)
        assert obs[4] == pytest.approx(0.5 * reward)
        assert obs[5] == float(inner_end)
    assert terminated is False and truncated is True


def test_rl2_observation_space_bounds_and_contains():
    env = make_rl2()
    space = env.observation_space
    assert space.shape == (6,)
    np.testing.assert_array_equal(space.low[2:], [-0.1, -0.1, -np.inf, 0.0])
    np.testing.assert_array_equal(space.high[2:], [0.1, 0.1, np.inf, 1.0])
    obs, _ = env.reset(seed=1)
    assert space.contains(obs)
    assert space.contains(env.step(np.array([0.05, -0.05]))[0])


def test_rl2_reset_zeroes_action_reward_and_done():
    env = make_rl2(episodes_per_trial=1)
    env.reset(seed=0)
    for _ in range(HORIZON):
        env.step(np.full(2, 0.1))
    obs, _ = env.reset()
    np.testing.assert_array_equal(obs[2:], np.zeros(4))


def test_zero_at_episode_start_shows_the_policy_what_metaworlds_rnn_wrapper_shows_it() -> None:
    """Meta-World+ trains RL2 on ``RNNBasedMetaRLWrapper`` envs in a vector env with same-step
    autoreset: after an inner episode ends, the policy's next observation is the wrapper's reset
    observation. ``RL2Env(zero_at_episode_start=True)`` around a trial gives the same inputs, step
    for step, on the same task and actions; the default instead carries the ending step."""
    from metaworld.wrappers import RNNBasedMetaRLWrapper

    episodes, scale = 3, 0.1

    def task_env() -> PointGoalEnv:
        env = PointGoalEnv(horizon=HORIZON)
        env.set_task(GOAL)
        return env

    theirs = gym.vector.SyncVectorEnv(
        [lambda: RNNBasedMetaRLWrapper(task_env(), normalize_reward=True)],
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
    )
    ours = RL2Env(Trial(task_env(), episodes), reward_scale=scale, zero_at_episode_start=True)
    carried = RL2Env(Trial(task_env(), episodes), reward_scale=scale)
    their_obs, _ = theirs.reset(seed=0)
    our_obs, _ = ours.reset(seed=0, options={"task": GOAL})
    carried.reset(seed=0, options={"task": GOAL})
    rng = np.random.default_rng(3)
    for t in range(episodes * HORIZON):
        np.testing.assert_allclose(our_obs, their_obs[0], rtol=1e-6, atol=1e-7)
        action = rng.uniform(-0.1, 0.1, size=2)
        their_obs, their_reward, *_ = theirs.step(action[None])
        our_obs, our_reward, *_ = ours.step(action)
        carried_obs = carried.step(action)[0]
        assert our_reward == pytest.approx(float(their_reward[0]))
        inner_start = (t + 1) % HORIZON == 0 and t + 1 < episodes * HORIZON
        if inner_start:  # both restart at the origin; only the carried one shows the end
            np.testing.assert_array_equal(our_obs[2:], np.zeros(4))
            np.testing.assert_array_equal(carried_obs[2:4], action)
            assert carried_obs[5] == 1.0
        else:
            np.testing.assert_array_equal(carried_obs, our_obs)
    theirs.close()


def test_rl2_step_before_reset_raises_runtime_error():
    env = make_rl2()
    with pytest.raises(RuntimeError, match="reset"):
        env.step(np.zeros(2))
    assert issubclass(StepBeforeResetError, RuntimeError)


def test_rl2_one_hot_for_discrete_actions():
    env = RL2Env(gym.make("CartPole-v1"))
    assert env.observation_space.shape == (4 + 2 + 2,)
    env.reset(seed=0)
    obs = env.step(1)[0]
    np.testing.assert_array_equal(obs[4:6], [0.0, 1.0])
    assert obs[6] == 1.0  # CartPole's reward


def test_rl2_rejects_non_flat_observations_and_bad_actions():
    with pytest.raises(ValueError, match="FlattenObservation"):
        RL2Env(gym.make("Blackjack-v1"))
    env = make_rl2()
    env.reset(seed=0)
    with pytest.raises(InvalidActionError):
        env.step(np.array([np.nan, 0.0]))
    with pytest.raises(InvalidActionError):
        env.step(np.zeros(3))


def test_trial_reports_only_its_end_and_inner_ends_in_info():
    env = Trial(PointGoalEnv(horizon=HORIZON), episodes_per_trial=3)
    env.reset(seed=0)
    rewards, ends, indices = [], [], []
    for t in range(3 * HORIZON):
        _, reward, terminated, truncated, info = env.step(np.array([0.1, 0.0]))
        rewards.append(reward)
        indices.append(info[EPISODE_INDEX])
        if info.get(EPISODE_END):
            ends.append(t)
            assert info[EPISODE_RETURN] == pytest.approx(sum(rewards[-HORIZON:]))
        assert (terminated or truncated) == (t == 3 * HORIZON - 1)
    assert ends == [HORIZON - 1, 2 * HORIZON - 1, 3 * HORIZON - 1]
    assert indices == [i // HORIZON for i in range(3 * HORIZON)]
    # each inner episode restarts the point, with the same goal: identical rewards
    np.testing.assert_allclose(rewards[:HORIZON], rewards[HORIZON : 2 * HORIZON])


def test_trial_episode_success_is_any_step():
    env = Trial(PointGoalEnv(horizon=HORIZON), episodes_per_trial=2)
    env.reset(seed=0, options={"task": {"goal": [0.1, 0.0]}})
    infos = [
        env.step(np.array([0.1, 0.0]) if t == 0 else np.array([0.1, 0.1]))[4] for t in range(4)
    ]
    assert infos[-1][EPISODE_SUCCESS] is True  # only the first step was within reach
    infos = [env.step(np.array([-0.1, 0.0]))[4] for _ in range(4)]
    assert infos[-1][EPISODE_SUCCESS] is False


def test_trial_keeps_task_within_a_trial_and_samples_per_trial():
    tasks = [{"goal": [float(i) / 10, 0.0]} for i in range(5)]
    env = Trial(PointGoalEnv(horizon=2), 2, sampler=ListTaskSampler(tasks))
    seen = []
    env.reset(seed=0)
    for _ in range(6):
        task = env.task
        for _ in range(4):
            assert env.unwrapped.task == task
            env.step(np.zeros(2))
        seen.append(task["goal"][0])
        env.reset()
    assert len(set(seen)) > 1
    again = Trial(PointGoalEnv(horizon=2), 2, sampler=ListTaskSampler(tasks))
    again.reset(seed=0)
    assert again.task["goal"][0] == seen[0]


def test_trial_set_task_pins_and_reset_option_overrides_once():
    env = Trial(PointGoalEnv(horizon=2), 1)
    env.set_task(GOAL)
    for seed in range(3):
        env.reset(seed=seed)
        assert env.task == GOAL
    other = {"goal": [0.0, 0.4]}
    env.reset(options={"task": other})
    assert env.task == other
    env.reset()
    assert env.task == GOAL
    env.set_task(None)
    env.reset(seed=0)
    assert env.task != GOAL


def test_trial_set_task_validates_immediately():
    env = Trial(PointGoalEnv(), 2)
    with pytest.raises(InvalidTaskError):
        env.set_task({"velocity": 1.0})


@pytest.mark.parametrize("n", [0, -2, 1.5, True])
def test_trial_rejects_bad_episodes_per_trial(n):
    with pytest.raises(ValueError, match="episodes_per_trial"):
        Trial(PointGoalEnv(), n)


def test_trial_step_past_end_raises():
    env = Trial(PointGoalEnv(horizon=1), 2)
    env.reset(seed=0)
    env.step(np.zeros(2))
    env.step(np.zeros(2))
    with pytest.raises(StepBeforeResetError):
        env.step(np.zeros(2))


@pytest.mark.parametrize("vec_cls", [DummyVecEnv, SubprocVecEnv])
def test_sb3_vec_env_sees_done_only_at_trial_end(vec_cls):
    venv = vec_cls([lambda: make_rl2(episodes_per_trial=3)] * 2)
    venv.seed(0)
    venv.reset()
    dones, flags = [], []
    for _ in range(2 * 3 * HORIZON):
        obs, _, done, _ = venv.step(np.zeros((2, 2)))
        dones.append(done.copy())
        flags.append(obs[:, -1].copy())
    venv.close()
    dones, flags = np.array(dones), np.array(flags)
    trial_ends = [3 * HORIZON - 1, 6 * HORIZON - 1]
    assert np.flatnonzero(dones[:, 0]).tolist() == trial_ends
    assert (dones[:, 0] == dones[:, 1]).all()
    # inner ends show in the done flag of the observation (not at trial ends: SB3 auto-resets)
    inner_ends = [t for t in range(6 * HORIZON) if (t + 1) % HORIZON == 0 and t not in trial_ends]
    assert np.flatnonzero(flags[:, 0]).tolist() == inner_ends


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_gymnasium_vector_env_runs_trials(mode):
    vector_cls = gym.vector.SyncVectorEnv if mode == "sync" else gym.vector.AsyncVectorEnv
    env = vector_cls([lambda: make_rl2(episodes_per_trial=2)] * 2)
    env.reset(seed=0)
    ends = []
    for t in range(2 * HORIZON):
        _, _, terminated, truncated, _ = env.step(np.zeros((2, 2)))
        if (terminated | truncated).any():
            ends.append(t)
    env.close()
    assert ends == [2 * HORIZON - 1]


def test_trial_rejects_a_sampler_that_cannot_draw_one_task():
    class PairsOnly(ListTaskSampler):
        def check_batch_size(self, n):
            if n % 2:
                raise ValueError("valid sizes are multiples of 2")

    with pytest.raises(ValueError, match="make_meta_vec_env"):
        Trial(PointGoalEnv(), 2, sampler=PairsOnly([GOAL, GOAL]))
