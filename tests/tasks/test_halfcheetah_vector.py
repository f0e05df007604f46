"""HalfCheetahVectorEnv: the same trajectories, rewards and task protocol as N single envs."""

import gymnasium as gym
import mujoco
import numpy as np
import pytest
from gymnasium.spaces import Box
from gymnasium.vector import AutoresetMode

from metabench.errors import InvalidActionError, InvalidTaskError, StepBeforeResetError
from metabench.tasks.halfcheetah.envs import HalfCheetahDirEnv, HalfCheetahVelEnv
from metabench.tasks.halfcheetah.vector import (
    HalfCheetahDirVectorEnv,
    HalfCheetahVectorEnv,
    HalfCheetahVelVectorEnv,
)
from metabench.vector import make_meta_vec_env

pytestmark = pytest.mark.mujoco

VEL_TASKS = [{"velocity": v} for v in (0.0, 0.7, 1.9, 3.2)]  # 3.2: outside the training range
DIR_TASKS = [{"direction": d} for d in (1.0, -1.0, -1.0, 1.0)]
CASES = [
    (HalfCheetahVelVectorEnv, HalfCheetahVelEnv, VEL_TASKS),
    (HalfCheetahDirVectorEnv, HalfCheetahDirEnv, DIR_TASKS),
]


def start_states(n, seed):
    rng = np.random.default_rng(seed)
    qpos = rng.uniform(-0.3, 0.3, size=(n, 9))
    qpos[:, 0] = rng.uniform(-1.0, 1.0, size=n)  # somewhere along the track
    return qpos, rng.normal(0.0, 0.5, size=(n, 9))


@pytest.mark.parametrize("backend", ["exact", "rollout"])
@pytest.mark.parametrize(("vector_cls", "single_cls", "tasks"), CASES)
def test_full_horizon_equals_single_envs(vector_cls, single_cls, tasks, backend):
    """Same start states and actions: the same observations and rewards for a whole episode.

    The exact backend reproduces the single env bit for bit. The rollout backend starts the
    constraint solver cold every step (mujoco.rollout cannot return the warm start), so it is
    compared with single envs whose warm start is cleared before each step.
    """
    n = len(tasks)
    venv = vector_cls(n, processes=2, backend=backend)
    venv.reset(seed=0, options={"tasks": tasks})
    qpos, qvel = start_states(n, seed=1)
    obs = venv.set_states(qpos, qvel)
    envs = [single_cls() for _ in range(n)]
    for i, env in enumerate(envs):
        env.reset(seed=i, options={"task": tasks[i]})
        mujoco.mj_resetData(env.model, env.data)  # as if reset had drawn this state
        env.set_state(qpos[i], qvel[i])
        np.testing.assert_array_equal(obs[i], env._get_obs())
    rng = np.random.default_rng(2)
    for t in range(venv.horizon):
        actions = rng.uniform(-1.0, 1.0, size=(n, 6))  # float64: both cast to float32
        obs, rewards, terminated, truncated, info = venv.step(actions)
        for i, env in enumerate(envs):
            if backend == "rollout":
                env.data.qacc_warmstart[:] = 0.0
            obs_i, reward_i, term_i, trunc_i, info_i = env.step(actions[i])
            # Bit for bit: the same mj_step calls on the same MjData state.
            np.testing.assert_array_equal(obs[i], obs_i, err_msg=f"t={t} env {i}")
            assert rewards[i] == pytest.approx(reward_i, rel=0, abs=1e-12)
            assert info["x_velocity"][i] == pytest.approx(info_i["x_velocity"], abs=1e-9)
            assert (terminated[i], truncated[i]) == (term_i, trunc_i)
    assert truncated.all() and not terminated.any()


def test_observation_layout_and_torso_position_from_before_the_last_substep():
    """obs = qpos[1:], qvel, and the torso position of the state before the last substep."""
    venv = HalfCheetahVelVectorEnv(3, processes=1)
    venv.reset(seed=5)
    for _ in range(3):
        obs, *_ = venv.step(np.full((3, 6), 0.5))
    qpos, qvel = venv.get_states()
    np.testing.assert_array_equal(obs[:, :8], qpos[:, 1:])
    np.testing.assert_array_equal(obs[:, 8:17], qvel)
    # One substep earlier, the torso (on slide joints rootx, rootz) was elsewhere.
    assert not np.allclose(obs[:, 17], qpos[:, 0])
    np.testing.assert_allclose(obs[:, 17], qpos[:, 0] - venv.model.opt.timestep * qvel[:, 0])


