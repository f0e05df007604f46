"""Walker-Rand-Params and Hopper-Rand-Params: reward, termination and observation recomputed from
the MuJoCo state, the model against the original's XML, the parameter sampling against
``rand_param_envs``' and VariBAD's sampling code, re-done here.

Originals: ``dennisl88/rand_param_envs`` 4d1529d (oyster 44e20fd's submodule)
``rand_param_envs/base.py``, ``walker2d_rand_params.py``, ``hopper_rand_params.py`` and
``gym/envs/mujoco/assets/{walker2d,hopper}.xml``; VariBAD 57e1795
``environments/mujoco/rand_param_envs/base.py``; oyster's ``rlkit/envs/wrappers.py``
(``NormalizedBoxEnv``) and ``configs/{walker,hopper}_rand_params.json``.
"""

from __future__ import annotations

import copy
import math
import os
import pickle
import random
from collections.abc import Callable
from typing import Any

import gymnasium
import mujoco
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from scipy import stats

from metabench.errors import InvalidTaskError
from metabench.tasks.rand_params.envs import (
    OYSTER_TASK_COUNTS,
    HopperRandParamsEnv,
    WalkerRandParamsEnv,
)
from metabench.validation import ConfigError

pytestmark = pytest.mark.mujoco

ENVS = [WalkerRandParamsEnv, HopperRandParamsEnv]
VARIANTS = [(cls, protocol) for cls in ENVS for protocol in ("oyster", "varibad")]
ASSETS = os.path.join(os.path.dirname(gymnasium.__file__), "envs", "mujoco", "assets")
ORIGINAL_DT = 0.004 * 4
"""The original's ``timestep="0.004"`` (both XML files) times ``RandomEnv``'s frame skip 4."""


def normalized_box_action(action: np.ndarray) -> np.ndarray:
    """rlkit's ``NormalizedBoxEnv.step`` around the float32 ``Box(-1, 1)`` of both robots."""
    lb = np.full(action.shape, -1.0, dtype=np.float32)
    ub = np.full(action.shape, 1.0, dtype=np.float32)
    scaled_action = lb + (action + 1.0) * 0.5 * (ub - lb)
    return np.clip(scaled_action, lb, ub)


def original_step(
    cls: type, posbefore: float, data: mujoco.MjData, a: np.ndarray
) -> tuple[np.ndarray, float, bool]:
    """The original ``_step`` after ``do_simulation``: observation, reward, ``done``."""
    posafter, height, ang = data.qpos[0:3]
    alive_bonus = 1.0
    reward = (posafter - posbefore) / ORIGINAL_DT
    reward += alive_bonus
    reward -= 1e-3 * np.square(a).sum()
    if cls is WalkerRandParamsEnv:
        done = not (height > 0.8 and height < 2.0 and ang > -1.0 and ang < 1.0)
    else:
        s = np.concatenate([data.qpos.flat, data.qvel.flat])
        done = not (
            np.isfinite(s).all()
            and (np.abs(s[2:]) < 100).all()
            and (height > 0.7)
            and (abs(ang) < 0.2)
        )
    ob = np.concatenate([data.qpos.flat[1:], np.clip(data.qvel.flat, -10, 10)])
    return ob, float(reward), bool(done)


def loaded_model(cls: type) -> mujoco.MjModel:
    """Gymnasium's model file, loaded afresh (the nominal parameters a task scales)."""
    name = "walker2d.xml" if cls is WalkerRandParamsEnv else "hopper.xml"
    return mujoco.MjModel.from_xml_path(os.path.join(ASSETS, name))


