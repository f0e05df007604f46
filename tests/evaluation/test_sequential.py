"""MetaEvaluator on PointGoal with a scripted algorithm whose every number can be recomputed.

The scripted algorithm explores along +x in even episodes and +y in odd ones, infers the goal
exactly from the exploration rewards (least squares on ``||p - g||^2 = r^2``), and its adapted
policy walks straight to that goal. Expected returns are recomputed from positions in numpy.
"""

from __future__ import annotations

import json
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from metabench.algos.base import MetaRLAlgorithm, Policy
from metabench.data import EpisodeBatch, StepType
from metabench.evaluation import (
    MetaEvaluator,
    TaskResult,
    task_from_json,
    task_to_json,
)
from metabench.records import MetaTestRecord
from metabench.tasks.toy.envs import PointGoalEnv
from metabench.wrappers import RL2Env

H = 10  # horizon
STEP = 0.1  # PointGoalEnv's max_step
NEAR = {"goal": [0.3, -0.2]}  # reachable in 3 steps: the adapted policy succeeds
FAR = {"goal": [2.0, 2.0]}  # out of reach in H steps: nobody succeeds


def make_env() -> gym.Env[Any, Any]:
    return PointGoalEnv(goal_range=(-3.0, 3.0), horizon=H)


# -- the scripted algorithm ----------------------------------------------------------------------
class ProbePolicy(Policy):
    """Episode k moves at full speed along x (k even) or y (k odd)."""

    def __init__(self) -> None:
        self.resets = 0
        self.observations: list[np.ndarray] = []
        self.actions: list[np.ndarray] = []

    def reset(self) -> None:
        self.resets += 1

    def get_action(self, observation: np.ndarray) -> np.ndarray:
        self.observations.append(np.array(observation))
        action = np.zeros(2)
        action[(self.resets - 1) % 2] = STEP
        self.actions.append(action)
        return action


class GoToPolicy(Policy):
    """Walks straight to ``goal`` (the first two observation entries are the position)."""

    def __init__(self, goal: np.ndarray) -> None:
        self.goal = goal
        self.resets = 0
        self.observations: list[np.ndarray] = []

    def reset(self) -> None:
        self.resets += 1

    def get_action(self, observation: np.ndarray) -> np.ndarray:
        self.observations.append(np.array(observation))
        return np.clip(self.goal - observation[:2], -STEP, STEP)


def infer_goal(batch: EpisodeBatch) -> np.ndarray:
    """Solve ``-2 p.g + |g|^2 = r^2 - |p|^2`` for ``g`` over all steps (``p`` after the step)."""
    positions = batch.next_observations[:, :2]
    matrix = np.column_stack([-2 * positions, np.ones(len(positions))])
    target = batch.rewards**2 - (positions**2).sum(axis=1)
    solution, *_ = np.linalg.lstsq(matrix, target, rcond=None)
    return np.asarray(solution[:2])


class ScriptedAlgo(MetaRLAlgorithm):
    def __init__(self, rl2: bool = False) -> None:
        self.rl2 = rl2
        self.exploration_policies: list[ProbePolicy] = []
        self.adapt_calls: list[tuple[Policy, EpisodeBatch]] = []
        self.adapted: list[GoToPolicy] = []

    def train(self, n_iterations: int) -> None:
        pass

    def get_exploration_policy(self) -> ProbePolicy:
        policy = ProbePolicy()
        self.exploration_policies.append(policy)
        return policy

    def adapt_policy(
        self, exploration_policy: Policy, exploration_episodes: EpisodeBatch
    ) -> Policy:
        self.adapt_calls.append((exploration_policy, exploration_episodes))
        policy = GoToPolicy(infer_goal(exploration_episodes))
        self.adapted.append(policy)
        return policy

    def wrap_env(self, env: gym.Env[Any, Any]) -> gym.Env[Any, Any]:
        return RL2Env(env) if self.rl2 else env


# -- independent computation ---------------------------------------------------------------------
def probe_positions(episode: int) -> np.ndarray:
    """Positions after each step of exploration episode ``episode``."""
    axis = np.zeros(2)
    axis[episode % 2] = STEP
    return np.arange(1, H + 1)[:, None] * axis


def goto_positions(goal: np.ndarray) -> np.ndarray:
    position, positions = np.zeros(2), []
    for _ in range(H):
        position = position + np.clip(goal - position, -STEP, STEP)
        positions.append(position)
    return np.array(positions)


def expected_episodes(task: dict[str, list[float]], n_expl: int, n_test: int):
    """(returns, successes) of every episode of the trial, from positions alone."""
    goal = np.array(task["goal"])
    trajectories = [probe_positions(k) for k in range(n_expl)] + [goto_positions(goal)] * n_test
    distances = [np.linalg.norm(p - goal, axis=1) for p in trajectories]
    return [-d.sum() for d in distances], [bool((d < STEP).any()) for d in distances]


