"""Meta-World tasks in MetaEvaluator, and Meta-World's own evaluator driving a metabench algorithm.

``metaworld.evaluation.metalearning_evaluation`` runs here on ML1 ``reach-v3`` test goals with
short episodes (``max_episode_steps``) and is checked against an independent count: metabench's
:class:`MetaEvaluator` on the very tasks the vector env used, with the same (zero) actions;
and, with a scripted policy that succeeds often and unevenly, on all 50 test goals against
metabench's batched meta-test of the shipped ML1-reach spec, within binomial noise.
"""

from __future__ import annotations

import json
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from metabench.algos.base import MetaRLAlgorithm, Policy
from metabench.algos.nop import NOP
from metabench.data import EpisodeBatch, StepType
from metabench.evaluation import MetaEvaluator, task_from_json, task_to_json
from metabench.evaluation.metaworld_adapter import MetaWorldAgent
from metabench.records import MetaTestRecord
from metabench.tasks.toy.envs import PointGoalEnv

H = 20  # short Meta-World episodes
ENV_NAME = "reach-v3"


class CountingNOP(NOP):
    """NOP with zero actions that records what the protocol asked of it."""

    def __init__(self, action_space: gym.spaces.Space[Any]) -> None:
        super().__init__(action_space)
        self.policies: list[Policy] = []
        self.batches: list[EpisodeBatch] = []

    def get_exploration_policy(self) -> Any:
        self.policies.append(super().get_exploration_policy())
        return self.policies[-1]

    def adapt_policy(
        self, exploration_policy: Policy, exploration_episodes: EpisodeBatch
    ) -> Policy:
        self.batches.append(exploration_episodes)
        return super().adapt_policy(exploration_policy, exploration_episodes)


def make_ml1_test_env() -> gym.Env[Any, Any]:
    from metabench.tasks.metaworld.envs import ML1Env

    return ML1Env(ENV_NAME, split="test", seed=0, horizon=H)


def recording_agent(envs: Any, tasks: list[Any]) -> type[MetaWorldAgent]:
    """A :class:`MetaWorldAgent` that appends each sub-env's task to ``tasks`` as Meta-World
    starts a round, in sub-env order."""

    class RecordingAgent(MetaWorldAgent):
        def init(self) -> None:  # Meta-World has just picked each sub-env's task
            super().init()
            index, lists = envs.get_attr("current_task_idx"), envs.get_attr("tasks")
            tasks.extend(lists[i][index[i]] for i in range(envs.num_envs))

    return RecordingAgent


def run_metaworld(meta_batch_size: int, num_evals: int = 2):
    """Meta-World's evaluation of zero-action NOP; returns its output, the agent and the tasks."""
    from metaworld.evaluation import metalearning_evaluation

    envs = gym.make_vec(
        "Meta-World/ML1-test",
        env_name=ENV_NAME,
        meta_batch_size=meta_batch_size,
        total_tasks_per_cls=4,
        max_episode_steps=H,
        seed=0,
    )
    tasks: list[Any] = []

    algo = CountingNOP(envs.single_action_space)
    agent = recording_agent(envs, tasks)(algo, envs)
    output = metalearning_evaluation(
        agent,
        envs,
        num_evals=num_evals,
        adaptation_steps=1,
        adaptation_episodes=2,
        evaluation_episodes=3,
    )
    envs.close()
    return output, agent, algo, tasks


