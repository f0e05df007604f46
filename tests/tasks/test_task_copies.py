"""A pickled or deep-copied task env keeps its task (garage's ``test_pickling_keeps_goal``), and
the copy then runs as the original does: same observations and rewards under the same seed."""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import metabench  # noqa: F401 - registers the metabench/ ids
from metabench.tasks.toy.envs import BanditEnv, PointGoalEnv

COPIES: dict[str, Callable[[Any], Any]] = {
    "pickle": lambda env: pickle.loads(pickle.dumps(env)),
    "deepcopy": copy.deepcopy,
}


def halfcheetah_vel() -> tuple[gym.Env[Any, Any], Any]:
    from metabench.tasks.halfcheetah.envs import HalfCheetahVelEnv

    # a task the env would not draw from (0, 2), so a copy that draws one cannot match it
    return HalfCheetahVelEnv(horizon=10, action_scale=10.0), {"velocity": 2.7}


def halfcheetah_dir() -> tuple[gym.Env[Any, Any], Any]:
    from metabench.tasks.halfcheetah.envs import HalfCheetahDirEnv

    return HalfCheetahDirEnv(horizon=10), {"direction": -1.0}


def point_goal() -> tuple[gym.Env[Any, Any], Any]:
    return PointGoalEnv(horizon=10), {"goal": [0.7, -0.6]}  # outside the default goal_range


def bandit() -> tuple[gym.Env[Any, Any], Any]:
    return BanditEnv(n_arms=5), {"best_arm": 3}


def metaworld(lean: bool) -> Callable[[], tuple[gym.Env[Any, Any], Any]]:
    def make() -> tuple[gym.Env[Any, Any], Any]:
        from metabench.tasks.metaworld.envs import ML1Env

        env = ML1Env("reach-v3", horizon=10, lean=lean)
        return env, env.tasks[7]

    return make


def classic(env_id: str, task: Any = None, **kwargs: Any) -> Callable[[], tuple[Any, Any]]:
    """A task env of the classic suite, with ``task`` (one it would not draw, where there is
    one), or else one drawn with a generator of its own (never the seeded episode's)."""

    def make() -> tuple[gym.Env[Any, Any], Any]:
        env = gym.make(env_id, horizon=10, disable_env_checker=True, **kwargs).unwrapped
        return env, task if task is not None else env.sample_tasks(1, np.random.default_rng(9))[0]

    return make


CLASSIC = [
    pytest.param(classic("metabench/AntDir-v0", {"angle": 1.0}), id="AntDir"),
    pytest.param(classic("metabench/AntGoal-v0", {"goal": [5.0, 0.0]}), id="AntGoal"),
    pytest.param(classic("metabench/HumanoidDir-v0", {"angle": 7.0}), id="HumanoidDir"),
    pytest.param(classic("metabench/WalkerRandParams-v0"), id="WalkerRandParams"),
    pytest.param(classic("metabench/HopperRandParams-v0"), id="HopperRandParams"),
    pytest.param(
        classic("metabench/HalfCheetahVel-v0", {"velocity": 3.5}, protocol="oyster"),
        id="HalfCheetahVel-oyster",
    ),
]
"""The classic suite's MuJoCo envs (the point robots need no MuJoCo: below)."""


ENVS = [
    pytest.param(halfcheetah_vel, id="HalfCheetahVel", marks=pytest.mark.mujoco),
    pytest.param(halfcheetah_dir, id="HalfCheetahDir", marks=pytest.mark.mujoco),
    pytest.param(point_goal, id="PointGoal"),
    pytest.param(bandit, id="Bandit"),
    *[pytest.param(*p.values, id=p.id, marks=pytest.mark.mujoco) for p in CLASSIC],
    pytest.param(classic("metabench/PointRobot-v0", {"goal": [3.0, 3.0]}), id="PointRobot"),
    pytest.param(
        classic("metabench/SparsePointRobot-v0", {"goal": [0.0, -1.0]}), id="SparsePointRobot"
    ),
    pytest.param(metaworld(lean=True), id="ML1-lean", marks=pytest.mark.metaworld),
    pytest.param(metaworld(lean=False), id="ML1-metaworld-step", marks=pytest.mark.metaworld),
]


def rollout(env: gym.Env[Any, Any], seed: int) -> tuple[list[np.ndarray], list[float], Any]:
    """Observations and rewards of a seeded episode with seeded random actions; the task."""
    obs, info = env.reset(seed=seed)
    env.action_space.seed(seed)
    observations, rewards = [obs], []
    done = False
    while not done:
        obs, reward, terminated, truncated, _ = env.step(env.action_space.sample())
        observations.append(obs)
        rewards.append(float(reward))
        done = terminated or truncated
    return observations, rewards, info["task"]


def assert_same_run(copied: gym.Env[Any, Any], original: gym.Env[Any, Any], seed: int = 5) -> Any:
    """Both envs give the same seeded episode, task included; return that task."""
    observations, rewards, copied_task = rollout(copied, seed)
    expected_observations, expected_rewards, original_task = rollout(original, seed)
    assert copied_task == original_task
    assert rewards == expected_rewards
    for got, expected in zip(observations, expected_observations, strict=True):
        np.testing.assert_array_equal(got, expected)
    return copied_task


@pytest.mark.parametrize("how", COPIES)
@pytest.mark.parametrize("make", ENVS)
def test_a_copy_keeps_the_task_set_and_runs_as_the_original(make, how) -> None:
    original, task = make()
    original.set_task(task)
    copied = COPIES[how](original)
    assert type(copied) is type(original)
    assert copied.task == task
    assert assert_same_run(copied, original) == task
    original.close()
    copied.close()


@pytest.mark.parametrize("make", ENVS)
def test_a_copy_keeps_a_task_the_env_drew_and_draws_again_on_a_seeded_reset(make) -> None:
    """The env's own draw is copied as such: an unseeded reset keeps it, a seeded one draws
    the same new task in both (the task a fresh env draws with that seed)."""
    original, _ = make()
    original.reset(seed=1)
    drawn = original.task
    copied = copy.deepcopy(original)
    assert copied.task == drawn
    copied.reset()
    assert copied.task == drawn
    fresh, _ = make()
    seed = next(s for s in range(2, 100) if fresh.reset(seed=s)[1]["task"] != drawn)
    assert assert_same_run(copied, original, seed) == fresh.task
    for env in (original, copied, fresh):
        env.close()


@pytest.mark.mujoco
def test_a_copied_rl2_trial_keeps_its_task() -> None:
    """Wrappers copy their task env with it: an RL2 env made by gym.make keeps the task."""
    env = gym.make("metabench/RL2-HalfCheetahVel-v0", horizon=5, episodes_per_trial=2)
    env.reset(seed=0, options={"task": {"velocity": 2.5}})
    copied = copy.deepcopy(env)
    assert copied.unwrapped.task == {"velocity": 2.5}
    env.close()
    copied.close()
