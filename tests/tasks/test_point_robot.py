"""Point-Robot and Sparse-Point-Robot against oyster's and VariBAD's code, re-done here.

oyster: ``katerakelly/oyster`` 44e20fd ``rlkit/envs/point_robot.py`` and ``rlkit/envs/wrappers.py``
(``NormalizedBoxEnv``); VariBAD: ``lmzintgraf/varibad`` 57e1795
``environments/navigation/point_robot.py``.
"""

from __future__ import annotations

import copy
import math
import pickle
import random
from typing import Any

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from scipy import stats

from metabench.errors import InvalidTaskError
from metabench.tasks.point_robot.envs import (
    OYSTER_N_TASKS,
    OYSTER_N_TEST_TASKS,
    OYSTER_N_TRAIN_TASKS,
    PointRobotEnv,
    SparsePointRobotEnv,
    oyster_goals,
    oyster_tasks,
)
from metabench.validation import ConfigError

CLASSES = [PointRobotEnv, SparsePointRobotEnv]
PROTOCOLS = ["oyster", "varibad"]


def oyster_original_goals(sparse: bool, n_tasks: int = 100) -> np.ndarray:
    """oyster's ``PointEnv.__init__`` / ``SparsePointEnv.__init__`` with ``randomize_tasks``,
    line by line, on the global ``np.random`` (restored afterwards)."""
    saved = np.random.get_state()
    try:
        np.random.seed(1337)
        goals: Any = [
            [np.random.uniform(-1.0, 1.0), np.random.uniform(-1.0, 1.0)] for _ in range(n_tasks)
        ]
        if sparse:
            np.random.seed(1337)
            radius = 1.0
            angles = np.linspace(0, np.pi, num=n_tasks)
            xs = radius * np.cos(angles)
            ys = radius * np.sin(angles)
            goals = np.stack([xs, ys], axis=1)
            np.random.shuffle(goals)
            goals = goals.tolist()
        return np.array(goals)
    finally:
        np.random.set_state(saved)


def oyster_move(action: np.ndarray) -> np.ndarray:
    """rlkit's ``NormalizedBoxEnv.step`` around gym 0.12's ``Box(low=-0.1, high=0.1, shape=(2,))``
    (float32 bounds), then ``PointEnv.step``'s ``state + action``."""
    lb = np.full(2, -0.1, dtype=np.float32)
    ub = np.full(2, 0.1, dtype=np.float32)
    scaled_action = lb + (action + 1.0) * 0.5 * (ub - lb)
    return np.clip(scaled_action, lb, ub)


def varibad_move(action: np.ndarray) -> np.ndarray:
    """VariBAD's ``PointEnv.step``: clip to ``[-1, 1]``, then ``0.1 * action``."""
    return 0.1 * np.clip(action, -1.0, 1.0)


def oyster_rewards(state: np.ndarray, goal: np.ndarray, goal_radius: float) -> tuple[float, float]:
    """oyster's dense reward and its ``sparse_reward`` (VariBAD's are the same formulas)."""
    x, y = state
    x -= goal[0]
    y -= goal[1]
    reward = -((x**2 + y**2) ** 0.5)
    mask = (np.float64(reward) >= -goal_radius).astype(np.float32)
    sparse_reward = reward * mask
    if reward >= -goal_radius:
        sparse_reward += 1
    return float(reward), float(sparse_reward)


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("cls", CLASSES)
def test_check_env_passes(cls, protocol):
    check_env(cls(protocol=protocol), skip_render_check=True)


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("cls", CLASSES)
def test_position_reward_and_horizon_recomputed_as_the_original_steps(cls, protocol):
    """A whole episode replayed with the original's step: noisy moves to the goal, many of them
    outside ``[-1, 1]``, then straight away from it; position, reward (the sparse one for the
    sparse env, inside and outside its radius), no termination, truncation at oyster's 20 or
    VariBAD's 100 steps."""
    env = cls(protocol=protocol)
    goal = np.array([0.05, 0.6])
    position, _ = env.reset(seed=4, options={"task": {"goal": goal.tolist()}})
    state = position.copy()
    move = oyster_move if protocol == "oyster" else varibad_move
    rng = np.random.default_rng(0)
    rewards, inside = [], 0
    for step in range(1, {"oyster": 20, "varibad": 100}[protocol] + 1):
        if step <= env.horizon - 6:
            action = 15.0 * (goal - state) + rng.normal(0.0, 0.5, size=2)
        else:
            action = np.array([-1.5, -1.5])
        obs, reward, terminated, truncated, info = env.step(action)
        state = state + move(action)
        dense, sparse = oyster_rewards(state.copy(), goal, 0.2)
        np.testing.assert_array_equal(obs, state)
        assert info["reward_dense"] == dense
        assert reward == (sparse if cls is SparsePointRobotEnv else dense)
        inside += sparse > 0
        rewards.append(reward)
        assert terminated is False
        assert truncated is (step == env.horizon)
    if cls is SparsePointRobotEnv:
        assert 0 < inside < len(rewards)  # the episode met both branches of the sparse reward