def test_spaces_metadata_and_horizon():
    venv = HalfCheetahDirVectorEnv(5, horizon=7, processes=1)
    single = HalfCheetahDirEnv()
    assert venv.single_observation_space == Box(-np.inf, np.inf, (20,), np.float64)
    assert venv.single_action_space == single.action_space
    assert venv.observation_space.shape == (5, 20)
    assert venv.action_space.shape == (5, 6)
    assert venv.metadata["autoreset_mode"] is AutoresetMode.DISABLED
    assert HalfCheetahDirVectorEnv(2).horizon == 100
    assert HalfCheetahVelVectorEnv(2).horizon == 200


def test_all_truncate_at_the_horizon_then_step_raises():
    venv = HalfCheetahVelVectorEnv(4, horizon=5, processes=2)
    with pytest.raises(StepBeforeResetError, match="reset"):
        venv.step(np.zeros((4, 6)))
    for _ in range(2):
        venv.reset(seed=0)
        flags = [venv.step(np.zeros((4, 6)))[3] for _ in range(5)]
        assert [f.tolist() for f in flags] == [[False] * 4] * 4 + [[True] * 4]
        with pytest.raises(StepBeforeResetError, match="reset"):
            venv.step(np.zeros((4, 6)))
    with pytest.raises(ValueError, match="reset_mask"):
        venv.reset(options={"reset_mask": np.array([True, False, True, True])})
    venv.reset(options={"reset_mask": np.ones(4, dtype=bool)})


@pytest.mark.parametrize("backend", ["exact", "rollout"])
def test_same_seed_same_episode_any_thread_count(backend):
    def episode(seed, processes):
        venv = HalfCheetahVelVectorEnv(6, horizon=20, processes=processes, backend=backend)
        obs, _ = venv.reset(seed=seed)
        observations = [obs]
        rng = np.random.default_rng(0)
        for _ in range(20):
            observations.append(venv.step(rng.uniform(-1, 1, size=(6, 6)))[0])
        return np.stack(observations), venv.tasks

    obs_a, tasks_a = episode(seed=3, processes=1)
    obs_b, tasks_b = episode(seed=3, processes=3)
    obs_c, tasks_c = episode(seed=4, processes=1)
    np.testing.assert_array_equal(obs_a, obs_b)
    assert tasks_a == tasks_b
    assert not np.allclose(obs_a[0], obs_c[0])
    assert tasks_a != tasks_c


def test_reset_noise_matches_the_single_env_distribution():
    venv = HalfCheetahVelVectorEnv(4000, processes=2)
    venv.reset(seed=0)
    qpos, qvel = venv.get_states()
    init_qpos = HalfCheetahVelEnv().init_qpos
    noise = qpos - init_qpos
    assert np.abs(noise).max() <= 0.1
    assert noise.mean() == pytest.approx(0.0, abs=0.005)
    assert noise.std() == pytest.approx(0.2 / np.sqrt(12), rel=0.02)  # uniform(-0.1, 0.1)
    assert qvel.mean() == pytest.approx(0.0, abs=0.005)
    assert qvel.std() == pytest.approx(0.1, rel=0.02)


@pytest.mark.parametrize(
    ("actions", "match"),
    [
        (np.zeros((3, 6)), "shape"),
        (np.zeros(6), "shape"),
        (np.zeros((4, 5)), "shape"),
        (np.array([[0.0] * 6, [0.0] * 5 + [np.nan], [0.0] * 6, [0.0] * 6]), r"\[1\].*NaN"),
        (np.full((4, 6), np.inf), "NaN or inf"),
    ],
)
def test_invalid_actions_raise(actions, match):
    venv = HalfCheetahVelVectorEnv(4, processes=1)
    venv.reset(seed=0)
    with pytest.raises(InvalidActionError, match=match):
        venv.step(actions)


