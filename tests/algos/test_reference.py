"""oracle and multitask: the task in the observation, episode-shaped iterations, exact resume,
the shared meta-test protocol, and (slow) the oracle beating multitask on PointGoal."""

from dataclasses import replace

import gymnasium as gym
import numpy as np
import pytest
import torch

import metabench  # noqa: F401 - registers the ids
from metabench.algos.reference import (
    MultitaskPPO,
    OraclePPO,
    ReferenceConfig,
    ReferencePPO,
    TaskInObservation,
    task_features,
)
from metabench.harness.benchmarks import get_benchmark
from metabench.harness.run import make_evaluator
from metabench.tasks.toy.envs import PointGoalEnv
from metabench.wrappers import Trial
from tests.factories import policy_parameters, straight_and_resumed

SMALL = ReferenceConfig(n_envs=4, n_epochs=2, hidden_sizes=(8,))


def test_task_features_flatten_dict_tasks_in_key_order():
    np.testing.assert_array_equal(task_features({"velocity": 1.5}), [1.5])
    np.testing.assert_array_equal(task_features({"goal": [0.3, -0.2], "a": 2}), [2.0, 0.3, -0.2])
    with pytest.raises(ValueError, match="use multitask"):
        task_features(("reach-v3", b"data"))
    with pytest.raises(ValueError, match="finite"):
        task_features({"velocity": float("nan")})


def test_task_in_observation_follows_the_task_of_each_episode():
    env = TaskInObservation(Trial(PointGoalEnv(), 1))
    assert env.observation_space.shape == (4,)
    for goal in ([0.3, -0.1], [-0.4, 0.2]):
        env.get_wrapper_attr("set_task")({"goal": goal})
        obs, _ = env.reset(seed=0)
        np.testing.assert_allclose(obs[2:], goal)
        obs = env.step(np.zeros(2))[0]
        np.testing.assert_allclose(obs[2:], goal)
        np.testing.assert_array_equal(obs[:2], env.unwrapped._position)


def test_one_iteration_is_one_episode_per_sub_env_each_with_its_own_task():
    algo = MultitaskPPO("metabench/PointGoal-v0", config=SMALL, env_kwargs={"horizon": 5})
    assert algo.steps_per_iteration == 20
    stats = algo.train(2)
    assert algo.model.num_timesteps == 40 and algo.iterations == 2
    assert np.isfinite(stats["metatrain/average_return"])
    tasks = [tuple(task["goal"]) for task in algo.venv.tasks]
    assert len(set(tasks)) == 4  # a meta-batch of distinct tasks


@pytest.mark.parametrize(("oracle", "normalize"), [(True, False), (False, False), (True, True)])
def test_resume_from_a_checkpoint_is_exact(oracle, normalize):
    def make() -> ReferencePPO:
        return (OraclePPO if oracle else MultitaskPPO)(
            "metabench/PointGoal-v0", config=replace(SMALL, normalize=normalize), seed=3
        )

    straight, resumed = straight_and_resumed(make)
    for a, b in zip(policy_parameters(straight), policy_parameters(resumed), strict=True):
        assert torch.equal(a, b)
    if normalize:  # the statistics too: counted once each, as in the run that went on
        for name in ("obs_rms", "ret_rms"):
            ours, theirs = getattr(straight.normalizer, name), getattr(resumed.normalizer, name)
            assert ours.count == theirs.count
            np.testing.assert_array_equal(ours.mean, theirs.mean)
            np.testing.assert_array_equal(ours.var, theirs.var)


