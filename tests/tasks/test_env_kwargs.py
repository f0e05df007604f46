"""``gymnasium.make`` with a wrong keyword argument, for every metabench id: one line that names
the argument, the id's public keyword arguments and the fix; valid ones build the same env."""

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import metabench  # noqa: F401  (registers the ids)
from metabench.tasks.family import task_envs
from metabench.validation import ConfigError

PUBLIC = {
    "HalfCheetahVel": [
        "velocity_range",
        "horizon",
        "protocol",
        "action_scale",
        "frame_skip",
        "render_mode",
    ],
    "HalfCheetahDir": ["horizon", "protocol", "action_scale", "frame_skip", "render_mode"],
    "ML1": ["env_name", "split", "seed", "horizon", "reward_function_version", "lean"],
    "ML10": ["split", "seed", "horizon", "reward_function_version", "render_mode", "lean"],
    "ML45": ["split", "seed", "horizon", "reward_function_version", "render_mode", "lean"],
    "PointGoal": ["goal_range", "max_step", "horizon"],
    "PointRobot": ["protocol", "horizon"],
    "SparsePointRobot": ["protocol", "horizon", "goal_radius"],
    "AntDir": ["protocol", "horizon", "frame_skip", "render_mode"],
    "AntGoal": ["protocol", "horizon", "frame_skip", "render_mode"],
    "HumanoidDir": ["protocol", "horizon", "frame_skip", "render_mode"],
    "WalkerRandParams": ["protocol", "horizon", "frame_skip", "render_mode"],
    "HopperRandParams": ["protocol", "horizon", "frame_skip", "render_mode"],
    "Bandit": ["n_arms"],
}
"""Keyword arguments each task env documents (its own, and for HalfCheetah some of
Gymnasium's HalfCheetah-v5 that it passes on)."""

RL2_KEYWORDS = ("episodes_per_trial", "reward_scale", "sampler")
"""The keyword arguments of an RL2 id besides its task env's."""

INTERNAL = ["task_entry_point", "ctrl_cost_weight", "model_path", "observation_space", "benchmark"]
"""Arguments an id sets itself: never offered to the caller."""


def listed(message: str) -> list[str]:
    """The keyword arguments an error message lists (after "its keyword arguments: ")."""
    return message.split("(its keyword arguments: ")[1].rstrip(")").split(", ")


@pytest.mark.parametrize("rl2", [False, True], ids=["task", "rl2"])
@pytest.mark.parametrize("name", sorted(task_envs()))
def test_an_unknown_keyword_names_it_and_lists_the_public_ones(name, rl2):
    env_id = f"metabench/RL2-{name}-v0" if rl2 else f"metabench/{name}-v0"
    with pytest.raises(ConfigError) as caught:
        gym.make(env_id, bogus=1)
    message = str(caught.value)
    assert "\n" not in message and "__init__" not in message and "Mujoco" not in message
    assert message.startswith(f"{'RL2 ' if rl2 else ''}{name}Env has no keyword argument 'bogus'")
    assert "remove it" in message
    names = listed(message)
    assert set(PUBLIC[name]) <= set(names)
    assert set(RL2_KEYWORDS) <= set(names) if rl2 else not set(RL2_KEYWORDS) & set(names)
    assert not set(INTERNAL) & set(names)


@pytest.mark.mujoco
def test_a_misspelt_keyword_is_answered_with_the_right_one():
    with pytest.raises(ValueError, match=r"'velocity_rang': did you mean 'velocity_range'\?"):
        gym.make("metabench/HalfCheetahVel-v0", velocity_rang=(0.0, 1.0))
    with pytest.raises(
        ValueError, match=r"'episodes_per_trail': did you mean 'episodes_per_trial'"
    ):
        gym.make("metabench/RL2-PointGoal-v0", episodes_per_trail=3)


@pytest.mark.mujoco
def test_an_argument_the_env_sets_itself_says_so():
    with pytest.raises(ConfigError, match=r"sets ctrl_cost_weight itself \(garage's 0.05\)"):
        gym.make("metabench/HalfCheetahDir-v0", ctrl_cost_weight=0.1)
    with pytest.raises(ConfigError, match=r"ML10Env sets benchmark itself \(ML10\)"):
        gym.make("metabench/ML10-v0", benchmark="ML45")


@pytest.mark.mujoco
@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ((2.0, 0.0), r"low <= high, got \(2.0, 0.0\): swap them, velocity_range=\(0.0, 2.0\)"),
        ("x", r"two numbers \(low, high\), got 'x': e.g. velocity_range=\(0.0, 2.0\)"),
        ((0.0, 1.0, 2.0), r"two numbers \(low, high\), got \(0.0, 1.0, 2.0\)"),
        ((0.0, float("inf")), r"must be finite, got \(0.0, inf\)"),
    ],
)
def test_a_bad_velocity_range_says_what_is_wrong(value, expected):
    with pytest.raises(ConfigError, match=expected) as caught:
        gym.make("metabench/HalfCheetahVel-v0", velocity_range=value)
    assert "\n" not in str(caught.value)


@pytest.mark.mujoco
def test_a_range_is_read_as_two_bounds_and_valid_keywords_build_the_env_they_did():
    # a string was read as its characters: "02" gave velocities in [0, 2)
    with pytest.raises(ConfigError, match=r"got '02': e.g. velocity_range=\(0.0, 2.0\)"):
        gym.make("metabench/HalfCheetahVel-v0", velocity_range="02")
    env: Any = gym.make(
        "metabench/HalfCheetahVel-v0", velocity_range=np.array([0.5, 1.5]), horizon=7,
        action_scale=10.0, frame_skip=5,
    ).unwrapped  # fmt: skip
    assert env.velocity_range == (0.5, 1.5) and env.horizon == 7 and env.action_scale == 10.0
    drawn = env.sample_tasks(4, np.random.default_rng(3))
    assert [t["velocity"] for t in drawn] == np.random.default_rng(3).uniform(0.5, 1.5, 4).tolist()
    rl2: Any = gym.make("metabench/RL2-PointGoal-v0", episodes_per_trial=3, horizon=4, max_step=0.2)
    assert rl2.unwrapped.horizon == 4 and rl2.unwrapped.max_step == 0.2
