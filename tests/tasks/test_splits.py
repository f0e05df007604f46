"""The built-in kinds of split: ``"list"`` is oyster's protocol (a fixed list of tasks, the first
ones train, the last ones are held out), checked against slicing the list by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from metabench.rng import TASK_LIST
from metabench.tasks.splits import ListSplit, SeedSplit, SplitKeyError
from metabench.tasks.toy.envs import PointGoalEnv


class Listed(PointGoalEnv):
    """PointGoal with a list of its own for 4 tasks (as oyster's seeded lists)."""

    def listed_tasks(self, n: int) -> list[dict[str, list[float]]] | None:
        return [{"goal": [float(i), 0.0]} for i in range(n)] if n == 4 else None


def drawn(n: int, seed: int) -> list[dict[str, list[float]]]:
    """What the split draws without a list: ``n`` tasks with the seed's TASK_LIST stream."""
    return PointGoalEnv().sample_tasks(n, TASK_LIST.generator(seed))


def test_the_first_tasks_train_and_the_last_are_held_out():
    split = ListSplit(n_tasks=10, train_tasks=7)
    sampler = split.train_sampler(PointGoalEnv, {}, seed=3)
    test = split.test_tasks(PointGoalEnv, {}, 3, 2, np.random.default_rng(0))
    everything = drawn(10, 3)
    assert sampler.tasks == everything[:7] and test == everything[-2:]
    # meta-batches come from the training tasks, with replacement (oyster: np.random.choice)
    batch = sampler.sample(20, np.random.default_rng(1))
    assert len(batch) == 20 and all(task in everything[:7] for task in batch)
    # each seed has its own list where the env has none
    assert split.test_tasks(PointGoalEnv, {}, 4, 2, np.random.default_rng(0)) == drawn(10, 4)[-2:]


def test_counts_that_overlap_train_and_test_on_the_same_tasks():
    """oyster's Cheetah-Dir and Ant-Dir: n_tasks 2, train tasks[:2], test tasks[-2:]."""
    split = ListSplit(n_tasks=2, train_tasks=2)
    train = split.train_sampler(PointGoalEnv, {}, seed=0).tasks
    assert split.test_tasks(PointGoalEnv, {}, 0, 2, np.random.default_rng(0)) == train


def test_an_envs_own_list_is_taken_whatever_the_seed():
    split = ListSplit(n_tasks=4, train_tasks=3)
    for seed in (0, 1):
        assert split.train_sampler(Listed, {}, seed).tasks == [
            {"goal": [float(i), 0.0]} for i in range(3)
        ]
        assert split.test_tasks(Listed, {}, seed, 1, np.random.default_rng(0)) == [
            {"goal": [3.0, 0.0]}
        ]
    other = ListSplit(n_tasks=5, train_tasks=3)  # no list of 5: drawn
    assert other.train_sampler(Listed, {}, 0).tasks == drawn(5, 0)[:3]


@pytest.mark.parametrize(
    ("values", "n_test", "key"),
    [
        ({"n_tasks": 4, "train_tasks": 5}, 2, "train_tasks"),
        ({"n_tasks": 4, "train_tasks": 2}, 5, "test_tasks"),
    ],
)
def test_counts_beyond_the_list_name_the_key(values, n_test, key):
    with pytest.raises(SplitKeyError, match=f"{key} must be at most n_tasks \\(4\\)") as error:
        ListSplit(**values).check(n_test)
    assert error.value.key == key


def test_the_seed_kind_draws_from_the_env_with_the_generator_given():
    rng_a, rng_b = np.random.default_rng(5), np.random.default_rng(5)
    tasks = SeedSplit().test_tasks(PointGoalEnv, {}, 0, 3, rng_a)
    assert tasks == PointGoalEnv().sample_tasks(3, rng_b)
    assert SeedSplit().train_sampler(PointGoalEnv, {}, 0) is None


@pytest.mark.mujoco
def test_oysters_lists_are_the_envs_own():
    """The classic envs give oyster's fixed lists: Ant-Dir's forward/backward pair (its
    ``sample_tasks`` with ``forward_backward``), Cheetah-Dir's [-1, 1]."""
    from metabench.tasks.ant.envs import AntDirEnv
    from metabench.tasks.halfcheetah.envs import HalfCheetahDirEnv

    assert AntDirEnv().listed_tasks(2) == [{"angle": 0.0}, {"angle": math.pi}]
    assert AntDirEnv(protocol="oyster-2d").listed_tasks(2) is None
    assert HalfCheetahDirEnv(protocol="oyster").listed_tasks(2) == [
        {"direction": -1.0},
        {"direction": 1.0},
    ]
    assert HalfCheetahDirEnv().listed_tasks(2) is None  # garage's has none