def original_sample_tasks(
    model: mujoco.MjModel, n_tasks: int, uniform: Callable[[float, float, tuple[int, ...]], Any]
) -> list[dict[str, np.ndarray]]:
    """``RandomEnv.sample_tasks`` with ``log_scale_limit`` 3 on MuJoCo 1.31's shapes
    (``body_mass`` ``(nbody, 1)``, ``dof_damping`` ``(nv, 1)``); ``uniform(low, high, size)``
    stands for its ``np.random.uniform``."""
    log_scale_limit = 3.0
    init_params = {
        "body_mass": model.body_mass.reshape(-1, 1).copy(),
        "body_inertia": model.body_inertia.copy(),
        "dof_damping": model.dof_damping.reshape(-1, 1).copy(),
        "geom_friction": model.geom_friction.copy(),
    }
    param_sets = []
    for _ in range(n_tasks):
        new_params = {}
        body_mass_multiplyers = np.array(1.5) ** uniform(
            -log_scale_limit, log_scale_limit, init_params["body_mass"].shape
        )
        new_params["body_mass"] = init_params["body_mass"] * body_mass_multiplyers
        body_inertia_multiplyers = np.array(1.5) ** uniform(
            -log_scale_limit, log_scale_limit, init_params["body_inertia"].shape
        )
        new_params["body_inertia"] = body_inertia_multiplyers * init_params["body_inertia"]
        dof_damping_multipliers = np.array(1.3) ** uniform(
            -log_scale_limit, log_scale_limit, init_params["dof_damping"].shape
        )
        new_params["dof_damping"] = np.multiply(init_params["dof_damping"], dof_damping_multipliers)
        dof_damping_multipliers = np.array(1.5) ** uniform(
            -log_scale_limit, log_scale_limit, init_params["geom_friction"].shape
        )
        new_params["geom_friction"] = np.multiply(
            init_params["geom_friction"], dof_damping_multipliers
        )
        param_sets.append(new_params)
    return param_sets


def varibad_uniform(generator: random.Random) -> Callable[[float, float, tuple[int, ...]], Any]:
    """VariBAD's replacement of ``np.random.uniform``: Python's ``random``, element by element."""

    def uniform(low: float, high: float, shape: tuple[int, ...]) -> np.ndarray:
        rand_params = [generator.uniform(low, high) for _ in range(int(np.prod(shape)))]
        return np.array(rand_params).reshape(shape)

    return uniform


def model_parameters(env: Any) -> dict[str, np.ndarray]:
    model = env.unwrapped.model
    return {
        name: np.array(getattr(model, name))
        for name in ("body_mass", "body_inertia", "dof_damping", "geom_friction")
    }


@pytest.mark.parametrize(("cls", "protocol"), VARIANTS)
def test_check_env_passes(cls, protocol):
    check_env(cls(protocol=protocol), skip_render_check=True)


@pytest.mark.parametrize(("cls", "protocol"), VARIANTS)
def test_physics_reward_and_observation_recomputed_from_the_mujoco_state(cls, protocol):
    """Each step is replayed on a copy of the MuJoCo state before it: four ``mj_step`` of 0.004 s
    with the original's control (oyster's ``NormalizedBoxEnv`` clips it, VariBAD passes the raw
    action), then the original's observation, reward and ``done`` on that copy. Actions reach
    1.5, so the clipping and MuJoCo's own clamping both matter; the task is not the nominal
    model."""
    env = cls(protocol=protocol)
    task = env.sample_tasks(1, np.random.default_rng(5))[0]
    env.reset(seed=1, options={"task": task})
    model, data = env.unwrapped.model, env.unwrapped.data
    assert model.opt.timestep == 0.004 and env.unwrapped.frame_skip == 4
    rng = np.random.default_rng(0)
    for _ in range(60):
        action = rng.uniform(-1.5, 1.5, size=model.nu).astype(np.float32)
        replay = copy.copy(data)  # MuJoCo's mj_copyData: the whole state, warm start included
        posbefore = float(replay.qpos[0])
        control = normalized_box_action(action) if protocol == "oyster" else action
        replay.ctrl[:] = control
        mujoco.mj_step(model, replay, nstep=4)
        obs, reward, terminated, truncated, info = env.step(action)
        np.testing.assert_array_equal(data.qpos, replay.qpos)
        np.testing.assert_array_equal(data.qvel, replay.qvel)
        ob, expected, done = original_step(cls, posbefore, replay, control.astype(np.float64))
        np.testing.assert_array_equal(obs, ob)
        assert reward == pytest.approx(expected, rel=1e-12, abs=1e-12)
        assert terminated is done
        assert truncated is False
        assert info["reward_survive"] == 1.0  # the terminal step's too
        if terminated:
            break
    assert terminated  # random actions topple both robots within 60 steps


