"""Every registered id makes, passes Gymnasium's checker and vectorises."""

import json
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import metabench
from metabench.harness.algorithms import get_algorithm
from metabench.harness.benchmarks import get_benchmark, load_benchmarks
from metabench.tasks.family import task_envs
from metabench.wrappers import RL2Env, Trial

FAST = [
    "HalfCheetahVel", "HalfCheetahDir", "PointGoal", "PointRobot", "SparsePointRobot", "AntDir",
    "AntGoal", "HumanoidDir", "WalkerRandParams", "HopperRandParams",
]  # fmt: skip
META_WORLD = {"ML1": {"env_name": "reach-v3"}, "ML10": {}, "ML45": {}}


def test_all_ids_registered():
    for name in task_envs():
        assert f"metabench/{name}-v0" in gym.registry
        assert f"metabench/RL2-{name}-v0" in gym.registry
    for entry in gym.registry.values():
        if entry.id.startswith("metabench/"):
            assert isinstance(entry.entry_point, str)  # never lambdas
    metabench.register_envs()  # idempotent


@pytest.mark.mujoco
@pytest.mark.parametrize("name", FAST)
def test_task_and_rl2_ids_pass_check_env(name):
    check_env(gym.make(f"metabench/{name}-v0").unwrapped, skip_render_check=True)
    rl2 = gym.make(f"metabench/RL2-{name}-v0")
    assert isinstance(rl2.unwrapped, type(gym.make(f"metabench/{name}-v0").unwrapped))
    check_env(rl2.env, skip_render_check=True)  # the RL2Env(Trial(...)) stack itself


@pytest.mark.mujoco
def test_rl2_id_kwargs_reach_wrappers_and_task_env():
    env = gym.make(
        "metabench/RL2-HalfCheetahVel-v0", episodes_per_trial=3, reward_scale=0.1, horizon=5
    )
    rl2 = env.env
    assert isinstance(rl2, RL2Env) and rl2.reward_scale == 0.1
    trial = rl2.env
    assert isinstance(trial, Trial) and trial.episodes_per_trial == 3
    assert trial.unwrapped.horizon == 5
    env.reset(seed=0)
    ends = [env.step(np.zeros(6))[3] for _ in range(15)]
    assert ends.index(True) == 14


@pytest.mark.parametrize("name", sorted(task_envs()))
def test_rl2_id_defaults_are_the_benchmarks_and_rl2_ppos(name):
    """An RL2 id's trial length is its benchmark's, and its reward scale RL2-PPO's there."""
    # the id's own benchmark; the classic suite's are named by protocol, oyster's first
    names = set(load_benchmarks())
    spec = get_benchmark(
        "ML1-reach" if name == "ML1" else name if name in names else f"{name}-oyster"
    )
    entry = get_algorithm("rl2-ppo")
    declared = task_envs()[name]
    assert gym.spec(f"metabench/RL2-{name}-v0").kwargs == {
        "task_entry_point": declared.entry_point,
        "episodes_per_trial": spec.episodes_per_trial,
        "reward_scale": entry.hyperparameters(spec, {})["reward_scale"],
    }


@pytest.mark.mujoco
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_make_vec_works(mode):
    envs = gym.make_vec("metabench/RL2-HalfCheetahVel-v0", num_envs=2, vectorization_mode=mode)
    obs, _ = envs.reset(seed=0)
    assert obs.shape == (2, 28)
    obs, reward, *_ = envs.step(np.zeros((2, 6)))
    assert obs.shape == (2, 28) and reward.shape == (2,)
    envs.close()


@pytest.mark.metaworld
@pytest.mark.slow
@pytest.mark.parametrize("name", list(META_WORLD))
def test_metaworld_ids_pass_check_env(name):
    kwargs = META_WORLD[name]
    check_env(gym.make(f"metabench/{name}-v0", **kwargs).unwrapped, skip_render_check=True)
    rl2 = gym.make(f"metabench/RL2-{name}-v0", **kwargs)
    obs, _ = rl2.reset(seed=0)
    assert obs.shape == (39 + 4 + 2,)


@pytest.mark.parametrize("num_envs", [0, -2])
def test_make_vec_of_an_rl2_id_refuses_no_sub_envs_in_one_line(num_envs):
    """Gymnasium's SyncVectorEnv of no envs ends in an IndexError; the RL2 ids' own vector
    entry point names the fix."""
    with pytest.raises(ValueError, match=f"num_envs must be a positive integer, got {num_envs}"):
        gym.make_vec("metabench/RL2-PointGoal-v0", num_envs=num_envs)


def test_make_vec_of_an_rl2_id_steps_as_gymnasiums_sync_mode():
    ours = gym.make_vec("metabench/RL2-PointGoal-v0", num_envs=3, horizon=4)
    sync = gym.make_vec("metabench/RL2-PointGoal-v0", 3, vectorization_mode="sync", horizon=4)
    assert ours.unwrapped.spec.kwargs["vectorization_mode"] == "vector_entry_point"
    first, _ = ours.reset(seed=0)
    np.testing.assert_array_equal(first, sync.reset(seed=0)[0])
    actions = np.random.default_rng(0).uniform(-0.1, 0.1, size=(8, 3, 2))
    for action in actions:  # two trials of 2 episodes of 4 steps
        np.testing.assert_equal(ours.step(action), sync.step(action))  # infos included
    ours.close()
    sync.close()


def test_registering_every_family_imports_none_of_their_envs():
    """``import metabench`` registers every family's ids from their declarations alone: neither
    MuJoCo nor Meta-World loads until an env is made."""
    probe = (
        "import json, sys\n"
        "import gymnasium as gym\n"
        "import metabench\n"
        "from metabench.tasks.family import task_envs\n"
        "print(json.dumps({'heavy': sorted(m for m in ('mujoco', 'metaworld') if m in sys.modules),"
        " 'missing': [n for n in task_envs() if f'metabench/RL2-{n}-v0' not in gym.registry]}))\n"
    )
    shown = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout) == {"heavy": [], "missing": []}
