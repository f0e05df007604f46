"""RL2-PPO: trial-shaped rollouts, exact resume, the meta-test policies, and (slow) learning."""

import gymnasium as gym
import numpy as np
import pytest

import metabench  # noqa: F401 - registers the ids
from metabench.algos.nop import NOP
from metabench.algos.registry import get_algorithm
from metabench.algos.rl2.algorithm import RL2PPO, RL2PPOConfig
from metabench.harness.benchmarks import get_benchmark
from metabench.harness.run import make_evaluator
from metabench.wrappers import RL2Env, Trial

LEARNING_ITERATIONS = 100  # 19,200 env steps; six seeds tried here were optimal after 50
SMALL = RL2PPOConfig(meta_batch_size=4, episodes_per_trial=2, hidden_size=8, n_epochs=2)


def parameters(algo: RL2PPO) -> list[np.ndarray]:
    return [p.detach().numpy().copy() for p in algo.model.policy.parameters()]


def test_one_iteration_is_one_trial_per_sub_env():
    algo = RL2PPO("metabench/PointGoal-v0", config=SMALL, env_kwargs={"horizon": 3})
    assert algo.trial_length == 6 and algo.steps_per_iteration == 24
    algo.train(2)
    assert algo.env_steps == 48 == algo.model.num_timesteps
    # after training the buffer is flattened env-major: (n_envs * n_steps, 1)
    starts = algo.model.rollout_buffer.episode_starts.reshape(4, 6)
    np.testing.assert_array_equal(starts[:, 0], 1.0)  # the hidden state resets at trial starts only
    np.testing.assert_array_equal(starts[:, 1:], 0.0)


def test_meta_train_stats_cover_each_episode_of_the_trial():
    algo = RL2PPO("metabench/Bandit-v0", config=SMALL)
    stats = algo.train(1)
    assert set(stats) == {
        "metatrain/return_episode_1",
        "metatrain/return_episode_2",
        "metatrain/average_return",
        "metatrain/success_rate",
    }
    assert stats["metatrain/average_return"] == pytest.approx(
        (stats["metatrain/return_episode_1"] + stats["metatrain/return_episode_2"]) / 2
    )


def test_resume_from_state_dict_continues_exactly():
    def make():
        return RL2PPO("metabench/Bandit-v0", config=SMALL, seed=3)

    straight = make()
    straight.train(2)
    first = make()
    first.train(1)
    state = first.state_dict()
    resumed = make()
    resumed.load_state_dict(state)
    resumed.train(1)
    assert resumed.iterations == 2 and resumed.model.num_timesteps == straight.model.num_timesteps
    for a, b in zip(parameters(straight), parameters(resumed), strict=True):
        np.testing.assert_array_equal(a, b)


def test_checkpoint_of_another_config_is_refused():
    state = RL2PPO("metabench/Bandit-v0", config=SMALL).state_dict()
    other = RL2PPO("metabench/Bandit-v0", config=RL2PPOConfig(meta_batch_size=2))
    with pytest.raises(ValueError, match="different RL2PPOConfig"):
        other.load_state_dict(state)


def test_exploration_policy_keeps_its_state_across_episodes():
    config = RL2PPOConfig(deterministic_eval=True, meta_batch_size=2)
    algo = RL2PPO("metabench/PointGoal-v0", config=config)
    env = algo.wrap_env(Trial(gym.make("metabench/PointGoal-v0").unwrapped, 2))
    obs, _ = env.reset(seed=0)
    kept, fresh = algo.get_exploration_policy(), algo.get_exploration_policy()
    for _ in range(5):
        kept.get_action(obs)
    kept.reset()  # an episode start: RL2 keeps its memory
    assert not np.array_equal(kept.get_action(obs), fresh.get_action(obs))
    again = algo.get_exploration_policy()
    np.testing.assert_array_equal(
        again.get_action(obs), algo.get_exploration_policy().get_action(obs)
    )


def test_adapted_policy_starts_every_test_episode_from_the_explored_state():
    """garage's RL2AdaptedPolicy: each test episode acts from the hidden state exploration
    ended with, not from where the previous test episode left it."""
    config = RL2PPOConfig(deterministic_eval=True, meta_batch_size=2)
    algo = RL2PPO("metabench/PointGoal-v0", config=config)
    env = algo.wrap_env(Trial(gym.make("metabench/PointGoal-v0").unwrapped, 2))
    obs, _ = env.reset(seed=0)
    explored, reference = algo.get_exploration_policy(), algo.get_exploration_policy()
    for _ in range(5):
        explored.get_action(obs)
        reference.get_action(obs)
    adapted = algo.adapt_policy(explored, None)  # type: ignore[arg-type]
    adapted.reset()
    first = [adapted.get_action(obs) for _ in range(3)]
    adapted.reset()
    again = [adapted.get_action(obs) for _ in range(3)]
    expected = [reference.get_action(obs) for _ in range(3)]
    np.testing.assert_array_equal(first, again)
    np.testing.assert_array_equal(first, expected)
    assert not np.array_equal(first[0], first[2])  # the state moves within an episode


def test_wrap_env_adds_rl2_observation_and_rescales_small_action_boxes():
    algo = RL2PPO(
        "metabench/PointGoal-v0", config=RL2PPOConfig(reward_scale=0.5, meta_batch_size=2)
    )
    env = algo.wrap_env(Trial(gym.make("metabench/PointGoal-v0").unwrapped, 2))
    assert isinstance(env, gym.wrappers.RescaleAction)
    assert isinstance(env.env, RL2Env) and env.env.reward_scale == 0.5
    np.testing.assert_array_equal(env.action_space.high, [1.0, 1.0])
    env.reset(seed=0)
    obs = env.step(np.array([1.0, -1.0], dtype=np.float32))[0]
    np.testing.assert_allclose(obs[:2], [0.1, -0.1])  # the task env moved by max_step


@pytest.mark.parametrize("bad", [{"meta_batch_size": 0}, {"discount": 1.5}, {"learning_rate": 0}])
def test_bad_config_raises(bad):
    with pytest.raises(ValueError):
        RL2PPOConfig(**bad)


@pytest.mark.slow
def test_rl2_learns_to_search_the_bandit_and_remember_the_arm():
    """Three deterministic arms, one pull per episode, three episodes per trial: finding the
    paying arm for sure takes remembering which arms failed. Optimal: 1/3, 2/3, 1."""
    spec = get_benchmark("Bandit")
    algo = RL2PPO(
        spec.env_id,
        config=RL2PPOConfig(**get_algorithm("rl2-ppo").hyperparameters(spec, {})),
        seed=0,
        env_kwargs=spec.train_env_kwargs(0),
    )
    evaluator = make_evaluator(spec, seed=0)
    before = evaluator.evaluate(algo)
    algo.train(LEARNING_ITERATIONS)
    after = evaluator.evaluate(algo)
    nop = evaluator.evaluate(NOP(gym.make(spec.env_id).action_space))
    first, second, third = after.return_per_episode
    assert third >= 0.9 and second >= first + 0.2, after.return_per_episode
    assert after.test_return >= nop.test_return + 0.3
    assert after.test_return >= before.test_return + 0.3