@pytest.mark.parametrize(
    ("cls", "qpos_changes", "qvel_changes", "done"),
    [
        (WalkerRandParamsEnv, {}, {}, False),
        (WalkerRandParamsEnv, {1: 0.7}, {}, True),
        (WalkerRandParamsEnv, {1: 2.3}, {}, True),
        (WalkerRandParamsEnv, {2: 1.2}, {}, True),
        (WalkerRandParamsEnv, {2: -0.6}, {}, False),  # Hopper's angle limit would end it
        (HopperRandParamsEnv, {}, {}, False),
        (HopperRandParamsEnv, {1: 0.6}, {}, True),
        (HopperRandParamsEnv, {2: 0.3}, {}, True),
        (HopperRandParamsEnv, {1: 2.3}, {}, False),  # no upper height limit, unlike Walker's
        (HopperRandParamsEnv, {}, {4: 400.0}, True),  # |state[2:]| >= 100
    ],
)
def test_termination_follows_the_originals_done(cls, qpos_changes, qvel_changes, done):
    """States inside and outside each robot's healthy set, checked after one step of zero
    action against the original's ``done`` on that state; the alive bonus is still paid."""
    env = cls()
    env.reset(seed=0)
    unwrapped = env.unwrapped
    qpos, qvel = unwrapped.data.qpos.copy(), unwrapped.data.qvel.copy()
    for index, value in qpos_changes.items():
        qpos[index] = value
    for index, value in qvel_changes.items():
        qvel[index] = value
    unwrapped.set_state(qpos, qvel)
    posbefore = float(qpos[0])
    action = np.zeros(unwrapped.model.nu, dtype=np.float32)
    _, reward, terminated, truncated, info = env.step(action)
    _, expected, original_done = original_step(cls, posbefore, unwrapped.data, action)
    assert terminated is original_done is done
    assert truncated is False
    assert reward == pytest.approx(expected, rel=1e-12)
    assert info["reward_forward"] + info["reward_survive"] + info["reward_ctrl"] == reward


@pytest.mark.parametrize("cls", ENVS)
def test_horizon_truncates_after_200_steps_by_default(cls):
    assert cls().horizon == 200
    env = cls(horizon=3)
    env.reset(seed=0)
    nu = env.unwrapped.model.nu
    assert [env.step(np.zeros(nu, dtype=np.float32))[3] for _ in range(3)] == [False, False, True]


def capsule_mass(radius: float, length: float) -> float:
    """A capsule's mass at the XML's ``density="1000"`` (MuJoCo's default too)."""
    return 1000.0 * (math.pi * radius**2 * length + 4.0 / 3.0 * math.pi * radius**3)


@pytest.mark.parametrize(
    ("cls", "capsules", "friction", "damping"),
    [
        (
            WalkerRandParamsEnv,
            # torso, then thigh, leg and foot of each leg: the original's fromto and size
            [(0.05, 0.4), *[(0.05, 0.45), (0.04, 0.5), (0.06, 0.2)] * 2],
            # floor (the default class's .7), torso, thigh, leg, foot 0.9, left foot 1.9
            [0.7, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 1.9],
            [0.0] * 3 + [0.1] * 6,
        ),
        (
            HopperRandParamsEnv,
            [(0.05, 0.4), (0.05, 0.45), (0.04, 0.5), (0.06, 0.39)],
            [1.0, 0.9, 0.9, 0.9, 2.0],  # floor: MuJoCo's default friction
            [0.0] * 3 + [1.0] * 3,
        ),
    ],
)
def test_the_nominal_model_is_the_originals(cls, capsules, friction, damping):
    """Masses from the original XML's capsules, its friction and damping, its 0.004 s timestep
    and frame skip 4: the parameters every task scales (Walker2d-v5's own model has friction 1.9
    on the right foot too)."""
    env = cls()
    model = env.unwrapped.model
    masses = [capsule_mass(r, length) for r, length in capsules]
    np.testing.assert_allclose(model.body_mass, [0.0, *masses], rtol=1e-12)
    np.testing.assert_array_equal(model.geom_friction[:, 0], friction)
    np.testing.assert_array_equal(model.dof_damping, damping)
    assert env.unwrapped.dt == pytest.approx(ORIGINAL_DT, rel=1e-15)
    assert env.metadata["render_fps"] == round(1 / ORIGINAL_DT)