@pytest.mark.metaworld
def test_metaworld_evaluation_matches_metabench_on_one_sub_env():
    (success_rate, mean_return, per_class), agent, algo, tasks = run_metaworld(1)

    # the adapter did what the protocol asks: 2 rounds x 1 sub-env
    assert agent.n_inits == 2 and agent.n_adaptations == 2
    assert len(algo.policies) == 2 and len(algo.batches) == 2
    for batch in algo.batches:
        assert batch.lengths.tolist() == [H, H]
        assert (
            batch.step_types.tolist()
            == ([StepType.FIRST] + [StepType.MID] * (H - 2) + [StepType.TIMEOUT]) * 2
        )
        assert batch.observations.shape == (2 * H, 39)
        np.testing.assert_array_equal(batch.actions, 0.0)
    # reset before every episode: 2 exploration + 3 evaluation (none ends early: no success)
    assert [p.n_resets for p in algo.policies] == [5, 5]

    # independent count: metabench's evaluator on the same goals with the same actions
    assert len(tasks) == 2 and tasks[0] != tasks[1]
    result = MetaEvaluator(make_ml1_test_env, tasks, 2, 3).evaluate(NOP(algo.action_space))
    assert 0.0 <= success_rate <= 1.0
    assert mean_return == pytest.approx(result.test_return, rel=1e-9)
    assert success_rate == pytest.approx(result.test_episode_success_rate)
    assert per_class[ENV_NAME] == pytest.approx(result.test_episode_success_rate)
    assert all(t.episode_lengths == [H] * 5 for t in result.tasks)
    assert all(t.episode_successes is not None for t in result.tasks)  # Meta-World reports it


@pytest.mark.metaworld
def test_metaworld_evaluation_mixes_ml1_tasks_sharing_a_name():
    (success_rate, mean_return, _), agent, algo, tasks = run_metaworld(2)
    assert agent.n_inits == 2 and agent.n_adaptations == 2
    assert len(algo.policies) == 4 and len(algo.batches) == 4  # one per sub-env per round
    assert all(batch.lengths.tolist() == [H, H] for batch in algo.batches)
    assert 0.0 <= success_rate <= 1.0

    result = MetaEvaluator(make_ml1_test_env, tasks, 2, 3).evaluate(NOP(algo.action_space))
    per_task = [t.test_return for t in result.tasks]  # [round 0: env 0, env 1, round 1: ...]
    assert min(per_task) <= mean_return <= max(per_task)
    # Meta-World 3.1.1 keys episodes by env name and keeps the first 3 to end: sub-env 0's
    # first two and sub-env 1's first, so its mean is not the mean over the tasks (metabench's).
    mixed = np.mean([(2 * per_task[2 * k] + per_task[2 * k + 1]) / 3 for k in range(2)])
    assert mean_return == pytest.approx(mixed, rel=1e-9)
    assert result.test_return != pytest.approx(mean_return, rel=1e-6)


@pytest.mark.metaworld
def test_metaworld_tasks_are_recorded_and_replayed():
    from metabench.tasks.metaworld.envs import load_benchmark

    tasks = list(load_benchmark("ML1", ENV_NAME, 0).test_tasks[:2])
    encoded = task_to_json(tasks[0])
    assert set(encoded) == {"env_name", "data"} and encoded["env_name"] == ENV_NAME
    assert task_from_json(json.loads(json.dumps(encoded))) == tasks[0]

    evaluator = MetaEvaluator(make_ml1_test_env, tasks, 1, 1, seed=3)
    result = evaluator.evaluate(NOP(gym.spaces.Box(-1, 1, (4,)), "random", seed=0))
    record = MetaTestRecord.of(result)
    restored = MetaTestRecord.from_json(json.loads(json.dumps(record.to_json())))
    assert restored == record and restored.result == result
    assert [t.restore_task() for t in restored.tasks] == tasks
    assert [t.task_index for t in restored.tasks] == [0, 1]
    assert all(t.episode_successes is not None for t in result.tasks)
    replay = MetaEvaluator(
        make_ml1_test_env, [t.restore_task() for t in restored.tasks], 1, 1, seed=3
    )
    again = replay.evaluate(NOP(gym.spaces.Box(-1, 1, (4,)), "random", seed=0))
    assert MetaTestRecord.of(again) == record


# -- the adapter alone, driven by hand on a PointGoal vector env (no Meta-World needed) ------------
def point_vec(autoreset_mode: gym.vector.AutoresetMode) -> gym.vector.SyncVectorEnv:
    tasks = [{"goal": [0.3, 0.0]}, {"goal": [0.0, -0.2]}]

    def make(task: dict[str, list[float]]):
        def thunk() -> gym.Env[Any, Any]:
            env = PointGoalEnv(horizon=4)
            env.set_task(task)
            return env

        return thunk

    return gym.vector.SyncVectorEnv([make(t) for t in tasks], autoreset_mode=autoreset_mode)


