"""Ant-Dir and Ant-Goal: reward, termination and observation recomputed from the MuJoCo state,
task distributions against oyster's and VariBAD's sampling code, re-done here.

oyster: ``katerakelly/oyster`` 44e20fd ``rlkit/envs/ant_dir.py``, ``ant_goal.py``, ``ant.py`` and
``wrappers.py`` (``NormalizedBoxEnv``); VariBAD: ``lmzintgraf/varibad`` 57e1795
``environments/mujoco/ant_dir.py`` and ``ant_goal.py``.
"""

from __future__ import annotations

import copy
import math
import pickle
import random
from collections.abc import Callable
from typing import Any

import mujoco
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from scipy import stats

from metabench.errors import InvalidTaskError
from metabench.tasks.ant.envs import OYSTER_TASK_COUNTS, AntDirEnv, AntDirProtocol, AntGoalEnv
from metabench.validation import ConfigError

pytestmark = pytest.mark.mujoco

VARIANTS = [
    (AntDirEnv, "oyster"),
    (AntDirEnv, "oyster-2d"),
    (AntDirEnv, "varibad"),
    (AntDirEnv, "varibad-2d"),
    (AntGoalEnv, "oyster"),
    (AntGoalEnv, "varibad"),
]


def normalized_box_action(action: np.ndarray) -> np.ndarray:
    """rlkit's ``NormalizedBoxEnv.step`` around the ant's float32 ``Box(-1, 1)``."""
    lb = np.full(8, -1.0, dtype=np.float32)
    ub = np.full(8, 1.0, dtype=np.float32)
    scaled_action = lb + (action + 1.0) * 0.5 * (ub - lb)
    return np.clip(scaled_action, lb, ub)


def original_reward(
    cls: type, task: dict[str, Any], before: np.ndarray, data: mujoco.MjData, action: np.ndarray
) -> tuple[float, bool]:
    """The original's ``step`` on the state after the physics: reward and ``done``."""
    torso_velocity = data.body("torso").xpos - before
    contact_cost = 0.5 * 1e-3 * np.sum(np.square(np.clip(data.cfrc_ext, -1, 1)))
    state = np.concatenate([data.qpos.flat, data.qvel.flat])
    if cls is AntDirEnv:
        direct = (np.cos(task["angle"]), np.sin(task["angle"]))
        forward_reward = np.dot((torso_velocity[:2] / 0.05), direct)
        ctrl_cost = 0.5 * np.square(action).sum()
        reward = forward_reward - ctrl_cost - contact_cost + 1.0
        notdone = np.isfinite(state).all() and state[2] >= 0.2 and state[2] <= 1.0
        return float(reward), not notdone
    xposafter = data.body("torso").xpos
    goal_reward = -np.sum(np.abs(xposafter[:2] - np.asarray(task["goal"])))
    ctrl_cost = 0.1 * np.square(action).sum()
    return float(goal_reward - ctrl_cost - contact_cost + 0.0), False


def original_observation(cls: type, data: mujoco.MjData) -> np.ndarray:
    """oyster's ``AntEnv._get_obs`` (Ant-Dir) and ``AntGoalEnv._get_obs``."""
    if cls is AntDirEnv:
        return np.concatenate([data.qpos.flat[2:], data.qvel.flat])
    return np.concatenate([data.qpos.flat, data.qvel.flat, np.clip(data.cfrc_ext, -1, 1).flat])


@pytest.mark.parametrize(("cls", "protocol"), VARIANTS)
def test_check_env_passes(cls, protocol):
    check_env(cls(protocol=protocol), skip_render_check=True)


@pytest.mark.parametrize(
    ("cls", "protocol", "task"),
    [
        (AntDirEnv, "oyster", {"angle": math.pi}),
        (AntDirEnv, "varibad", {"angle": -1.0}),
        (AntDirEnv, "oyster-2d", {"angle": 2.2}),
        (AntGoalEnv, "oyster", {"goal": [1.5, -2.0]}),
        (AntGoalEnv, "varibad", {"goal": [-0.5, 0.75]}),
    ],
)
def test_physics_reward_and_observation_recomputed_from_the_mujoco_state(cls, protocol, task):
    """Each step is replayed on a copy of the MuJoCo state before it: five ``mj_step`` with the
    original's control (oyster's ``NormalizedBoxEnv`` clips it, VariBAD passes the raw action),
    then the original's reward, ``done`` and observation on that copy. Actions reach 1.5, so the
    clipping and MuJoCo's own clamping of the control both matter."""
    env = cls(protocol=protocol)
    env.reset(seed=1, options={"task": task})
    model, data = env.unwrapped.model, env.unwrapped.data
    rng = np.random.default_rng(0)
    contact_seen = False
    for _ in range(40):
        action = rng.uniform(-1.5, 1.5, size=8).astype(np.float32)
        replay = copy.copy(data)  # MuJoCo's mj_copyData: the whole state, warm start included
        before = replay.body("torso").xpos.copy()
        control = normalized_box_action(action) if protocol.startswith("oyster") else action
        replay.ctrl[:] = control
        mujoco.mj_step(model, replay, nstep=5)
        mujoco.mj_rnePostConstraint(model, replay)
        obs, reward, terminated, truncated, info = env.step(action)
        np.testing.assert_array_equal(data.qpos, replay.qpos)
        np.testing.assert_array_equal(data.qvel, replay.qvel)
        np.testing.assert_array_equal(obs, original_observation(cls, replay))
        expected, done = original_reward(cls, task, before, replay, control.astype(np.float64))
        assert reward == pytest.approx(expected, rel=1e-12, abs=1e-12)
        assert terminated is done
        assert truncated is False
        contact_seen |= info["reward_contact"] < 0
        if terminated:
            break
    assert contact_seen  # the contact forces are computed, as under MuJoCo 1.50