VEL, DIR = HalfCheetahVelVectorEnv, HalfCheetahDirVectorEnv
ONE = {"velocity": 1.0}


@pytest.mark.parametrize(
    ("vector_cls", "tasks", "error", "match"),
    [
        (VEL, [ONE] * 2, ValueError, "one task per sub-env"),
        (VEL, [ONE, ONE, {"goal": 1.0}], InvalidTaskError, r"tasks\[2\]"),
        (VEL, [{"velocity": float("nan")}] * 3, InvalidTaskError, "finite"),
        (VEL, [{"velocity": "fast"}] * 3, InvalidTaskError, "number"),
        (VEL, ONE, InvalidTaskError, "sequence"),
        (DIR, [{"direction": d} for d in (1, 0.5, -1)], InvalidTaskError, r"\[1\].*-1.0 or 1.0"),
    ],
)
def test_invalid_tasks_raise_and_change_nothing(vector_cls, tasks, error, match):
    venv = vector_cls(3, processes=1)
    venv.reset(seed=0)
    before = venv.tasks
    with pytest.raises(error, match=match):
        venv.set_tasks(tasks)
    with pytest.raises(error, match=match):
        venv.reset(options={"tasks": tasks})
    assert venv.tasks == before
    venv.step(np.zeros((3, 6)))  # the episode is still running


def test_task_protocol():
    venv = HalfCheetahVelVectorEnv(3, velocity_range=(0.0, 3.0), horizon=2, processes=1)
    assert venv.tasks is None
    tasks = venv.sample_tasks(3, np.random.default_rng(0))
    assert tasks == HalfCheetahVelEnv(velocity_range=(0.0, 3.0)).sample_tasks(
        3, np.random.default_rng(0)
    )
    venv.set_tasks(tasks)
    _, info = venv.reset(seed=1)
    assert venv.tasks == tasks
    np.testing.assert_array_equal(info["task"]["velocity"], [t["velocity"] for t in tasks])
    # Rewards use a new task from the next step on, as the single env's set_task.
    venv.set_tasks([{"velocity": 100.0}] * 3)
    _, rewards, *_ = venv.step(np.zeros((3, 6)))
    assert (rewards < -90).all()
    # Tasks stay across resets; None draws a fresh batch at the next reset.
    venv.reset()
    assert venv.tasks == [{"velocity": 100.0}] * 3
    venv.set_tasks(None)
    venv.reset()
    assert all(0.0 <= t["velocity"] <= 3.0 for t in venv.tasks)
    batch = venv.sample_meta_batch()
    assert venv.tasks == batch and len(batch) == 3


def test_dir_reward_sign_follows_the_task():
    venv = HalfCheetahDirVectorEnv(2, horizon=1, processes=1)
    venv.reset(seed=0, options={"tasks": [{"direction": 1.0}, {"direction": -1.0}]})
    venv.set_states(np.zeros((2, 9)), np.tile([2.0] + [0.0] * 8, (2, 1)))  # both moving forward
    _, rewards, _, _, info = venv.step(np.zeros((2, 6)))
    assert info["x_velocity"][0] > 0 and rewards[0] > 0 > rewards[1]
    np.testing.assert_array_equal(info["reward_task"], [1, -1] * info["x_velocity"])


@pytest.mark.parametrize(
    ("env_id", "cls"),
    [
        ("metabench/HalfCheetahVel-v0", HalfCheetahVelVectorEnv),
        ("metabench/HalfCheetahDir-v0", HalfCheetahDirVectorEnv),
    ],
)
def test_make_vec_returns_the_vector_env(env_id, cls):
    venv = gym.make_vec(env_id, num_envs=8, vectorization_mode="vector_entry_point", horizon=3)
    assert type(venv) is cls
    assert venv.num_envs == 8 and venv.horizon == 3
    assert venv.spec is not None and venv.spec.id == env_id
    obs, _ = venv.reset(seed=0)
    assert obs.shape == (8, 20)
    assert isinstance(gym.make_vec(env_id, num_envs=2), cls)  # the default mode for these ids
    assert isinstance(
        gym.make_vec(env_id, num_envs=2, vectorization_mode="sync"), gym.vector.SyncVectorEnv
    )
    venv.close()


