"""The batched meta-test against the sequential one (``MetaEvaluator.evaluate(algo, processes)``).

Bit-identical where it can be: a deterministic algorithm whose rows act independently gets the
same episodes, returns, successes and lengths from both, whatever the number of processes, also
when tasks end their episodes at different times. Statistically equivalent where it cannot:
RL2's sampling policy draws its noise for all tasks at once, so its returns are compared as
distributions (and its deterministic policy up to floating-point rounding).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from scipy import stats

from metabench.algos.base import MetaRLAlgorithm, Policy, PolicyList
from metabench.algos.rl2.rl2_ppo import RL2PPO, RL2PPOConfig
from metabench.data import EpisodeBatch
from metabench.evaluation import MetaEvaluator
from metabench.records import MetaTestRecord
from metabench.tasks.toy.envs import PointGoalEnv
from metabench.wrappers import RL2Env

H = 8


def make_env() -> gym.Env[Any, Any]:
    return PointGoalEnv(horizon=H)


def goals(n: int, seed: int = 0) -> list[dict[str, list[float]]]:
    return PointGoalEnv().sample_tasks(n, np.random.default_rng(seed))


class SweepPolicy(Policy):
    """Deterministic, stateful: episode k moves along a direction that turns with k."""

    def __init__(self) -> None:
        self.episode = -1

    def reset(self) -> None:
        self.episode += 1

    def get_action(self, observation: np.ndarray) -> np.ndarray:
        angle = 0.7 * self.episode + 0.3 * float(observation[0])
        return 0.1 * np.array([np.cos(angle), np.sin(angle)])


class GoToPolicy(Policy):
    def __init__(self, goal: np.ndarray) -> None:
        self.goal = goal

    def get_action(self, observation: np.ndarray) -> np.ndarray:
        return np.clip(self.goal - observation[:2], -0.1, 0.1)


class SweepAndGo(MetaRLAlgorithm):
    """Adapts by walking to the explored position with the best reward."""

    def __init__(self, rl2: bool = False) -> None:
        self.rl2 = rl2

    def train(self, n_iterations: int) -> dict[str, float]:
        return {}

    def get_exploration_policy(self) -> Policy:
        return SweepPolicy()

    def adapt_policy(self, exploration_policy: Policy, exploration_episodes: EpisodeBatch):
        best = int(np.argmax(exploration_episodes.rewards))
        return GoToPolicy(exploration_episodes.next_observations[best, :2])

    def wrap_env(self, env: gym.Env[Any, Any]) -> gym.Env[Any, Any]:
        return RL2Env(env) if self.rl2 else env


@pytest.mark.parametrize("processes", [1, 2])
@pytest.mark.parametrize("rl2", [False, True])
def test_deterministic_algorithm_gets_identical_results(processes, rl2):
    evaluator = MetaEvaluator(make_env, goals(5), exploration_episodes=3, test_episodes=2, seed=4)
    sequential = evaluator.evaluate(SweepAndGo(rl2))
    batched = evaluator.evaluate(SweepAndGo(rl2), processes=processes)
    assert MetaTestRecord.of(batched).to_json() == MetaTestRecord.of(sequential).to_json()
    assert batched.n_env_steps == 5 * 5 * H


class CountdownEnv(gym.Env[np.ndarray, np.ndarray]):
    """Terminates after ``task["length"]`` steps (or truncates at ``horizon``): tasks end their
    episodes at different times, so the batched meta-test must let some wait for others."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (2,))
    action_space = gym.spaces.Box(-1.0, 1.0, (1,))

    def __init__(self, horizon: int = 6) -> None:
        self.horizon = horizon
        self.task: dict[str, int] = {"length": 1}

    def set_task(self, task: dict[str, int]) -> None:
        self.task = dict(task)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        super().reset(seed=seed)
        if options and options.get("task") is not None:  # how Trial hands a task env its task
            self.set_task(options["task"])
        self.t = 0
        self.position = float(self.np_random.uniform(-1, 1))
        return np.array([self.position, 0.0], dtype=np.float32), {}

    def step(self, action: Any) -> Any:
        self.t += 1
        self.position += float(np.asarray(action)[0])
        obs = np.array([self.position, self.t], dtype=np.float32)
        terminated = self.t >= self.task["length"]
        return obs, -abs(self.position), terminated, self.t >= self.horizon, {}


class FollowPolicy(Policy):
    def __init__(self, gain: float) -> None:
        self.gain = gain

    def get_action(self, observation: np.ndarray) -> np.ndarray:
        return np.array([-self.gain * float(observation[0])], dtype=np.float32)