def test_adapter_requires_same_step_autoreset():
    envs = point_vec(gym.vector.AutoresetMode.NEXT_STEP)
    with pytest.raises(ValueError, match="SAME_STEP"):
        MetaWorldAgent(NOP(envs.single_action_space), envs)
    with pytest.raises(ValueError, match="MetaRLAlgorithm"):
        MetaWorldAgent(object(), point_vec(gym.vector.AutoresetMode.SAME_STEP))  # type: ignore[arg-type]


def drive(agent: MetaWorldAgent, envs: gym.vector.VectorEnv, adaptation_steps: int) -> None:
    """Meta-World's call sequence: init, (reset, explore 2 episodes, adapt) x steps, evaluate."""
    from collections import namedtuple

    timestep = namedtuple("timestep", "observation action reward terminated truncated aux")
    agent.init()
    for _ in range(adaptation_steps):
        obs, _ = envs.reset(seed=0)
        episodes = np.zeros(envs.num_envs)
        while (episodes < 2).any():
            actions, aux = agent.adapt_action(obs)
            next_obs, rewards, terminated, truncated, _ = envs.step(actions)
            agent.step(timestep(obs, actions, rewards, terminated, truncated, aux))
            episodes += terminated | truncated
            obs = next_obs
        agent.adapt()
    obs, _ = envs.reset(seed=1)
    agent.reset(np.ones(envs.num_envs, dtype=bool))
    for _ in range(4 * 3):
        obs, _, terminated, truncated, _ = envs.step(agent.eval_action(obs))
        agent.reset(terminated | truncated)


@pytest.mark.parametrize("adaptation_steps", [1, 2])
def test_adapter_protocol_by_hand(adaptation_steps: int):
    envs = point_vec(gym.vector.AutoresetMode.SAME_STEP)
    algo = CountingNOP(envs.single_action_space)
    agent = MetaWorldAgent(algo, envs)
    drive(agent, envs, adaptation_steps)
    # one exploration policy and one adaptation per sub-env; more adaptation steps = more episodes
    assert len(algo.policies) == 2 and len(algo.batches) == 2
    n_episodes = 2 * adaptation_steps
    for sub_env, batch in enumerate(algo.batches):
        assert batch.lengths.tolist() == [4] * n_episodes
        goal = np.array([[0.3, 0.0], [0.0, -0.2]][sub_env])
        np.testing.assert_allclose(batch.rewards, -np.linalg.norm(goal))  # zero actions, origin
        np.testing.assert_array_equal(batch.last_observations, np.zeros((n_episodes, 2)))
    # a reset before every episode: exploration episodes + the 3 evaluation episodes
    assert [p.n_resets for p in algo.policies] == [n_episodes + 3] * 2
    assert [p.n_actions for p in algo.policies] == [4 * n_episodes + 12] * 2


def test_adapter_misuse_is_an_error():
    envs = point_vec(gym.vector.AutoresetMode.SAME_STEP)
    agent = MetaWorldAgent(NOP(envs.single_action_space), envs)
    obs, _ = envs.reset(seed=0)
    with pytest.raises(RuntimeError, match="before init"):
        agent.adapt_action(obs)
    agent.init()
    with pytest.raises(RuntimeError, match="before adapt"):
        agent.eval_action(obs)
    agent.adapt()
    with pytest.raises(RuntimeError, match="no exploration episode"):
        agent.eval_action(obs)
    agent.init()
    with pytest.raises(ValueError, match="one row per sub-env"):
        agent.adapt_action(obs[:1])