# -- the protocol --------------------------------------------------------------------------------
def test_returns_and_successes_match_positions():
    algo = ScriptedAlgo()
    result = MetaEvaluator(make_env, [NEAR, FAR], exploration_episodes=3, test_episodes=2).evaluate(
        algo
    )
    assert result.n_tasks == 2 and result.algorithm == "ScriptedAlgo"
    for index, task in enumerate([NEAR, FAR]):
        returns, successes = expected_episodes(task, 3, 2)
        task_result = result.tasks[index]
        assert task_result.task_index == index
        assert task_result.task == task
        np.testing.assert_allclose(task_result.episode_returns, returns, rtol=0, atol=1e-9)
        assert task_result.episode_successes == successes
        assert task_result.episode_lengths == [H] * 5
        np.testing.assert_allclose(task_result.test_return, np.mean(returns[3:]), atol=1e-9)

    curve = result.return_per_episode
    assert len(curve) == 5
    assert min(curve[3:]) > max(curve[:3])  # adapting helps
    near, far = (expected_episodes(t, 3, 2)[0] for t in (NEAR, FAR))
    np.testing.assert_allclose(curve, (np.array(near) + np.array(far)) / 2, atol=1e-9)
    np.testing.assert_allclose(result.test_return, (np.mean(near[3:]) + np.mean(far[3:])) / 2)
    assert result.n_env_steps == 2 * 5 * H


def test_success_is_keyed_by_task_not_env_name():
    result = MetaEvaluator(make_env, [NEAR, FAR, NEAR], 2, 1).evaluate(ScriptedAlgo())
    assert [t.test_success for t in result.tasks] == [True, False, True]
    assert result.test_success_rate == pytest.approx(2 / 3)
    assert result.test_episode_success_rate == pytest.approx(2 / 3)
    assert result.success_rate_per_episode == pytest.approx([0.0, 0.0, 2 / 3])
    assert [t.task for t in result.tasks] == [NEAR, FAR, NEAR]


def test_success_rate_counts_tasks_with_any_successful_test_episode():
    result = MetaEvaluator(make_env, [NEAR], 2, 3).evaluate(ScriptedAlgo())
    result.tasks[0].episode_successes = [False, False, False, True, False]
    assert result.tasks[0].test_success is True
    assert result.test_success_rate == 1.0
    assert result.test_episode_success_rate == pytest.approx(1 / 3)


def test_algorithm_calls_and_exploration_batch():
    algo = ScriptedAlgo()
    tasks = [NEAR, FAR]
    MetaEvaluator(make_env, tasks, exploration_episodes=3, test_episodes=2).evaluate(algo)

    assert len(algo.exploration_policies) == 2  # get_exploration_policy once per task
    assert len(algo.adapt_calls) == 2  # adapt_policy once per task
    for index, (policy, batch) in enumerate(algo.adapt_calls):
        assert policy is algo.exploration_policies[index]
        assert policy.resets == 3 and algo.adapted[index].resets == 2  # one per episode
        assert len(policy.actions) == 3 * H and len(algo.adapted[index].observations) == 2 * H

        goal = np.array(tasks[index]["goal"])
        assert batch.n_episodes == 3
        assert batch.lengths.tolist() == [H, H, H]
        expected_types = [StepType.FIRST] + [StepType.MID] * (H - 2) + [StepType.TIMEOUT]
        assert batch.step_types.tolist() == expected_types * 3
        # the observations the policy saw, the actions it took, and the right task's rewards
        np.testing.assert_array_equal(batch.observations, np.stack(policy.observations))
        np.testing.assert_array_equal(batch.actions, np.stack(policy.actions))
        next_positions = np.concatenate([probe_positions(k) for k in range(3)])
        np.testing.assert_allclose(batch.next_observations, next_positions, atol=1e-12)
        np.testing.assert_allclose(
            batch.last_observations, [probe_positions(k)[-1] for k in range(3)], atol=1e-12
        )
        np.testing.assert_allclose(
            batch.rewards, -np.linalg.norm(next_positions - goal, axis=1), atol=1e-12
        )
        assert batch.env_infos["success"].shape == (3 * H,)
        assert batch.env_infos["success"].dtype == bool
        # the goal inferred from the batch is the task's
        np.testing.assert_allclose(infer_goal(batch), goal, atol=1e-9)