class Countdown(MetaRLAlgorithm):
    def train(self, n_iterations: int) -> dict[str, float]:
        return {}

    def get_exploration_policy(self) -> Policy:
        return FollowPolicy(0.1)

    def adapt_policy(self, exploration_policy: Policy, exploration_episodes: EpisodeBatch):
        return FollowPolicy(0.1 * float(exploration_episodes.lengths.mean()))


@pytest.mark.parametrize("processes", [1, 3])
def test_tasks_ending_episodes_at_different_times(processes):
    tasks = [{"length": n} for n in (1, 4, 9, 2)]  # 9 > horizon: truncated instead
    evaluator = MetaEvaluator(CountdownEnv, tasks, exploration_episodes=2, test_episodes=2)
    sequential = evaluator.evaluate(Countdown())
    batched = evaluator.evaluate(Countdown(), processes=processes)
    assert MetaTestRecord.of(batched).to_json() == MetaTestRecord.of(sequential).to_json()
    assert [t.episode_lengths for t in batched.tasks] == [[1] * 4, [4] * 4, [6] * 4, [2] * 4]


def rl2(deterministic: bool) -> RL2PPO:
    config = RL2PPOConfig(meta_batch_size=2, hidden_size=16, deterministic_eval=deterministic)
    return RL2PPO("metabench/PointGoal-v0", config=config, seed=0, env_kwargs={"horizon": H})


def test_rl2_deterministic_policy_matches_up_to_rounding():
    """One recurrent pass over all tasks, each row with its own state: the same actions as the
    task-by-task meta-test, up to the rounding of a batched matrix product."""
    algo = rl2(deterministic=True)
    evaluator = MetaEvaluator(make_env, goals(6), exploration_episodes=2, test_episodes=2)
    sequential = evaluator.evaluate(algo)
    batched = evaluator.evaluate(algo, processes=2)
    for one, other in zip(sequential.tasks, batched.tasks, strict=True):
        np.testing.assert_allclose(one.episode_returns, other.episode_returns, rtol=1e-5)


def test_rl2_sampling_policy_gives_the_same_return_distribution():
    """Statistically equivalent: per-episode returns of 40 tasks, a two-sample KS test, and
    the mean difference (paired by task and episode) against its standard error."""
    algo = rl2(deterministic=False)
    evaluator = MetaEvaluator(make_env, goals(40, seed=1), exploration_episodes=2, test_episodes=1)
    with algo.evaluation_streams(0):
        sequential = np.array([t.episode_returns for t in evaluator.evaluate(algo).tasks])
    with algo.evaluation_streams(1):
        batched = np.array([t.episode_returns for t in evaluator.evaluate(algo, processes=2).tasks])
    assert stats.ks_2samp(sequential.ravel(), batched.ravel()).pvalue > 0.01
    difference = batched - sequential  # paired by task
    standard_error = difference.std(ddof=1) / np.sqrt(difference.size)
    assert abs(difference.mean()) < 3 * standard_error


def test_rl2_adapted_rows_start_each_test_episode_from_their_explored_state():
    algo = rl2(deterministic=True)
    policies = algo.get_exploration_policies(3)
    observation = np.ones((3, 6), dtype=np.float32)
    rows = np.arange(3)
    policies.reset(rows)
    for _ in range(4):
        policies.get_actions(observation, rows)
    adapted = algo.adapt_policies(policies, [])
    adapted.reset(rows)
    first = adapted.get_actions(observation, rows)
    adapted.get_actions(observation, rows)  # moves the state on
    adapted.reset(np.array([1]))  # back to the explored state in row 1 only
    again = adapted.get_actions(observation[[1]], np.array([1]))
    np.testing.assert_allclose(again[0], first[1], rtol=1e-5)  # one row vs three: rounding
    moved_on = adapted.get_actions(observation[[0]], np.array([0]))
    assert not np.allclose(moved_on[0], first[0], rtol=1e-3)  # row 0 was not reset


def test_policy_list_acts_row_by_row():
    algo = SweepAndGo()
    policies = algo.get_exploration_policies(2)
    assert isinstance(policies, PolicyList)
    policies.reset(np.array([0, 1]))
    policies.reset(np.array([1]))  # row 1 is one episode ahead
    actions = policies.get_actions(np.zeros((2, 2)), np.array([0, 1]))
    np.testing.assert_allclose(actions[0], [0.1, 0.0])
    np.testing.assert_allclose(actions[1], 0.1 * np.array([np.cos(0.7), np.sin(0.7)]))


def test_processes_must_be_a_positive_count():
    evaluator = MetaEvaluator(make_env, goals(2), exploration_episodes=1, test_episodes=1)
    with pytest.raises(ValueError, match="processes must be a positive integer"):
        evaluator.evaluate(SweepAndGo(), processes=0)
