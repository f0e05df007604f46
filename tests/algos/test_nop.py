"""NOP: the algorithm that does not learn, checked against hand-made rollouts."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces

from metabench.algos.nop import NOP, NOPPolicy
from metabench.evaluation import MetaEvaluator
from metabench.tasks.toy.envs import PointGoalEnv

H = 8
TASKS = [{"goal": [0.3, -0.4]}, {"goal": [0.05, 0.0]}]


def make_env() -> PointGoalEnv:
    return PointGoalEnv(horizon=H)


def zero_action_rollout(task: dict[str, list[float]]) -> tuple[float, bool]:
    """Return and success of one episode of zero actions, stepped by hand."""
    env = make_env()
    env.reset(seed=0, options={"task": task})
    total, success, done = 0.0, False, False
    while not done:
        _, reward, terminated, truncated, info = env.step(np.zeros(2))
        total += reward
        success = success or info["success"]
        done = terminated or truncated
    return total, success


def test_zero_nop_scores_exactly_a_zero_action_rollout():
    algo = NOP(make_env().action_space)
    result = MetaEvaluator(make_env, TASKS, exploration_episodes=2, test_episodes=2).evaluate(algo)
    for task, task_result in zip(TASKS, result.tasks, strict=True):
        expected, success = zero_action_rollout(task)
        assert expected == pytest.approx(-H * np.linalg.norm(task["goal"]))
        assert task_result.episode_returns == pytest.approx([expected] * 4, abs=1e-12)
        assert task_result.episode_successes == [success] * 4
    assert [t.test_success for t in result.tasks] == [False, True]  # the 2nd goal is at hand
    assert result.test_success_rate == 0.5


def test_adapt_policy_is_identity_and_policy_is_reset_every_episode():
    algo = NOP(make_env().action_space)
    policy = algo.get_exploration_policy()
    assert algo.adapt_policy(policy, None) is policy  # type: ignore[arg-type]

    policies: list[NOPPolicy] = []

    class Recording(NOP):
        def get_exploration_policy(self) -> NOPPolicy:
            policies.append(super().get_exploration_policy())
            return policies[-1]

    MetaEvaluator(make_env, TASKS, 3, 2).evaluate(Recording(make_env().action_space))
    assert [p.n_resets for p in policies] == [5, 5]
    assert [p.n_actions for p in policies] == [5 * H, 5 * H]


def test_train_only_counts_iterations():
    algo = NOP(make_env().action_space)
    assert algo.train(3) == {}
    algo.train(0)
    algo.train(4)
    assert algo.n_iterations == 7
    with pytest.raises(ValueError, match="non-negative integer"):
        algo.train(-1)
    with pytest.raises(ValueError, match="integer"):
        algo.train(1.5)  # type: ignore[arg-type]


def actions(algo: NOP, n_policies: int = 2, n_steps: int = 5) -> np.ndarray:
    policies = [algo.get_exploration_policy() for _ in range(n_policies)]
    return np.array([[p.get_action(np.zeros(2)) for _ in range(n_steps)] for p in policies])


def test_random_nop_is_seeded():
    space = make_env().action_space
    a, b = actions(NOP(space, "random", seed=3)), actions(NOP(space, "random", seed=3))
    c = actions(NOP(space, "random", seed=4))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert not np.array_equal(a[0], a[1])  # each policy has its own stream
    assert space.contains(a[0, 0]) and np.all(np.abs(a) <= 0.1)
    assert np.unique(a.reshape(-1, 2), axis=0).shape[0] == 10  # really random

    results = [
        MetaEvaluator(make_env, TASKS, 2, 1).evaluate(NOP(space, "random", seed=5))
        for _ in range(2)
    ]
    assert results[0] == results[1]
    returns = results[0].tasks[0].episode_returns
    assert len(set(returns)) == 3  # random actions: every episode differs


def test_zero_action_of_other_spaces():
    box = spaces.Box(low=np.array([1.0, -2.0]), high=np.array([3.0, -1.0]), dtype=np.float64)
    assert NOP(box).get_exploration_policy().get_action(np.zeros(1)).tolist() == [1.0, -1.0]
    assert int(NOP(spaces.Discrete(3, start=2)).get_exploration_policy().get_action(0)) == 2
    with pytest.raises(ValueError, match="action='random'"):
        NOP(spaces.MultiBinary(3))
    sample = NOP(spaces.MultiBinary(3), "random", seed=0).get_exploration_policy().get_action(0)
    assert sample.shape == (3,)


def test_bad_arguments():
    with pytest.raises(ValueError, match="action must be"):
        NOP(make_env().action_space, "greedy")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="action space"):
        NOP(make_env())  # type: ignore[arg-type]