def test_test_episodes_continue_the_trial_for_rl2():
    algo = ScriptedAlgo(rl2=True)
    result = MetaEvaluator(make_env, [NEAR], 2, 1).evaluate(algo)
    probe, adapted = algo.exploration_policies[0], algo.adapted[0]
    batch = algo.adapt_calls[0][1]
    assert batch.observations.shape == (2 * H, 6)  # position, action, reward, done
    assert batch.last_observations.shape == (2, 6)
    np.testing.assert_array_equal(probe.observations[0], np.zeros(6))  # fresh trial
    # the adapted policy's first observation carries the last exploration step: no reset between
    first = adapted.observations[0]
    np.testing.assert_array_equal(first[:2], [0.0, 0.0])  # new episode, back at the origin
    np.testing.assert_array_equal(first[2:4], probe.actions[-1])
    assert first[4] == pytest.approx(-np.linalg.norm(probe_positions(1)[-1] - NEAR["goal"]))
    assert first[5] == 1.0
    # RL2 changes the observation space, so an inner episode's last observation is the one the
    # ending step returned (next episode's origin + that step's action, reward and done flag)
    np.testing.assert_array_equal(batch.last_observations[0], probe.observations[H])
    np.testing.assert_array_equal(batch.last_observations[1], first)
    assert result.tasks[0].episode_lengths == [H, H, H]


def test_result_json_round_trip_and_task_restore():
    tasks = [NEAR, {"goal": np.array([0.1, 0.2])}]
    result = MetaEvaluator(make_env, tasks, 2, 1, seed=7).evaluate(ScriptedAlgo())
    record = MetaTestRecord.of(result)
    text = json.dumps(record.to_json())
    restored = MetaTestRecord.from_json(json.loads(text))
    assert restored == record and restored.result == result
    assert restored.to_json() == record.to_json()
    assert restored.tasks[1].restore_task() == {"goal": [0.1, 0.2]}
    aggregate = json.loads(text)["aggregate"]
    assert aggregate["n_env_steps"] == result.n_env_steps == 2 * 3 * H
    assert aggregate["test_return"] == result.test_return
    # a restored task replays: same result on the same env
    again = MetaEvaluator(make_env, [t.restore_task() for t in restored.tasks], 2, 1, seed=7)
    assert MetaTestRecord.of(again.evaluate(ScriptedAlgo())) == record


def test_task_json_helpers():
    assert task_to_json({"goal": np.array([1.0, 2.0]), "k": np.int64(3)}) == {
        "goal": [1.0, 2.0],
        "k": 3,
    }
    assert task_from_json({"velocity": 1.5}) == {"velocity": 1.5}
    with pytest.raises(ValueError, match="cannot record"):
        task_to_json([1.0, 2.0])
    with pytest.raises(ValueError, match="object"):
        task_to_json({"goal": object()})


class SeedLog(gym.Wrapper[Any, Any, Any, Any]):
    seeds: list[int | None]

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self.seeds.append(seed)
        return self.env.reset(seed=seed, options=options)


def run_with_seed_log(seed: int) -> tuple[list[int | None], dict[str, Any]]:
    log: list[int | None] = []

    def make() -> gym.Env[Any, Any]:
        env = SeedLog(make_env())
        env.seeds = log
        return env

    result = MetaEvaluator(make, [NEAR, FAR], 2, 1, seed=seed).evaluate(ScriptedAlgo())
    return [s for s in log if s is not None], MetaTestRecord.of(result).to_json()


def test_deterministic_given_the_seed():
    seeds_a, result_a = run_with_seed_log(3)
    seeds_b, result_b = run_with_seed_log(3)
    seeds_c, _ = run_with_seed_log(4)
    assert seeds_a == seeds_b and result_a == result_b
    assert len(seeds_a) == 2 and seeds_a[0] != seeds_a[1]  # one seeded reset per task
    assert seeds_a != seeds_c
    evaluator = MetaEvaluator(make_env, [NEAR, FAR], 2, 1, seed=3)
    assert seeds_a == [evaluator.task_seed(0), evaluator.task_seed(1)]


def test_task_env_is_built_once():
    built = []

    def make() -> gym.Env[Any, Any]:
        built.append(1)
        return make_env()

    evaluator = MetaEvaluator(make, [NEAR, FAR], 1, 1)
    evaluator.evaluate(ScriptedAlgo())
    evaluator.evaluate(ScriptedAlgo(rl2=True))
    assert len(built) == 1
    evaluator.close()


class NoSuccess(gym.Wrapper[Any, Any, Any, Any]):
    """An env that reports no success (like HalfCheetah)."""

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = self.env.step(action)
        info.pop("success")
        return obs, reward, terminated, truncated, info


def test_envs_without_success_report_none():
    result = MetaEvaluator(lambda: NoSuccess(make_env()), [NEAR], 2, 1).evaluate(ScriptedAlgo())
    assert result.tasks[0].episode_successes is None
    assert result.tasks[0].test_success is None
    assert result.test_success_rate is None
    assert result.success_rate_per_episode is None
    assert result.test_episode_success_rate is None
    stored = json.loads(json.dumps(MetaTestRecord.of(result).to_json()))
    assert MetaTestRecord.from_json(stored).result == result