@pytest.mark.parametrize(("cls", "terminates"), [(AntDirEnv, True), (AntGoalEnv, False)])
@pytest.mark.parametrize("height", [1.2, 1.5, 0.55])
def test_termination_when_the_torso_leaves_its_height_range(cls, terminates, height):
    """Ant-Dir's ``notdone`` (height in ``[0.2, 1.0]``): a torso thrown above 1 ends the
    episode, with the survive reward still paid; one in range goes on; Ant-Goal never
    terminates."""
    env = cls()
    env.reset(seed=0)
    qpos, qvel = env.unwrapped.data.qpos.copy(), env.unwrapped.data.qvel.copy()
    qpos[2] = height
    env.unwrapped.set_state(qpos, qvel)
    _, _, terminated, truncated, info = env.step(np.zeros(8, dtype=np.float32))
    state = np.concatenate([env.unwrapped.data.qpos, env.unwrapped.data.qvel])
    done = not (np.isfinite(state).all() and 0.2 <= state[2] <= 1.0)
    assert done is (height > 1.0)
    assert terminated is (terminates and done)
    assert truncated is False
    assert info["reward_survive"] == (1.0 if cls is AntDirEnv else 0.0)


@pytest.mark.parametrize("cls", [AntDirEnv, AntGoalEnv])
def test_horizon_truncates_after_200_steps_by_default(cls):
    env = cls(horizon=3)
    assert cls().horizon == 200
    env.reset(seed=0)
    assert [env.step(np.zeros(8, dtype=np.float32))[3] for _ in range(3)] == [False, False, True]


def oyster_ant_dir_tasks(forward_backward: bool, num_tasks: int) -> list[float]:
    """oyster's ``AntDirEnv.sample_tasks`` (its ``np.random``: a legacy generator here)."""
    if forward_backward:
        assert num_tasks == 2
        velocities = np.array([0.0, np.pi])
    else:
        velocities = np.random.RandomState(7).uniform(0.0, 2.0 * np.pi, size=(num_tasks,))
    return [float(v) for v in velocities]


def varibad_ant_dir_angles(two_d: bool, n_tasks: int) -> list[float]:
    """VariBAD's ``AntDirEnv`` / ``AntDir2DEnv``: ``sample_tasks(1)[0]`` as its ``set_task``
    keeps it, the angle ``step`` takes (Python's ``random``, seeded here)."""
    generator = random.Random(11)
    angles = []
    for _ in range(n_tasks):
        if two_d:
            directions = np.array([generator.gauss(mu=0, sigma=1) for _ in range(2)]).reshape(
                (1, 2)
            )
            directions /= np.linalg.norm(directions, axis=1)[..., np.newaxis]
            task: Any = directions[0]
        else:
            task = generator.choice([-1.0, 1.0])
        if isinstance(task, np.ndarray):
            task = task[0]
        angles.append(float(task))
    return angles


def oyster_ant_goals(num_tasks: int) -> np.ndarray:
    """oyster's ``AntGoalEnv.sample_tasks`` (VariBAD's draws the same with Python's random)."""
    legacy = np.random.RandomState(13)
    a = legacy.random_sample(num_tasks) * 2 * np.pi
    r = 3 * legacy.random_sample(num_tasks) ** 0.5
    return np.stack((r * np.cos(a), r * np.sin(a)), axis=-1)


def drawn(env: Any, n: int, key: str) -> np.ndarray:
    return np.array([t[key] for t in env.sample_tasks(n, np.random.default_rng(3))])


def test_ant_dir_forward_backward_draws_oysters_two_directions():
    angles = drawn(AntDirEnv(protocol="oyster"), 400, "angle")
    assert set(angles) == set(oyster_ant_dir_tasks(True, 2))
    assert 150 < np.sum(angles == 0.0) < 250