def collect(venv, tasks):
    """What a MAML sampler does: pin tasks, reset, step until the episodes end."""
    venv.set_tasks(tasks)
    obs, _ = venv.reset(seed=0)
    returns = np.zeros(venv.num_envs)
    while True:
        obs, rewards, terminated, truncated, _ = venv.step(np.zeros((venv.num_envs, 6)))
        returns += rewards
        if (terminated | truncated).all():
            return obs, returns


def test_a_sampler_works_with_either_vector_env():
    tasks = [{"velocity": 0.0}, {"velocity": 5.0}]
    fast = HalfCheetahVelVectorEnv(2, horizon=4, processes=1)
    generic = make_meta_vec_env(
        "metabench/HalfCheetahVel-v0", 2, rl2=False, backend="gymnasium", env_kwargs={"horizon": 4}
    )
    for venv in (fast, generic):
        obs, returns = collect(venv, tasks)
        assert obs.shape == (2, 20)
        assert returns[1] < returns[0] - 10  # the 5 m/s goal is far from standing still
        assert venv.tasks == tasks
        venv.close()


def test_close_stops_the_worker_processes():
    venv = HalfCheetahVelVectorEnv(4, processes=3)
    processes = list(venv._rows._processes)
    assert len(processes) == 2 and all(p.is_alive() for p in processes)
    venv.reset(seed=0)
    venv.step(np.zeros((4, 6)))
    venv.close()
    assert not any(p.is_alive() for p in processes)
    with pytest.raises(RuntimeError, match="closed"):
        venv.reset()
    assert len(HalfCheetahVelVectorEnv(2, processes=8)._rows._processes) == 1  # one per env at most


def test_a_dead_worker_is_reported():
    venv = HalfCheetahVelVectorEnv(4, processes=2)
    venv.reset(seed=0)
    venv._rows._processes[0].kill()
    venv._rows._processes[0].join()
    with pytest.raises(RuntimeError, match="worker process died"):
        venv.step(np.zeros((4, 6)))
    with pytest.raises(RuntimeError, match="closed"):
        venv.reset()


def test_bad_constructor_arguments():
    with pytest.raises(ValueError, match="num_envs"):
        HalfCheetahVelVectorEnv(0)
    with pytest.raises(ValueError, match="processes must be a positive integer, got 0"):
        HalfCheetahVelVectorEnv(2, processes=0)
    with pytest.raises(ValueError, match="backend"):
        HalfCheetahVelVectorEnv(2, backend="gpu")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="horizon"):
        HalfCheetahDirVectorEnv(2, horizon=0)
    assert issubclass(HalfCheetahVelVectorEnv, HalfCheetahVectorEnv)


@pytest.mark.parametrize(("vector_cls", "single_cls", "tasks"), CASES)
def test_action_scale_is_bit_identical_to_the_single_env(vector_cls, single_cls, tasks):
    """garage's action normalisation applied row by row: the same bits as the single env,
    including actions beyond the scale that the mapping clips."""
    n = len(tasks)
    venv = vector_cls(n, action_scale=10.0, processes=2)
    assert venv.single_action_space == Box(-10.0, 10.0, (6,), np.float32)
    venv.reset(seed=0, options={"tasks": tasks})
    qpos, qvel = start_states(n, seed=3)
    venv.set_states(qpos, qvel)
    envs = [single_cls(action_scale=10.0) for _ in range(n)]
    for i, env in enumerate(envs):
        env.reset(seed=i, options={"task": tasks[i]})
        mujoco.mj_resetData(env.model, env.data)
        env.set_state(qpos[i], qvel[i])
    rng = np.random.default_rng(4)
    for t in range(venv.horizon):
        actions = rng.normal(0.0, 8.0, size=(n, 6))
        obs, rewards, *_ = venv.step(actions)
        for i, env in enumerate(envs):
            obs_i, reward_i, *_ = env.step(actions[i])
            np.testing.assert_array_equal(obs[i], obs_i, err_msg=f"t={t} env {i}")
            assert rewards[i] == reward_i
    venv.close()