@pytest.mark.parametrize("cls", ENVS)
def test_a_task_sets_the_nominal_parameters_times_its_scales_without_compounding(cls):
    """Two tasks in a row: the model holds the second one's values, the nominal model's times
    its multipliers, exactly (``RandomEnv.set_task`` writes a task's values; the tasks are
    scaled from the parameters saved at construction)."""
    env = cls()
    nominal = loaded_model(cls)
    draws = original_sample_tasks(nominal, 2, np.random.default_rng(4).uniform)
    env.reset(seed=0)
    for params in draws:
        task = {
            name: values.reshape(getattr(nominal, name).shape) for name, values in params.items()
        }
        env.set_task({name: values.tolist() for name, values in task.items()})
        for name, values in model_parameters(env).items():
            np.testing.assert_array_equal(values, task[name])
            assert not np.array_equal(values, getattr(nominal, name))
        assert env.task == {name: values.tolist() for name, values in task.items()}
    env.reset()
    for name, values in model_parameters(env).items():  # reset keeps the task's parameters
        np.testing.assert_array_equal(values, draws[-1][name].reshape(values.shape))


@pytest.mark.parametrize("cls", ENVS)
def test_sample_tasks_is_rand_param_envs_sample_tasks(cls):
    """The same draws in the same order: fed one generator, the original's ``sample_tasks`` and
    the env's give the same numbers, to the bit."""
    env = cls()
    ours = env.sample_tasks(5, np.random.default_rng(21))
    original = original_sample_tasks(loaded_model(cls), 5, np.random.default_rng(21).uniform)
    assert len(ours) == 5
    for task, params in zip(ours, original, strict=True):
        assert set(task) == set(params)
        for name, values in params.items():
            np.testing.assert_array_equal(np.array(task[name]).ravel(), values.ravel())


@pytest.mark.parametrize("cls", ENVS)
def test_multipliers_are_log_uniform_as_in_both_codes(cls):
    """Over 200 tasks: ``log_base(value / nominal)`` is uniform on ``[-3, 3]`` (base 1.5, 1.3 for
    damping) for every element the model has non-zero, and matches VariBAD's element-wise
    Python ``random`` draws; zeros (the world body, the root joints' damping) stay zero."""
    env = cls()
    nominal = loaded_model(cls)
    tasks = env.sample_tasks(200, np.random.default_rng(8))
    varibad = original_sample_tasks(nominal, 200, varibad_uniform(random.Random(10)))
    bases = {"body_mass": 1.5, "body_inertia": 1.5, "dof_damping": 1.3, "geom_friction": 1.5}
    for name, base in bases.items():
        init = np.array(getattr(nominal, name)).ravel()
        ours = np.array([np.ravel(task[name]) for task in tasks])
        theirs = np.array([params[name].ravel() for params in varibad])
        assert (ours[:, init == 0] == 0).all()
        exponents = np.log(ours[:, init > 0] / init[init > 0]) / np.log(base)
        assert exponents.min() >= -3.0 and exponents.max() <= 3.0
        # 4 parameters x 2 comparisons x 2 robots: each at the 0.1% level
        assert stats.kstest(exponents.ravel(), stats.uniform(-3, 6).cdf).pvalue > 0.001
        varibad_exponents = np.log(theirs[:, init > 0] / init[init > 0]) / np.log(base)
        assert stats.ks_2samp(exponents.ravel(), varibad_exponents.ravel()).pvalue > 0.001
        correlation = np.corrcoef(exponents[:, 0], exponents[:, 1])[0, 1]
        assert abs(correlation) < 0.25  # one independent draw per element


def test_oyster_task_counts_are_its_configs():
    """``n_train_tasks`` 40 and ``n_eval_tasks`` 10 of ``n_tasks`` 50 in both configs."""
    assert OYSTER_TASK_COUNTS == {"walker-rand-params": (40, 10), "hopper-rand-params": (40, 10)}