def test_garage_protocol_and_defaults():
    default = MetaEvaluator(make_env, [NEAR])
    assert (default.exploration_episodes, default.test_episodes) == (10, 3)  # Meta-World
    garage = MetaEvaluator.garage_protocol(make_env, [NEAR], seed=2)
    assert (garage.exploration_episodes, garage.test_episodes, garage.seed) == (10, 1, 2)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"exploration_episodes": 0}, "exploration_episodes must be an integer >= 1"),
        ({"exploration_episodes": True}, "exploration_episodes"),
        ({"test_episodes": 0}, "test_episodes must be an integer >= 1"),
        ({"test_episodes": 1.5}, "test_episodes"),
        ({"test_tasks": []}, "test_tasks is empty"),
        ({"test_tasks": NEAR}, "list of tasks"),
        ({"test_tasks": [object()]}, "cannot record"),
        ({"seed": -1}, "seed"),
        ({"make_task_env": PointGoalEnv()}, "make_task_env"),
    ],
)
def test_bad_input(kwargs: dict[str, Any], match: str):
    arguments: dict[str, Any] = {"make_task_env": make_env, "test_tasks": [NEAR], **kwargs}
    with pytest.raises(ValueError, match=match):
        MetaEvaluator(**arguments)


def test_task_of_another_env_fails_before_stepping():
    algo = ScriptedAlgo()
    with pytest.raises(ValueError, match=r"test_tasks\[1\]"):
        MetaEvaluator(make_env, [NEAR, {"velocity": 1.0}], 1, 1).evaluate(algo)
    assert algo.exploration_policies == []


class CutsTrial(ScriptedAlgo):
    def wrap_env(self, env: gym.Env[Any, Any]) -> gym.Env[Any, Any]:
        return gym.wrappers.TimeLimit(env, max_episode_steps=H)


def test_wrapper_that_ends_the_trial_early_is_an_error():
    with pytest.raises(RuntimeError, match="must not end or cut the trial"):
        MetaEvaluator(make_env, [NEAR], 1, 1).evaluate(CutsTrial())


def test_task_result_properties():
    task = TaskResult(0, NEAR, 2, [-3.0, -2.0, -1.0, -0.5], [5, 5, 5, 5], None)
    assert task.test_returns == [-1.0, -0.5]
    assert task.test_return == -0.75
    assert task.test_success is None


class SuccessAtOneStep(gym.Env[np.ndarray, np.ndarray]):
    """Reports ``info["success"] = 1.0`` at one middle step of one episode of each trial (step
    ``task["step"]``, 1-based, of episode ``task["episode"]``, 0-based) and 0.0 at every other
    step, the last one included: only a rule that counts any step finds the success."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def __init__(self) -> None:
        self.task: dict[str, int] = {"episode": 0, "step": 1}
        self.episode = -1  # episodes since the task was set
        self.steps = 0

    def set_task(self, task: dict[str, int]) -> None:
        self.task, self.episode = dict(task), -1

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        task = (options or {}).get("task")
        if task is not None and task != self.task:
            self.set_task(task)
        self.episode += 1
        self.steps = 0
        return np.zeros(1, np.float32), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self.steps += 1
        hit = (self.episode, self.steps) == (self.task["episode"], self.task["step"])
        return np.zeros(1, np.float32), 0.0, False, self.steps == H, {"success": float(hit)}


@pytest.mark.parametrize("processes", [None, 2])
def test_an_episode_succeeds_if_any_of_its_steps_reports_success(processes: int | None):
    """Meta-World's rule (its evaluation ends an episode at the first ``info["success"]``),
    checked against a count from the tasks alone, sequential and batched."""
    from metabench.algos.nop import NOP

    tasks = [
        {"episode": 1, "step": 4},  # an exploration episode
        {"episode": 3, "step": 5},  # the first test episode
        {"episode": 4, "step": 2},  # the second test episode
        {"episode": 2, "step": H - 1},  # the last exploration episode, one step before its end
    ]
    evaluator = MetaEvaluator(SuccessAtOneStep, tasks, exploration_episodes=3, test_episodes=2)
    result = evaluator.evaluate(NOP(SuccessAtOneStep.action_space), processes)
    expected = [[episode == task["episode"] for episode in range(5)] for task in tasks]
    assert [t.episode_successes for t in result.tasks] == expected
    assert [t.test_success for t in result.tasks] == [any(e[3:]) for e in expected]
    assert result.test_success_rate == 2 / 4
    assert result.test_episode_success_rate == sum(sum(e[3:]) for e in expected) / (4 * 2)
    assert result.success_rate_per_episode == [0.0, 0.25, 0.25, 0.25, 0.25]
    assert all(t.episode_lengths == [H] * 5 for t in result.tasks)