@pytest.mark.metaworld
def test_rl2_agent_runs_in_metaworld_evaluation():
    """An RL2-PPO agent meta-trained by metabench, evaluated by Meta-World's own evaluator on
    eval envs that add RL2's inputs themselves (``recurrent_info_in_obs``, rewards / 10)."""
    from metaworld.evaluation import metalearning_evaluation

    from metabench.algos.rl2.rl2_ppo import RL2PPO, RL2PPOConfig

    config = RL2PPOConfig(
        meta_batch_size=2, episodes_per_trial=2, hidden_size=8, n_epochs=1, reward_scale=0.1
    )
    algo = RL2PPO(
        "metabench/ML1-v0", config=config, env_kwargs={"env_name": ENV_NAME, "horizon": H}
    )
    algo.train(1)
    envs = gym.make_vec(
        "Meta-World/ML1-test",
        env_name=ENV_NAME,
        meta_batch_size=2,
        total_tasks_per_cls=4,
        max_episode_steps=H,
        seed=0,
        recurrent_info_in_obs=True,
    )
    assert envs.single_observation_space.shape == algo.venv.observation_space.shape == (45,)
    agent = MetaWorldAgent(algo, envs)
    success_rate, mean_return, _ = metalearning_evaluation(
        agent, envs, num_evals=1, adaptation_steps=1, adaptation_episodes=2, evaluation_episodes=2
    )
    envs.close()
    assert 0.0 <= success_rate <= 1.0 and np.isfinite(mean_return)
    assert agent.n_inits == 1 and agent.n_adaptations == 1
    # RL2 adapts in its hidden state: each sub-env's adapted policy goes on from its own
    # exploration policy's state
    assert agent._adapted is not None
    assert all(a._explored is p for a, p in zip(agent._adapted, agent._policies, strict=True))
    assert [batch.n_episodes for batch in agent.batches] == [2, 2]


# -- Meta-World's evaluator and metabench's agree on a policy with frequent, varied success --------
WAYPOINTS = np.array(
    [
        [-0.05, 0.8, 0.1],
        [0.05, 0.8, 0.1],
        [0.05, 0.85, 0.25],
        [-0.05, 0.85, 0.25],
        [-0.05, 0.9, 0.1],
        [0.05, 0.9, 0.1],
    ]
)
"""Hand positions spread over reach-v3's goal box ``[-0.1, 0.1] x [0.8, 0.9] x [0.05, 0.3]``."""


class WaypointPolicy(Policy):
    """Moves the hand through :data:`WAYPOINTS` in an order drawn at every episode start.

    reach-v3 succeeds at any step where the hand is within 5 cm of the hidden goal, so on its
    test goals about half the episodes of 100 steps succeed, more on some goals than on others.
    """

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.reset()

    def reset(self) -> None:
        self.order = self.rng.permutation(len(WAYPOINTS))
        self.reached = 0

    def get_action(self, observation: np.ndarray) -> np.ndarray:
        hand = np.asarray(observation[:3])
        last = len(self.order) - 1
        while self.reached < last and np.linalg.norm(self.target - hand) < 0.02:
            self.reached += 1
        return np.append(np.clip((self.target - hand) * 50, -1, 1), 0.0).astype(np.float32)

    @property
    def target(self) -> np.ndarray:
        return WAYPOINTS[self.order[self.reached]]