@pytest.mark.parametrize("cls", CLASSES)
def test_sparse_and_dense_rewards_along_a_straight_walk_to_the_goal(cls):
    """VariBAD's robot walks from the origin to the goal (0, 1) at 0.1 per step: the dense
    reward is ``-(1 - 0.1 k)``, the sparse one 0 until the goal is within 0.2, then
    ``1 - distance``."""
    env = cls(protocol="varibad")
    env.reset(seed=0, options={"task": {"goal": [0.0, 1.0]}})
    rewards = [env.step(np.array([0.0, 1.0]))[1] for _ in range(10)]
    distances = [1.0 - 0.1 * k for k in range(1, 11)]
    if cls is PointRobotEnv:
        assert rewards == pytest.approx([-d for d in distances], abs=1e-12)
    else:
        assert rewards[:7] == [0.0] * 7  # distance 0.3 and more
        assert rewards[8:] == pytest.approx([1.0 - d for d in distances[8:]], abs=1e-12)


@pytest.mark.parametrize("cls", CLASSES)
def test_start_position_of_each_protocol(cls):
    """oyster's dense robot starts uniformly on ``[-1, 1]^2`` (its ``reset_model``); its sparse
    robot and both of VariBAD's start at the origin."""
    starts = np.array([cls(protocol="oyster").reset(seed=s)[0] for s in range(200)])
    if cls is PointRobotEnv:
        assert np.abs(starts).max() <= 1.0
        assert starts.min(axis=0) == pytest.approx([-1, -1], abs=0.05)
        assert starts.max(axis=0) == pytest.approx([1, 1], abs=0.05)
    else:
        np.testing.assert_array_equal(starts, 0.0)
    np.testing.assert_array_equal(cls(protocol="varibad").reset(seed=3)[0], [0.0, 0.0])


@pytest.mark.parametrize("sparse", [False, True])
def test_oyster_task_lists_are_oysters_goals_from_seed_1337(sparse):
    """The 100 goals oyster's env builds (and their order, which makes its 80/20 split)."""
    expected = oyster_original_goals(sparse)
    np.testing.assert_array_equal(oyster_goals(sparse), expected)
    tasks = oyster_tasks(sparse)
    np.testing.assert_array_equal([t["goal"] for t in tasks], expected)
    assert OYSTER_N_TASKS == OYSTER_N_TRAIN_TASKS + OYSTER_N_TEST_TASKS == len(tasks)
    np.testing.assert_array_equal(oyster_goals(sparse, 7), oyster_original_goals(sparse, 7))


def test_oyster_sparse_tasks_are_the_grid_of_its_goals():
    env = SparsePointRobotEnv(protocol="oyster")
    goals = np.array([t["goal"] for t in env.sample_tasks(2000, np.random.default_rng(0))])
    grid = oyster_original_goals(sparse=True)
    matches = np.isclose(goals[:, None, :], grid[None, :, :], rtol=0, atol=1e-15).all(axis=2)
    assert (matches.sum(axis=1) == 1).all()  # each drawn goal is one of oyster's 100
    assert len(np.unique(matches.argmax(axis=1))) == 100


