"""Trial-aware vector envs: distinct tasks per meta-batch, per-trial resampling, pinned tasks."""

import os

import numpy as np
import pytest
from gymnasium.vector import AsyncVectorEnv, VectorEnv
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv

from metabench.errors import InvalidTaskError
from metabench.tasks import ListTaskSampler
from metabench.vector import MetaBatchSlot, make_meta_vec_env
from metabench.vector.sharded_sb3 import ShardedSubprocVecEnv

HORIZON = 3
KWARGS = {"env_kwargs": {"horizon": HORIZON}, "episodes_per_trial": 2}
TRIAL = 2 * HORIZON
TASKS = [{"goal": [i / 10, -i / 10]} for i in range(6)]


def goals(tasks):
    return [tuple(t["goal"]) for t in tasks]


def run_trial(venv):
    for _ in range(TRIAL):
        venv.step(np.zeros((venv.num_envs, 2)))


@pytest.mark.parametrize("backend", ["sb3", "gymnasium"])
def test_tasks_distinct_within_batch_and_resampled_per_trial(backend):
    venv = make_meta_vec_env(
        "metabench/PointGoal-v0", 4, sampler=ListTaskSampler(TASKS), backend=backend, **KWARGS
    )
    assert isinstance(venv, VecEnv if backend == "sb3" else VectorEnv)
    venv.reset()
    batches = []
    for _ in range(4):
        batch = goals(venv.tasks)
        assert len(set(batch)) == 4
        batches.append(batch)
        run_trial(venv)
        if backend == "gymnasium":
            venv.step(np.zeros((4, 2)))  # next-step autoreset starts the next trial
    assert len(set(map(tuple, batches))) > 1
    venv.close()


def test_same_seed_same_task_sequence_and_observations():
    def record(seed):
        venv = make_meta_vec_env("metabench/PointGoal-v0", 3, seed=seed, **KWARGS)
        first = venv.reset()
        history = []
        for _ in range(2 * TRIAL):
            history.append(goals(venv.tasks))
            obs, *_ = venv.step(np.full((3, 2), 0.05))
        venv.close()
        return first, history, obs

    a, b, c = record(1), record(1), record(2)
    assert a[1] == b[1] and a[1] != c[1]
    np.testing.assert_array_equal(a[2], b[2])


def test_set_tasks_pins_until_released():
    venv = make_meta_vec_env("metabench/PointGoal-v0", 2, **KWARGS)
    venv.set_tasks(TASKS[:2])
    venv.reset()
    for _ in range(3):
        assert goals(venv.tasks) == goals(TASKS[:2])
        run_trial(venv)
    venv.set_tasks(None)
    run_trial(venv)
    assert goals(venv.tasks) != goals(TASKS[:2])


def test_sample_meta_batch_pins_a_fresh_batch_reproducibly():
    def sample(seed):
        venv = make_meta_vec_env("metabench/PointGoal-v0", 3, seed=seed, **KWARGS)
        venv.reset()
        first_trial = goals(venv.tasks)
        tasks = venv.sample_meta_batch()
        run_trial(venv)
        assert goals(venv.tasks) == goals(tasks)
        return first_trial, goals(tasks)

    (trial_a, batch_a), (_, batch_b) = sample(0), sample(0)
    assert batch_a == batch_b
    assert batch_a != trial_a  # a separate stream from the per-trial schedule


def test_gymnasium_backend_pins_tasks_with_set_attr():
    venv = make_meta_vec_env("metabench/PointGoal-v0", 2, backend="gymnasium", **KWARGS)
    venv.set_tasks(TASKS[2:4])
    venv.reset(seed=0)
    assert goals(venv.tasks) == goals(TASKS[2:4])


def test_worker_processes_give_the_same_tasks_as_in_process():
    def record(processes):
        venv = make_meta_vec_env("metabench/PointGoal-v0", 2, processes=processes, **KWARGS)
        venv.reset()
        seen = [goals(venv.tasks)]
        run_trial(venv)
        seen.append(goals(venv.tasks))
        venv.close()
        return seen

    assert record(None) == record(1)


