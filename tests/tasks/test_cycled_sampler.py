"""Meta-World's training order (``train_task_order = "cycled"``): each block of tasks once per
cycle, and, on the real ML1 and ML10 task lists, the very batches Meta-World's own training vector
env (``metaworld.make_ml_envs_train``, with its task-select wrappers) hands its sub-envs."""

from __future__ import annotations

import itertools
from collections import OrderedDict
from types import SimpleNamespace
from typing import Any

import gymnasium as gym
import metaworld
import numpy as np
import pytest
from gymnasium.utils import seeding

from metabench.tasks.base import CycledTaskSampler, ListTaskSampler, ordered_sampler
from metabench.tasks.metaworld.envs import MetaWorldTaskSampler, load_benchmark

TASKS = list(range(50))


def batches(sampler: CycledTaskSampler, n: int, count: int) -> list[list[Any]]:
    return [sampler.sample_batch(k, n, np.random.default_rng(k)) for k in range(count)]


def test_every_task_once_per_cycle_in_blocks_of_consecutive_tasks() -> None:
    sampler = CycledTaskSampler(ListTaskSampler(TASKS), seed=5)
    drawn = batches(sampler, 10, 30)
    cycles = [drawn[i : i + 5] for i in range(0, 30, 5)]
    for cycle in cycles:
        assert sorted(itertools.chain(*cycle)) == TASKS
        for batch in cycle:
            assert batch == list(range(batch[0], batch[0] + 10)) and batch[0] % 10 == 0
    orders = {tuple(batch[0] for batch in cycle) for cycle in cycles}
    assert len(orders) > 1  # reshuffled from cycle to cycle
    assert drawn == batches(CycledTaskSampler(ListTaskSampler(TASKS), seed=5), 10, 30)
    assert drawn != batches(CycledTaskSampler(ListTaskSampler(TASKS), seed=6), 10, 30)


def test_a_meta_batch_takes_a_block_of_every_class() -> None:
    groups = [[(c, g) for g in range(6)] for c in range(3)]
    base = SimpleNamespace(task_groups=lambda: groups, check_batch_size=lambda n: None)
    sampler = CycledTaskSampler(base, seed=0)  # type: ignore[arg-type]
    for batch in batches(sampler, 6, 6):
        assert [task[0] for task in batch] == [0, 0, 1, 1, 2, 2]
        starts = {task[1] for task in batch[::2]}
        assert len(starts) == 1 and starts.pop() % 2 == 0  # the same block of each class
        assert all(b[1] == a[1] + 1 for a, b in zip(batch[::2], batch[1::2], strict=True))


@pytest.mark.parametrize(
    ("base", "n", "message"),
    [
        (ListTaskSampler(TASKS), 7, "divisor of 50"),
        (ListTaskSampler(TASKS), 60, "at most 50"),
    ],
)
def test_impossible_meta_batches_name_the_fix(base: Any, n: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        CycledTaskSampler(base, seed=0).sample_batch(0, n, np.random.default_rng())


def test_cycling_needs_a_finite_list_with_as_many_tasks_per_class() -> None:
    assert ordered_sampler(None, "sampled", 0) is None
    with pytest.raises(ValueError, match="use 'sampled'"):
        ordered_sampler(None, "cycled", 0)
    uneven = SimpleNamespace(task_groups=lambda: [[1, 2], [3]])
    with pytest.raises(ValueError, match="same number of goals per class"):
        CycledTaskSampler(uneven, seed=0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'sampled' or 'cycled'"):
        ordered_sampler(ListTaskSampler(TASKS), "shuffled", 0)  # type: ignore[arg-type]


class _Sawyer(gym.Env[np.ndarray, np.ndarray]):
    """Just what Meta-World's training env factory needs of a Sawyer env, seeded as a Sawyer env
    seeds itself; it keeps the task it is set to."""

    max_path_length = 500
    observation_space = gym.spaces.Box(-1.0, 1.0, (1,))
    action_space = gym.spaces.Box(-1.0, 1.0, (1,))

    def __init__(self, **_: Any) -> None:
        self.task: Any = None

    def seed(self, seed: int) -> None:
        self.np_random, _ = seeding.np_random(seed)  # SawyerXYZEnv.seed

    def set_task(self, task: Any) -> None:
        self.task = task

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        return np.zeros(1, dtype=np.float32), {}

    def step(self, action: Any) -> Any:
        return np.zeros(1, dtype=np.float32), 0.0, False, False, {"success": 0.0}


def _meta_worlds_own_batches(
    monkeypatch: pytest.MonkeyPatch, name: str, benchmark: Any, n: int, seed: int, count: int
) -> list[list[Any]]:
    """The tasks Meta-World's training vector env sets in its sub-envs at its first ``count``
    ``sample_tasks`` calls, on ``benchmark``'s task lists, its Sawyer envs swapped for
    :class:`_Sawyer` (the rest of the benchmark object, the env factory and wrappers are
    Meta-World's)."""
    fake = SimpleNamespace(
        train_classes=OrderedDict((cls, _Sawyer) for cls in benchmark.train_classes),
        train_tasks=benchmark.train_tasks,
    )
    monkeypatch.setattr(metaworld, "ML1", lambda *args, **kwargs: fake)
    monkeypatch.setattr(metaworld, "ML10", lambda *args, **kwargs: fake)
    envs = metaworld.make_ml_envs_train(name, seed=seed, meta_batch_size=n)
    assert isinstance(envs, gym.vector.SyncVectorEnv)
    drawn = []
    for _ in range(count):
        envs.call("sample_tasks")
        drawn.append([env.get_wrapper_attr("task") for env in envs.envs])
    envs.close()
    return drawn


@pytest.mark.metaworld
@pytest.mark.parametrize(
    ("split", "env_name", "n", "seed"), [("ML1", "reach-v3", 10, 3), ("ML10", None, 20, 0)]
)
def test_the_batches_of_meta_worlds_own_training_envs(
    monkeypatch: pytest.MonkeyPatch, split: str, env_name: str | None, n: int, seed: int
) -> None:
    """Meta-World+ trains on these batches: the same seed gives the same order (12 cycles of
    ML1-reach's 5 blocks, 2 cycles of ML10's 25)."""
    count = 60
    tasks = MetaWorldTaskSampler(split, env_name=env_name, seed=seed)
    theirs = _meta_worlds_own_batches(
        monkeypatch, env_name or split, load_benchmark(split, env_name, seed), n, seed, count
    )
    assert batches(CycledTaskSampler(tasks, seed), n, count) == theirs
    assert batches(CycledTaskSampler(tasks, seed + 1), n, count) != theirs
