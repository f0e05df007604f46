"""ShardedSubprocVecEnv against one in-process DummyVecEnv of the same envs: identical results."""

from __future__ import annotations

import functools
import os

import numpy as np
import pytest
import torch
from stable_baselines3.common.vec_env import DummyVecEnv

from metabench.algos.rl2.rl2_ppo import RL2PPOConfig
from metabench.errors import InvalidActionError
from metabench.tasks.toy.envs import PointGoalEnv
from metabench.vector.sharded_sb3 import ShardedSubprocVecEnv
from metabench.workers import WorkerDied
from tests.factories import rl2_ppo_on_processes

N = 5


def factories() -> list[functools.partial[PointGoalEnv]]:
    return [functools.partial(PointGoalEnv, horizon=3 + i % 2) for i in range(N)]


def rollout(venv, steps: int = 9) -> list:
    """Everything the vector env returns over ``steps`` steps (episodes of 3 and 4 steps, so
    sub-envs autoreset at different steps)."""
    venv.seed(11)
    out = [venv.reset(), venv.reset_infos]
    rng = np.random.default_rng(0)
    for _ in range(steps):
        obs, rewards, dones, infos = venv.step(rng.uniform(-1, 1, size=(N, 2)).astype(np.float32))
        out += [obs, rewards, dones, [sorted(info) for info in infos]]
        out += [info.get("terminal_observation") for info in infos]
    venv.close()
    return out


def assert_same(one: list, other: list) -> None:
    assert len(one) == len(other)
    for a, b in zip(one, other, strict=True):
        if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
            np.testing.assert_array_equal(a, b)
        else:
            assert a == b


@pytest.mark.parametrize("processes", [1, 2, 3, 8])
def test_same_results_as_dummy_vec_env(processes):
    expected = rollout(DummyVecEnv(factories()))
    assert_same(rollout(ShardedSubprocVecEnv(factories(), processes=processes)), expected)


def test_shards_interleave():
    venv = ShardedSubprocVecEnv(factories(), processes=2)
    assert venv.shards == [[0, 2, 4], [1, 3]]
    venv.close()


def test_sub_env_access_by_index():
    venv = ShardedSubprocVecEnv(factories(), processes=2)
    try:
        assert venv.get_attr("horizon") == [3, 4, 3, 4, 3]
        assert venv.get_attr("horizon", indices=[1, 4]) == [4, 3]
        venv.set_attr("horizon", 7, indices=[2, 3])
        assert venv.get_attr("horizon") == [3, 4, 7, 7, 3]
        goal = {"goal": [0.5, -0.5]}
        venv.env_method("set_task", goal, indices=[4])
        assert (
            venv.env_method("sample_tasks", 1, np.random.default_rng(0), indices=[0, 3])
            == [PointGoalEnv().sample_tasks(1, np.random.default_rng(0))] * 2
        )
        assert venv.get_attr("task", indices=[4]) == [goal]
        assert venv.env_is_wrapped(PointGoalEnv) == [False] * N
    finally:
        venv.close()


def test_a_sub_env_that_raises_is_reported():
    venv = ShardedSubprocVecEnv(
        factories(), processes=2
    )  # sub-envs 0, 2, 4 here, 1 and 3 in a worker
    venv.reset()
    actions = np.zeros((N, 2), dtype=np.float32)
    actions[2] = np.nan
    with pytest.raises(InvalidActionError, match="NaN"):
        venv.step(actions)
    venv.step(np.zeros((N, 2), dtype=np.float32))  # the workers' replies were read: in step
    actions = np.zeros((N, 2), dtype=np.float32)
    actions[3] = np.nan
    with pytest.raises(WorkerDied):
        venv.step(actions)
    venv._pool.close(terminate=True)


def test_rl2_trains_the_same_with_env_workers():
    """RL2-PPO with step_in_workers=True (2 processes) learns exactly what it learns in-process."""

    def train(step_in_workers: bool) -> list[torch.Tensor]:
        config = RL2PPOConfig(meta_batch_size=4, hidden_size=8, step_in_workers=step_in_workers)
        algo = rl2_ppo_on_processes(config, seed=3, processes=2 if step_in_workers else 1)
        stepped_by = algo.venv.venv
        assert isinstance(stepped_by, ShardedSubprocVecEnv if step_in_workers else DummyVecEnv)
        assert not step_in_workers or stepped_by.processes == 2
        algo.train(2)
        algo.venv.close()
        return [p.detach().clone() for p in algo.model.policy.parameters()]

    torch_threads = torch.get_num_threads()
    in_process, with_workers = train(False), train(True)
    assert torch.get_num_threads() == torch_threads  # the rollout's one thread is given back
    for a, b in zip(in_process, with_workers, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def _accumulate(state: dict, value: int) -> tuple[int, int]:
    state["total"] = state.get("total", 0) + value
    return os.getpid(), state["total"]


def test_run_executes_in_the_worker_and_keeps_its_state():
    venv = ShardedSubprocVecEnv(factories(), processes=3)
    assert venv.processes == 3  # this one and 2 workers
    for w in range(venv.processes - 1):
        venv.run_async(w, _accumulate, 10 * (w + 1))
    first = [venv.run_wait(w) for w in range(venv.processes - 1)]
    venv.run_async(0, _accumulate, 1)
    again = venv.run_wait(0)
    venv.close()
    pids = {pid for pid, _ in first}
    assert len(pids) == 2 and os.getpid() not in pids
    assert [total for _, total in first] == [10, 20]
    assert again == (first[0][0], 11)