class WaypointReach(MetaRLAlgorithm):
    """A scripted reach-v3 "algorithm" that does not adapt: each policy draws its own stream."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def train(self, n_iterations: int) -> dict[str, float]:
        return {}

    def get_exploration_policy(self) -> Policy:
        return WaypointPolicy(np.random.default_rng(self.rng.integers(2**63)))

    def adapt_policy(
        self, exploration_policy: Policy, exploration_episodes: EpisodeBatch
    ) -> Policy:
        return exploration_policy


@pytest.mark.metaworld
def test_metaworld_evaluation_and_metabench_agree_on_every_ml1_test_goal():
    """``metalearning_evaluation`` through :class:`MetaWorldAgent` and metabench's batched
    meta-test of the shipped ML1-reach spec (``test_tasks = "all"``) run the same algorithm on
    the same 50 test goals, each with its own random streams; their success rates must agree
    within the binomial noise of their test episodes (3 per goal on each side).

    One sub-env per round: Meta-World keys its counts by env name, so with more ML1 sub-envs
    it would count the first episodes to end, which are the successful ones (episodes end at
    the first success during its evaluation)."""
    import dataclasses

    from metaworld.evaluation import metalearning_evaluation

    from metabench.harness.benchmarks import get_benchmark
    from metabench.harness.run import make_evaluator

    horizon, goals, test_episodes = 100, 50, 3
    envs = gym.make_vec(
        "Meta-World/ML1-test",
        env_name=ENV_NAME,
        meta_batch_size=1,
        total_tasks_per_cls=goals,
        max_episode_steps=horizon,
        seed=0,
    )
    tasks: list[Any] = []

    metaworld_rate, _, _ = metalearning_evaluation(
        recording_agent(envs, tasks)(WaypointReach(seed=1), envs),
        envs,
        num_evals=goals,
        adaptation_steps=1,
        adaptation_episodes=1,
        evaluation_episodes=test_episodes,
    )
    envs.close()

    spec = get_benchmark("ML1-reach")
    kwargs = {**spec.env_kwargs, "horizon": horizon}  # the split adds "test" and the seed
    spec = dataclasses.replace(
        spec, test_env_kwargs=kwargs, exploration_episodes=1, test_episodes=test_episodes
    )
    evaluator = make_evaluator(spec, seed=0)
    assert {t.data for t in evaluator.test_tasks} == {t.data for t in tasks}  # the same goals
    assert len(evaluator.test_tasks) == len({t.data for t in tasks}) == goals
    result = evaluator.evaluate(WaypointReach(seed=2), processes=2)
    metabench_rate = result.test_episode_success_rate
    assert metabench_rate is not None

    n = goals * test_episodes  # test episodes on each side
    pooled = (metaworld_rate + metabench_rate) / 2
    assert 0.2 < pooled < 0.8  # frequent and varied: a test of the counting, not of zeros
    noise = np.sqrt(pooled * (1 - pooled) * (2 / n))
    assert abs(metaworld_rate - metabench_rate) <= 3 * noise + 1e-9, (
        metaworld_rate,
        metabench_rate,
    )


class FixedWaypointReach(WaypointReach):
    """:class:`WaypointReach` with one fixed order: the same episode on the same goal, so both
    evaluators see identical episodes and only their counting can differ."""

    def get_exploration_policy(self) -> Policy:
        policy = WaypointPolicy(np.random.default_rng(0))
        policy.rng = FixedOrder()
        policy.reset()
        return policy


class FixedOrder:
    def permutation(self, n: int) -> np.ndarray:
        return np.arange(n)


@pytest.mark.metaworld
def test_metaworld_count_reproduces_metaworlds_evaluator_with_many_sub_envs():
    """Meta-World's ``metalearning_evaluation`` with 5 ML1 sub-envs per round, and metabench's
    meta-test of the very tasks it drew (round by round, sub-env by sub-env) replayed through
    :mod:`metabench.tasks.metaworld.count`: the same success rate and return. The fraction
    of test episodes that succeed is lower: Meta-World counts the first episodes to end."""
    from metaworld.evaluation import metalearning_evaluation

    horizon, envs_per_class, rounds = 100, 5, 4
    envs = gym.make_vec(
        "Meta-World/ML1-test",
        env_name=ENV_NAME,
        meta_batch_size=envs_per_class,
        total_tasks_per_cls=envs_per_class * rounds,
        max_episode_steps=horizon,
        seed=0,
    )
    tasks: list[Any] = []

    success_rate, mean_return, per_class = metalearning_evaluation(
        recording_agent(envs, tasks)(FixedWaypointReach(seed=0), envs),
        envs,
        num_evals=rounds,
        adaptation_steps=1,
        adaptation_episodes=1,
        evaluation_episodes=3,
    )
    envs.close()

    def make_env() -> gym.Env[Any, Any]:
        from metabench.tasks.metaworld.envs import ML1Env

        return ML1Env(ENV_NAME, split="test", seed=0, horizon=horizon)

    evaluator = MetaEvaluator(make_env, tasks, 1, 3, metaworld_envs_per_class=envs_per_class)
    result = evaluator.evaluate(FixedWaypointReach(seed=0))
    count = result.metaworld
    assert count is not None
    assert count.success_rate == pytest.approx(success_rate, abs=1e-12)
    assert count.mean_return == pytest.approx(mean_return, rel=1e-9)
    assert count.success_rate_per_class == pytest.approx(per_class)
    per_episode = result.test_episode_success_rate
    assert per_episode is not None and 0.1 < per_episode < 0.9  # varied: the race matters
    assert count.success_rate > per_episode  # ... and favours the successes