def test_oyster_dense_tasks_follow_oysters_distribution():
    """Two-sample KS test per axis against oyster's own draws (``np.random.uniform(-1, 1)``)."""
    env = PointRobotEnv(protocol="oyster")
    goals = np.array([t["goal"] for t in env.sample_tasks(4000, np.random.default_rng(1))])
    legacy = np.random.RandomState(5)
    original = np.array(
        [[legacy.uniform(-1.0, 1.0), legacy.uniform(-1.0, 1.0)] for _ in range(4000)]
    )
    for axis in range(2):
        assert stats.ks_2samp(goals[:, axis], original[:, axis]).pvalue > 0.01


@pytest.mark.parametrize("cls", CLASSES)
def test_varibad_tasks_follow_varibads_semi_circle_sampler(cls):
    """VariBAD's ``semi_circle_goal_sampler`` (``random.uniform(0, pi)`` on the unit circle)
    for both envs: KS test on the angle, every goal on the upper unit half circle."""
    env = cls(protocol="varibad")
    goals = np.array([t["goal"] for t in env.sample_tasks(4000, np.random.default_rng(2))])
    generator = random.Random(3)
    original = [generator.uniform(0, np.pi) for _ in range(4000)]
    np.testing.assert_allclose(np.linalg.norm(goals, axis=1), 1.0, rtol=1e-12)
    angles = np.arctan2(goals[:, 1], goals[:, 0])
    assert angles.min() >= 0.0 and angles.max() <= math.pi
    assert stats.ks_2samp(angles, original).pvalue > 0.01


@pytest.mark.parametrize("how", [copy.deepcopy, lambda env: pickle.loads(pickle.dumps(env))])
@pytest.mark.parametrize("cls", CLASSES)
def test_a_copy_keeps_the_task_and_the_protocol(cls, how):
    env = cls(protocol="varibad", horizon=7)
    env.set_task({"goal": [0.25, 0.5]})
    copied = how(env)
    assert (copied.task, copied.protocol, copied.horizon) == ({"goal": [0.25, 0.5]}, "varibad", 7)
    assert copied.reset(seed=0)[1]["task"] == {"goal": [0.25, 0.5]}


@pytest.mark.parametrize("cls", CLASSES)
def test_unseeded_reset_keeps_the_task_and_a_seeded_one_redraws_the_envs_own(cls):
    env = cls(protocol="varibad")
    _, info = env.reset(seed=1)
    drawn = info["task"]
    assert env.reset()[1]["task"] == drawn
    assert env.reset(seed=2)[1]["task"] != drawn
    env.set_task({"goal": [0.1, 0.2]})
    assert env.reset(seed=3)[1]["task"] == {"goal": [0.1, 0.2]}


@pytest.mark.parametrize(
    "task",
    [
        {"goal": [0.1]},
        {"goal": [0.1, float("nan")]},
        {"goal": "ab"},
        {"goal": [[0.1, 0.2]]},
        {"velocity": 1.0},
        {"goal": [0.1, 0.2], "extra": 1},
        [0.1, 0.2],
    ],
)
@pytest.mark.parametrize("cls", CLASSES)
def test_invalid_tasks_raise_and_leave_the_env_as_it_was(cls, task):
    env = cls()
    env.reset(seed=0, options={"task": {"goal": [0.3, 0.4]}})
    with pytest.raises(InvalidTaskError, match="goal"):
        env.set_task(task)
    with pytest.raises(InvalidTaskError):
        env.reset(options={"task": task})
    assert env.task == {"goal": [0.3, 0.4]}


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"protocol": "pearl"}, ConfigError, "'oyster', 'varibad'"),
        ({"horizon": 0}, ValueError, "horizon"),
        ({"goal_radius": 0.0}, ValueError, "goal_radius"),
        ({"goal_radius": -1.0}, ValueError, "goal_radius"),
        ({"radius": 0.2}, ConfigError, "goal_radius"),
    ],
)
def test_bad_arguments_raise_naming_the_fix(kwargs, error, match):
    with pytest.raises(error, match=match):
        SparsePointRobotEnv(**kwargs)