@pytest.mark.parametrize("how", [copy.deepcopy, lambda env: pickle.loads(pickle.dumps(env))])
@pytest.mark.parametrize("cls", ENVS)
def test_a_copy_keeps_the_task_and_the_models_parameters(cls, how):
    env = cls(protocol="varibad", horizon=9)
    task = env.sample_tasks(1, np.random.default_rng(2))[0]
    env.set_task(task)
    copied = how(env)
    assert (copied.task, copied.protocol, copied.horizon) == (task, "varibad", 9)
    assert copied.action_scaling is None
    for name, values in model_parameters(copied).items():
        np.testing.assert_array_equal(values, np.array(task[name]))
    assert copied.reset(seed=0)[1]["task"] == task
    assert copied.unwrapped.model is not env.unwrapped.model


@pytest.mark.parametrize("cls", ENVS)
def test_unseeded_reset_keeps_the_task_and_a_seeded_one_redraws_the_envs_own(cls):
    env = cls()
    drawn = env.reset(seed=1)[1]["task"]
    assert env.reset()[1]["task"] == drawn
    assert env.reset(seed=1)[1]["task"] == drawn
    assert env.reset(seed=2)[1]["task"] != drawn
    for name, values in model_parameters(env).items():
        np.testing.assert_array_equal(values, np.array(env.task[name]))


def _broken(cls: type, name: str, change: Callable[[np.ndarray], Any]) -> dict[str, Any]:
    task = cls().sample_tasks(1, np.random.default_rng(0))[0]
    return {**task, name: change(np.array(task[name]))}


@pytest.mark.parametrize("cls", ENVS)
@pytest.mark.parametrize(
    "make_task",
    [
        lambda cls: {"body_mass": [1.0]},
        lambda cls: 0.5,
        lambda cls: {**_broken(cls, "dof_damping", lambda a: a), "geom_size": [1.0]},
        lambda cls: _broken(cls, "body_mass", lambda a: a[1:].tolist()),
        lambda cls: _broken(cls, "body_inertia", lambda a: a.ravel().tolist()),
        lambda cls: _broken(cls, "geom_friction", lambda a: np.where(a > 1, np.nan, a).tolist()),
        lambda cls: _broken(cls, "dof_damping", lambda a: (-a).tolist()),
        lambda cls: _broken(cls, "body_mass", lambda a: (0 * a).tolist()),
        lambda cls: _broken(cls, "body_mass", lambda a: ["heavy"] * len(a)),
    ],
)
def test_invalid_tasks_raise_and_leave_the_env_as_it_was(cls, make_task):
    env = cls()
    valid = env.sample_tasks(1, np.random.default_rng(1))[0]
    env.reset(seed=0, options={"task": valid})
    task = make_task(cls)
    with pytest.raises(InvalidTaskError):
        env.set_task(task)
    with pytest.raises(InvalidTaskError):
        env.reset(options={"task": task})
    assert env.task == valid
    for name, values in model_parameters(env).items():
        np.testing.assert_array_equal(values, np.array(valid[name]))


@pytest.mark.parametrize(
    ("cls", "kwargs", "match"),
    [
        (WalkerRandParamsEnv, {"protocol": "pearl"}, "'oyster' or 'varibad'"),
        (HopperRandParamsEnv, {"xml_file": "hopper_v5.xml"}, "xml_file"),
        (WalkerRandParamsEnv, {"ctrl_cost_weight": 0.1}, "ctrl_cost_weight"),
        (HopperRandParamsEnv, {"healthy_angle_range": (-1, 1)}, "healthy_angle_range"),
        (WalkerRandParamsEnv, {"reset_noise_scale": 0.1}, "reset_noise_scale"),
        (HopperRandParamsEnv, {"horizn": 10}, "horizon"),
    ],
)
def test_bad_arguments_raise_naming_the_fix(cls, kwargs, match):
    with pytest.raises(ConfigError, match=match):
        cls(**kwargs)


def test_a_non_positive_horizon_raises():
    with pytest.raises(ValueError, match="horizon must be a positive integer"):
        WalkerRandParamsEnv(horizon=0)