def test_processes_counts_the_processes_that_step_the_sub_envs():
    """``processes`` is the processes that step the sub-envs, this one included: ``1`` steps them
    here; with ``backend="sb3"`` more are that many shards (``None``: one per core);
    ``"gymnasium"`` steps them here or one process each."""
    in_process = make_meta_vec_env("metabench/PointGoal-v0", 3, **KWARGS)
    assert isinstance(in_process.venv, DummyVecEnv)
    in_process.close()
    two = make_meta_vec_env("metabench/PointGoal-v0", 3, processes=2, **KWARGS)
    assert isinstance(two.venv, ShardedSubprocVecEnv) and two.venv.processes == 2
    two.close()
    every_core = make_meta_vec_env("metabench/PointGoal-v0", 3, processes=None, **KWARGS)
    assert every_core.venv.processes == min(3, os.cpu_count() or 1)
    every_core.close()
    each = make_meta_vec_env(
        "metabench/PointGoal-v0", 3, backend="gymnasium", processes=3, **KWARGS
    )
    assert isinstance(each.env, AsyncVectorEnv)
    each.close()
    with pytest.raises(ValueError, match="processes must be a positive integer, got 0"):
        make_meta_vec_env("metabench/PointGoal-v0", 3, processes=0, **KWARGS)
    with pytest.raises(ValueError, match="backend='sb3' shards them"):
        make_meta_vec_env("metabench/PointGoal-v0", 3, backend="gymnasium", processes=2, **KWARGS)


def test_errors_name_the_fix():
    with pytest.raises(ValueError, match="at most 6"):
        make_meta_vec_env("metabench/PointGoal-v0", 7, sampler=ListTaskSampler(TASKS))
    with pytest.raises(ValueError, match="one task per sub-env"):
        make_meta_vec_env("metabench/PointGoal-v0", 2).set_tasks(TASKS[:3])
    with pytest.raises(InvalidTaskError):
        make_meta_vec_env("metabench/PointGoal-v0", 2).set_tasks([{"x": 1}, {"x": 2}])
    with pytest.raises(ValueError, match="task id"):
        make_meta_vec_env("metabench/RL2-PointGoal-v0", 2)
    with pytest.raises(ValueError, match="backend"):
        make_meta_vec_env("metabench/PointGoal-v0", 2, backend="jax")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="positive integer"):
        make_meta_vec_env("metabench/PointGoal-v0", 0)


@pytest.mark.parametrize("processes", [1, 2])  # here, or 2 processes (gymnasium: one per sub-env)
@pytest.mark.parametrize("backend", ["sb3", "gymnasium"])
def test_actions_for_more_or_fewer_sub_envs_are_refused(backend, processes):
    """A row per sub-env or nothing: SB3's DummyVecEnv stepped the first rows and dropped the
    rest. A refused step leaves the sub-envs where they were."""
    venv = make_meta_vec_env(
        "metabench/PointGoal-v0", 2, backend=backend, processes=processes, **KWARGS
    )
    venv.reset()
    for rows in (3, 1):
        with pytest.raises(ValueError, match=r"for 2 sub-envs: pass one action per sub-env"):
            venv.step(np.full((rows, 2), 0.1))
    observations = venv.step(np.full((2, 2), 0.1))[0]
    np.testing.assert_allclose(observations[:, :2], 0.1)  # one step from the origin
    venv.close()


def test_meta_batch_slot_agrees_across_slots():
    sampler = ListTaskSampler(TASKS)
    slots = [MetaBatchSlot(sampler, 3, i, seed=4) for i in range(3)]
    for _ in range(5):
        batch = [slot.sample(1, np.random.default_rng())[0] for slot in slots]
        assert len(set(goals(batch))) == 3


@pytest.mark.parametrize("backend", ["sb3", "gymnasium"])
def test_state_dict_resumes_the_task_schedule_at_the_current_trial(backend):
    def make():
        return make_meta_vec_env(
            "metabench/PointGoal-v0", 3, sampler=ListTaskSampler(TASKS), backend=backend, **KWARGS
        )

    venv = make()
    venv.reset()
    for _ in range(2):
        run_trial(venv)
        if backend == "gymnasium":
            venv.step(np.zeros((3, 2)))  # next-step autoreset starts the next trial
    current, state = goals(venv.tasks), venv.state_dict()
    explicit = goals(venv.sample_meta_batch())

    resumed = make()
    resumed.load_state_dict(state)
    resumed.reset()
    assert goals(resumed.tasks) == current
    assert goals(resumed.sample_meta_batch()) == explicit
