"""RunEnvs: the one place that builds a run's environments steps each family's meta-batch the way
its declaration says, on the run's process count, and nowhere else."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from gymnasium.vector import SyncVectorEnv
from stable_baselines3.common.vec_env import DummyVecEnv

from metabench.algos.run_envs import RunEnvs
from metabench.tasks.base import TaskSampler
from metabench.vector import MetaBatchVectorEnv
from metabench.vector.sharded import ShardedVectorEnv
from metabench.vector.sharded_sb3 import ShardedSubprocVecEnv


@dataclass(frozen=True)
class Declared:
    """A benchmark as a family declares it: only what RunEnvs reads."""

    env_id: str = "metabench/PointGoal-v0"
    steps_in_workers: bool = False
    batched_vector_env: bool = False
    env_kwargs: dict[str, Any] = field(default_factory=lambda: {"horizon": 5})
    name: str = "declared"
    path: str = "declared.toml"
    episodes_per_trial: int = 2
    exploration_episodes: int = 1

    def train_sampler(self, seed: int) -> TaskSampler | None:
        return None

    def train_env_kwargs(self, seed: int) -> dict[str, Any]:
        return dict(self.env_kwargs)

    def make_test_env(self, seed: int) -> Any:
        raise AssertionError("not used here")


def test_episode_batch_steps_in_this_process_unless_the_family_says_otherwise() -> None:
    venv = RunEnvs(Declared(), seed=1, processes=2).episode_batch(4)
    try:
        assert isinstance(venv, MetaBatchVectorEnv) and isinstance(venv.env, SyncVectorEnv)
        assert venv.num_envs == 4 and venv.env.get_attr("horizon") == (5, 5, 5, 5)
    finally:
        venv.close()


@pytest.mark.parametrize("processes", [1, 2])
def test_episode_batch_of_a_family_stepped_in_workers_is_sharded_over_the_run_processes(
    processes: int,
) -> None:
    venv = RunEnvs(Declared(steps_in_workers=True), processes=processes).episode_batch(4)
    try:
        assert isinstance(venv, ShardedVectorEnv) and len(venv.processes) == processes
    finally:
        venv.close()


@pytest.mark.mujoco
@pytest.mark.parametrize(
    ("env_kwargs", "dtype"),
    [({}, np.float64), ({"protocol": "oyster", "horizon": 200}, np.float32)],
)
def test_episode_batch_of_a_family_with_a_batched_env_gets_it_on_the_run_processes(
    env_kwargs: dict[str, Any], dtype: type
) -> None:
    """Whatever the protocol: the batched env builds its template with the benchmark's
    arguments (oyster's observations are float32)."""
    declared = Declared(
        "metabench/HalfCheetahVel-v0", batched_vector_env=True, env_kwargs=env_kwargs
    )
    for processes, expected in ((2, 2), (None, os.cpu_count())):
        venv = RunEnvs(declared, processes=processes).episode_batch(3)
        try:
            assert type(venv).__name__ == "HalfCheetahVelVectorEnv"
            assert venv.processes == expected  # type: ignore[attr-defined]
            assert venv.single_observation_space.dtype == dtype
        finally:
            venv.close()


@pytest.mark.parametrize(
    ("in_workers", "processes", "stepped_by", "count"),
    [
        (False, 2, DummyVecEnv, None),
        (True, 1, DummyVecEnv, None),
        (True, 2, ShardedSubprocVecEnv, 2),
        (True, None, ShardedSubprocVecEnv, min(3, os.cpu_count() or 1)),
    ],
)
def test_trial_batch_steps_in_workers_only_when_asked_on_the_run_processes(
    in_workers: bool, processes: int | None, stepped_by: type, count: int | None
) -> None:
    envs = RunEnvs(Declared(), seed=2, processes=processes)
    venv = envs.trial_batch(3, in_workers=in_workers, sampler=None, episodes_per_trial=2, rl2=True)
    try:
        assert isinstance(venv.venv, stepped_by)
        assert count is None or venv.venv.processes == count
        assert venv.get_attr("horizon") == [5, 5, 5]
    finally:
        venv.close()


def test_a_process_count_below_one_and_a_seed_out_of_range_are_refused() -> None:
    with pytest.raises(ValueError, match="processes must be a positive integer, got 0"):
        RunEnvs(Declared(), processes=0)
    for seed in (-1, 2**32, True):
        with pytest.raises(ValueError, match=r"seed must be an integer from 0 to 2\*\*32 - 1"):
            RunEnvs(Declared(), seed=seed)  # type: ignore[arg-type]
    seed = RunEnvs(Declared(), seed=np.int64(7)).seed
    assert seed == 7 and type(seed) is int  # what the algorithms' generators are seeded with