def test_normalized_training_counts_what_the_sub_envs_return_and_the_agent_scales_with_it():
    """VecNormalize's observation statistics are those of every observation the sub-envs
    returned (a reset's, and each step's but an episode's last, which the automatic reset
    replaces), recomputed here from a record of them; the meta-test policy, and one restored
    from the trained agent alone, scale an observation with them before PPO's network sees it."""
    seen: list[np.ndarray] = []

    class Record(gym.Wrapper):
        def reset(self, **kwargs):
            observation, info = self.env.reset(**kwargs)
            seen.append(observation)
            return observation, info

        def step(self, action):
            observation, reward, terminated, truncated, info = self.env.step(action)
            if not (terminated or truncated):
                seen.append(observation)
            return observation, reward, terminated, truncated, info

    class RecordedOracle(OraclePPO):
        def wrap_env(self, env):
            return Record(super().wrap_env(env))

    config = replace(SMALL, normalize=True)
    kwargs = {"config": config, "env_kwargs": {"horizon": 5}}
    algo = RecordedOracle("metabench/PointGoal-v0", seed=1, **kwargs)
    algo.train(3)
    stats = algo.normalizer.obs_rms
    prior = 1e-4  # RunningMeanStd starts as this many observations of mean 0 and variance 1
    assert len(seen) == 4 * (1 + 3 * 5) and stats.count == pytest.approx(len(seen) + prior)
    np.testing.assert_allclose(stats.mean, np.sum(seen, axis=0) / (len(seen) + prior), rtol=1e-9)
    policy = algo.get_exploration_policy()
    agent = OraclePPO("metabench/PointGoal-v0", seed=9, **kwargs)
    agent.load_agent_state(algo.agent_state(algo.state_dict()))
    restored = agent.get_exploration_policy()
    observation = np.array([0.2, -0.1, 0.3, 0.4])
    scaled = np.clip((observation - stats.mean) / np.sqrt(stats.var + 1e-8), -10, 10)
    expected, _ = algo.model.predict(scaled[None].astype(np.float32), deterministic=True)
    np.testing.assert_allclose(policy.get_action(observation), expected[0], rtol=1e-6)
    np.testing.assert_allclose(restored.get_action(observation), expected[0], rtol=1e-6)
    counted = stats.count
    algo.train(1)  # the statistics go on; the policy handed out keeps those it was given
    assert algo.normalizer.obs_rms.count > counted
    expected, _ = algo.model.predict(scaled[None].astype(np.float32), deterministic=True)
    np.testing.assert_allclose(policy.get_action(observation), expected[0], rtol=1e-6)


def test_checkpoint_of_another_config_is_refused():
    state = MultitaskPPO("metabench/PointGoal-v0", config=SMALL).state_dict()
    other = MultitaskPPO("metabench/PointGoal-v0", config=ReferenceConfig(n_envs=2))
    with pytest.raises(ValueError, match="different ReferenceConfig"):
        other.load_state_dict(state)
    oracle = OraclePPO("metabench/PointGoal-v0", config=SMALL)
    with pytest.raises(ValueError, match=r"different oracle$"):
        oracle.load_state_dict(state)


def test_oracle_sees_the_meta_test_task_and_ignores_the_exploration_episodes():
    algo = OraclePPO("metabench/PointGoal-v0", config=ReferenceConfig(n_envs=2))
    env = algo.wrap_env(Trial(gym.make("metabench/PointGoal-v0").unwrapped, 2))
    assert env.observation_space.shape == (4,)
    policy = algo.get_exploration_policy()
    assert algo.adapt_policy(policy, None) is policy  # type: ignore[arg-type]
    env.get_wrapper_attr("set_task")({"goal": [0.25, 0.25]})
    obs, _ = env.reset(seed=0)
    np.testing.assert_allclose(obs[2:], [0.25, 0.25])
    np.testing.assert_array_equal(policy.get_action(obs), policy.get_action(obs))  # the mean


@pytest.mark.parametrize(
    "bad", [{"n_envs": 0}, {"discount": 1.5}, {"hidden_sizes": (0,)}, {"n_minibatches": 2.5}]
)
def test_bad_config_raises(bad):
    with pytest.raises(ValueError):
        ReferenceConfig(**bad)


@pytest.mark.slow
def test_oracle_beats_multitask_on_pointgoal():
    """The oracle knows the goal, so it walks there; multitask can only learn the one path that
    is best on average, which for goals uniform around the start is to stay near it. Iterations
    of 20 episodes of 100 steps each, PointGoal's horizon; both policies act with their mean, so
    a few test episodes measure them (exploration is ignored).

    Walking straight at the 0.1 step limit costs about E[d^2] / 0.2 = 0.8 on average (d the
    goal's distance, goals uniform in [-0.5, 0.5]^2); standing still costs 100 d, about 38.
    Seeds 0, 1, 2 gave the oracle -1.14, -1.16, -1.02 after 20 iterations (-0.73, -1.11, -1.15
    after 30) and multitask -39.2, -39.7, -40.1 after 10 (-38.7, -41.0, -39.7 after 30: it has
    settled by 10).
    """
    spec = get_benchmark("PointGoal")
    evaluator = make_evaluator(spec, seed=0, exploration_episodes=1, test_episodes=5)
    returns = {}
    for oracle, iterations in ((True, 20), (False, 10)):
        algo = (OraclePPO if oracle else MultitaskPPO)(
            spec.env_id, seed=0, env_kwargs=spec.train_env_kwargs(0)
        )
        algo.train(iterations)
        returns[oracle] = evaluator.evaluate(algo).test_return
    assert returns[True] > -2.0, returns
    assert returns[True] >= returns[False] + 20.0, returns
