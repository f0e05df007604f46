"""PEARL with ``use_next_obs_in_context`` (oyster's Walker- and Hopper-Rand-Params): every
context transition is ``[o, a, r, o']`` in training and at meta-test, where ``o'`` is the
observation the step reached, the final one at an inner episode's end. Checked against a second
copy of the env stepped with the same actions."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from metabench.algos.pearl import PEARL, PEARLConfig, episode_context, pearl_env
from metabench.data import EpisodeBatch, EpisodeRecorder
from metabench.evaluation import MetaEvaluator
from metabench.tasks.toy.envs import PointGoalEnv
from metabench.wrappers import Trial
from tests.factories import PEARL_ON_POINTGOAL, explore_pointgoal

TINY = {**PEARL_ON_POINTGOAL, "use_next_obs_in_context": True}
GOAL = {"goal": [0.3, -0.2]}
HORIZON = 5


def trained(**overrides: Any) -> PEARL:
    algo = PEARL(PointGoalEnv, config=PEARLConfig(**{**TINY, **overrides}), seed=0)
    algo.train(1)
    return algo


def replayed(actions: list[np.ndarray], episodes: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(o, o')`` of every step of ``episodes`` episodes of the task, the actions replayed on
    a raw env (no Trial, no wrapper): the transitions the context must hold."""
    env = PointGoalEnv(horizon=HORIZON)
    steps = iter(actions)
    pairs = []
    for _ in range(episodes):
        obs, _ = env.reset(options={"task": GOAL})
        while True:
            # pearl_env presents actions in [-1, 1]; PointGoal's box is [-0.1, 0.1]
            after, _, terminated, truncated, _ = env.step(0.1 * next(steps))
            pairs.append((obs, after))
            obs = after
            if terminated or truncated:
                break
    return pairs


def test_the_wrapper_shows_the_observation_each_step_reached_final_ones_included():
    env = pearl_env(Trial(PointGoalEnv(horizon=HORIZON), episodes_per_trial=2), True)
    assert env.observation_space.shape == (2 + 1 + 2,)
    obs, _ = env.reset(seed=0, options={"task": GOAL})
    rng = np.random.default_rng(0)
    actions, shown = [], []
    for _ in range(2 * HORIZON):
        actions.append(rng.uniform(-1, 1, 2).astype(np.float32))
        obs, reward, *_ = env.step(actions[-1])
        np.testing.assert_allclose(obs[2], float(reward), rtol=1e-6)
        shown.append(obs)
    pairs = replayed(actions, episodes=2)
    for (_, after), seen in zip(pairs, shown, strict=True):
        np.testing.assert_allclose(seen[3:], after, rtol=0, atol=1e-6)
    # the first observation of the second episode is its start, and shows the first's end
    start, _ = PointGoalEnv(horizon=HORIZON).reset(options={"task": GOAL})
    np.testing.assert_allclose(shown[HORIZON - 1][:2], start, rtol=0, atol=1e-6)
    assert not np.allclose(shown[HORIZON - 1][3:], start)


def test_meta_test_context_is_o_a_r_and_the_observation_reached():
    algo = trained()
    episodes, actions, beliefs = explore_pointgoal(algo, GOAL["goal"], 3, HORIZON)
    context = episode_context(episodes, obs_dim=2, next_observation=True)
    pairs = replayed(actions, episodes=3)
    by_hand = np.stack(
        [np.concatenate([o, a, [r], after]) for (o, after), a, r in
         zip(pairs, actions, episodes.rewards, strict=True)]
    ).astype(np.float32)  # fmt: skip
    np.testing.assert_allclose(context, by_hand, rtol=0, atol=1e-6)
    # exploration's running posterior is built from the same rows, episode by episode
    for k in (1, 2):
        mean, variance = algo.encoder(torch.as_tensor(context[: k * HORIZON]))
        torch.testing.assert_close(beliefs[k][0], mean.detach())
        torch.testing.assert_close(beliefs[k][1], variance.detach())
    # the adapted policy's posterior is the one of all three episodes' rows
    adapted = algo.adapt_policy(algo.get_exploration_policy(), episodes)
    torch.testing.assert_close(
        adapted.policies.means[0],  # type: ignore[attr-defined]
        algo.encoder(torch.as_tensor(context))[0].detach(),
    )


def test_training_context_holds_the_stored_transitions_with_their_next_observation():
    algo = trained()
    first = next(m for m in algo.encoder.modules() if isinstance(m, torch.nn.Linear))
    assert first.in_features == 2 + 2 + 1 + 2
    buffer = algo.encoder_buffers[0]
    size = len(buffer)
    stored = np.concatenate(
        [
            buffer.observations[:size, 0],
            buffer.actions[:size, 0],
            buffer.rewards[:size],
            buffer.next_observations[:size, 0],
        ],
        axis=1,
    )
    context = algo._context([0])[0].numpy()
    assert context.shape == (TINY["embedding_batch_size"], 7)
    for row in context:
        assert np.any(np.all(stored == row, axis=1)), row
    # each stored next observation is the following step's observation within an episode
    horizon = PointGoalEnv().horizon
    np.testing.assert_array_equal(
        buffer.next_observations[: horizon - 1, 0], buffer.observations[1:horizon, 0]
    )


def test_batched_meta_test_of_one_task_is_the_sequential_one():
    algo = trained()
    evaluator = MetaEvaluator(PointGoalEnv, [GOAL], 3, 2)
    with algo.evaluation_streams(5):
        sequential = evaluator.evaluate(algo)
    with algo.evaluation_streams(5):
        batched = evaluator.evaluate(algo, processes=1)
    for one, other in zip(sequential.tasks, batched.tasks, strict=True):
        assert one.episode_returns == other.episode_returns


def test_observations_without_the_next_observation_are_refused():
    algo = trained()
    policies = algo.get_exploration_policies(1)
    with pytest.raises(ValueError, match=r"width 3, expected 2 \(or 5 with .*next observation"):
        policies.get_actions(np.zeros((1, 3), np.float32), np.zeros(1, dtype=np.int64))
    episodes = EpisodeBatch.from_list([_path_of_width(3)])
    with pytest.raises(ValueError, match="width 3, expected 2"):
        episode_context(episodes, obs_dim=2, next_observation=True)


def _path_of_width(width: int) -> Any:
    recorder = EpisodeRecorder()
    recorder.record(np.zeros(width), np.zeros(2), 0.0, ended=True, terminated=False)
    recorder.last_observation = np.zeros(width)
    return recorder.path()