def test_ant_dir_varibad_draws_plus_or_minus_one_radian():
    angles = drawn(AntDirEnv(protocol="varibad"), 400, "angle")
    assert set(angles) == set(varibad_ant_dir_angles(False, 400)) == {-1.0, 1.0}
    assert 150 < np.sum(angles == 1.0) < 250


@pytest.mark.parametrize(
    ("protocol", "original"),
    [
        ("oyster-2d", lambda n: oyster_ant_dir_tasks(False, n)),
        ("varibad-2d", lambda n: varibad_ant_dir_angles(True, n)),
    ],
)
def test_ant_dir_continuous_angles_follow_the_originals_sampler(
    protocol: AntDirProtocol, original: Callable[[int], list[float]]
) -> None:
    angles = drawn(AntDirEnv(protocol=protocol), 4000, "angle")
    assert stats.ks_2samp(angles, original(4000)).pvalue > 0.01


@pytest.mark.parametrize("protocol", ["oyster", "varibad"])
def test_ant_goal_goals_follow_the_originals_sampler(protocol):
    goals = drawn(AntGoalEnv(protocol=protocol), 4000, "goal")
    original = oyster_ant_goals(4000)
    assert np.linalg.norm(goals, axis=1).max() <= 3.0
    for axis in range(2):
        assert stats.ks_2samp(goals[:, axis], original[:, axis]).pvalue > 0.01
    radii = np.linalg.norm(goals, axis=1)
    assert stats.ks_2samp(radii, np.linalg.norm(original, axis=1)).pvalue > 0.01


def test_oyster_task_counts_are_its_configs():
    assert OYSTER_TASK_COUNTS == {"ant-dir": (2, 2), "ant-goal": (150, 30)}


@pytest.mark.parametrize("how", [copy.deepcopy, lambda env: pickle.loads(pickle.dumps(env))])
@pytest.mark.parametrize(
    ("cls", "task"), [(AntDirEnv, {"angle": 0.5}), (AntGoalEnv, {"goal": [1.0, -1.0]})]
)
def test_a_copy_keeps_the_task_and_the_protocol(cls, task, how):
    env = cls(protocol="varibad", horizon=9)
    env.set_task(task)
    copied = how(env)
    assert (copied.task, copied.protocol, copied.horizon) == (task, "varibad", 9)
    assert copied.action_scaling is None
    assert copied.reset(seed=0)[1]["task"] == task


@pytest.mark.parametrize("cls", [AntDirEnv, AntGoalEnv])
def test_unseeded_reset_keeps_the_task_and_a_seeded_one_redraws_the_envs_own(cls):
    env = cls(protocol="varibad" if cls is AntGoalEnv else "oyster-2d")
    drawn_task = env.reset(seed=1)[1]["task"]
    assert env.reset()[1]["task"] == drawn_task
    assert env.reset(seed=2)[1]["task"] != drawn_task


@pytest.mark.parametrize(
    ("cls", "task"),
    [
        (AntDirEnv, {"direction": 1.0}),
        (AntDirEnv, {"angle": float("inf")}),
        (AntDirEnv, {"angle": "0"}),
        (AntDirEnv, {"angle": True}),
        (AntDirEnv, 0.0),
        (AntGoalEnv, {"goal": [1.0]}),
        (AntGoalEnv, {"goal": [1.0, float("nan")]}),
        (AntGoalEnv, {"angle": 0.0}),
    ],
)
def test_invalid_tasks_raise_and_leave_the_env_as_it_was(cls, task):
    valid = {"angle": 0.25} if cls is AntDirEnv else {"goal": [0.5, 0.5]}
    env = cls()
    env.reset(seed=0, options={"task": valid})
    with pytest.raises(InvalidTaskError):
        env.set_task(task)
    with pytest.raises(InvalidTaskError):
        env.reset(options={"task": task})
    assert env.task == valid


@pytest.mark.parametrize(
    ("cls", "kwargs", "match"),
    [
        (AntDirEnv, {"protocol": "pearl"}, "'oyster', 'oyster-2d'"),
        (AntGoalEnv, {"protocol": "oyster-2d"}, "'oyster', 'varibad'"),
        (AntDirEnv, {"ctrl_cost_weight": 0.1}, "ctrl_cost_weight"),
        (AntGoalEnv, {"include_cfrc_ext_in_observation": False}, "include_cfrc_ext"),
        (AntGoalEnv, {"horizn": 10}, "horizon"),
    ],
)
def test_bad_arguments_raise_naming_the_fix(cls, kwargs, match):
    with pytest.raises(ConfigError, match=match):
        cls(**kwargs)
