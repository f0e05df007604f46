"""ShardedVectorEnv: sub-envs in worker processes behave as the same single envs in one process."""

from __future__ import annotations

import functools
import os
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, SyncVectorEnv

import metabench  # noqa: F401 - registers the metabench/* ids
from metabench.algos.maml.collector import VectorEpisodeCollector
from metabench.errors import InvalidActionError
from metabench.tasks.family import sampling_task_envs, task_envs
from metabench.tasks.toy.envs import PointGoalEnv
from metabench.vector import make_task_vec_env
from metabench.vector.sharded import ShardedVectorEnv, SubEnvError, make_sharded_task_env

POINT_GOAL = "metabench/PointGoal-v0"
HORIZON = 4
STEPS = 11  # two autoresets at horizon 4


def point_tasks(n: int) -> list[dict[str, list[float]]]:
    return PointGoalEnv().sample_tasks(n, np.random.default_rng(1))


def random_actions(n: int, steps: int, dim: int = 2, scale: float = 0.15) -> np.ndarray:
    # beyond max_step (0.1) too, so the env's clipping is exercised
    return np.random.default_rng(2).uniform(-scale, scale, size=(steps, n, dim))


def step_by_hand(
    envs: list[Any], tasks: list[Any], seed: int, actions: np.ndarray
) -> list[tuple[np.ndarray, ...]]:
    """Single envs with SyncVectorEnv's NEXT_STEP autoreset, written out."""
    for env, task in zip(envs, tasks, strict=True):
        env.set_task(task)
    obs = np.stack([env.reset(seed=seed + i)[0] for i, env in enumerate(envs)])
    records = [(obs,)]
    ended = np.zeros(len(envs), dtype=bool)
    for step_actions in actions:
        rows = []
        for i, (env, action) in enumerate(zip(envs, step_actions, strict=True)):
            if ended[i]:
                rows.append((env.reset()[0], 0.0, False, False))
            else:
                rows.append(env.step(action)[:4])
        obs, rewards, terminated, truncated = (
            np.array(column) for column in zip(*rows, strict=True)
        )
        ended = terminated | truncated
        records.append((obs, rewards, terminated, truncated))
    return records


def step_vector(
    venv: Any, tasks: list[Any], seed: int, actions: np.ndarray
) -> tuple[list[tuple[np.ndarray, ...]], list[dict[str, Any]]]:
    if isinstance(venv, SyncVectorEnv):
        for env, task in zip(venv.envs, tasks, strict=True):
            env.unwrapped.set_task(task)  # type: ignore[attr-defined]
    else:
        venv.set_tasks(tasks)
    obs, info = venv.reset(seed=seed)
    records: list[tuple[np.ndarray, ...]] = [(obs,)]
    infos = [info]
    for step_actions in actions:
        obs, rewards, terminated, truncated, info = venv.step(step_actions)
        records.append((obs, rewards, terminated, truncated))
        infos.append(info)
    return records, infos


@pytest.mark.parametrize(("num_envs", "processes"), [(4, 1), (4, 2), (5, 2), (5, 3), (2, 8)])
def test_same_results_as_sync_vector_env_and_single_envs(num_envs: int, processes: int) -> None:
    tasks = point_tasks(num_envs)
    actions = random_actions(num_envs, STEPS)
    venv = make_sharded_task_env(POINT_GOAL, num_envs, processes=processes, horizon=HORIZON)
    try:
        assert len(venv.processes) == min(num_envs, processes)
        sizes = [stop - start for start, stop in venv.shards]
        assert sum(sizes) == num_envs and max(sizes) - min(sizes) <= 1
        assert venv.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
        assert venv.single_observation_space == PointGoalEnv().observation_space
        assert venv.action_space.shape == (num_envs, 2)
        sharded, sharded_infos = step_vector(venv, tasks, 7, actions)
        assert venv.tasks == tasks
    finally:
        venv.close()
    sync_env = SyncVectorEnv([functools.partial(PointGoalEnv, horizon=HORIZON)] * num_envs)
    synced, sync_infos = step_vector(sync_env, tasks, 7, actions)
    by_hand = step_by_hand(
        [PointGoalEnv(horizon=HORIZON) for _ in range(num_envs)], tasks, 7, actions
    )
    assert any(record[3].any() for record in by_hand[1:])  # episodes did end (and autoreset)
    for ours, theirs, hand in zip(sharded, synced, by_hand, strict=True):
        for a, b, c in zip(ours, theirs, hand, strict=True):
            np.testing.assert_array_equal(a, b)
            np.testing.assert_array_equal(a, c)
    np.testing.assert_equal(sharded_infos, sync_infos)


def test_set_tasks_pins_one_task_per_sub_env_from_the_next_reset() -> None:
    venv = make_sharded_task_env(POINT_GOAL, 3, processes=2, horizon=2)
    try:
        first = point_tasks(3)
        venv.set_tasks(first)
        assert venv.tasks == first
        venv.reset(seed=0)
        goals = [[0.4, 0.0], [0.0, -0.3], [-0.2, 0.2]]
        venv.set_tasks([{"goal": goal} for goal in goals])
        assert [task["goal"] for task in venv.tasks] == goals
        venv.reset(seed=0)
        _, rewards, *_ = venv.step(np.zeros((3, 2)))
        np.testing.assert_allclose(rewards, -np.linalg.norm(goals, axis=1))
        venv.set_tasks(None)  # keeps the tasks
        assert [task["goal"] for task in venv.tasks] == goals
        assert venv.get_attr("horizon") == (2, 2, 2)
        sampled = venv.call("sample_tasks", 1, np.random.default_rng(0))
        assert sampled[0] == PointGoalEnv().sample_tasks(1, np.random.default_rng(0))
        with pytest.raises(ValueError, match="one task per sub-env"):
            venv.set_tasks(goals[:2])
    finally:
        venv.close()


def test_reset_mask_resets_only_the_masked_sub_envs() -> None:
    venv = make_sharded_task_env(POINT_GOAL, 3, processes=2)
    try:
        venv.set_tasks(point_tasks(3))
        venv.reset(seed=0)
        obs, *_ = venv.step(np.full((3, 2), 0.05))
        obs, info = venv.reset(options={"reset_mask": np.array([False, True, False])})
        np.testing.assert_array_equal(obs, [[0.05, 0.05], [0.0, 0.0], [0.05, 0.05]])
        np.testing.assert_array_equal(info["_task"], [False, True, False])
    finally:
        venv.close()


def test_an_error_in_a_sub_env_names_it_and_keeps_the_original() -> None:
    venv = make_sharded_task_env(POINT_GOAL, 5, processes=2)
    try:
        venv.set_tasks(point_tasks(5))
        venv.reset(seed=0)
        actions = np.zeros((5, 2))
        actions[3] = np.nan
        with pytest.raises(SubEnvError, match="sub-env 3 raised InvalidActionError") as caught:
            venv.step(actions)
        assert caught.value.index == 3
        assert isinstance(caught.value.__cause__, InvalidActionError)
        # a wrong shape for one sub-env, as a list of per-env actions
        bad = [np.zeros(2)] * 4 + [np.zeros(3)]
        with pytest.raises(SubEnvError, match=r"sub-env 4 raised InvalidActionError.*shape"):
            venv.step(bad)
        venv.reset(seed=0)  # the workers still serve
        venv.step(np.zeros((5, 2)))
    finally:
        venv.close()


class ExitingEnv(gym.Env[np.ndarray, np.ndarray]):
    """Kills its process when stepped with a positive action."""

    observation_space = spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float64)
    action_space = spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float64)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        return np.zeros(1), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if action[0] > 0:
            os._exit(3)
        return np.zeros(1), 0.0, False, False, {}


def failing_factory() -> gym.Env[Any, Any]:
    raise RuntimeError("no env for you")


def test_a_dead_worker_or_a_failing_factory_is_a_clear_error() -> None:
    venv = ShardedVectorEnv([ExitingEnv] * 4, processes=2)
    venv.reset(seed=0)
    with pytest.raises(SubEnvError, match=r"sub-envs 2\.\.3 died \(exit code 3\)"):
        venv.step(np.array([[0.0], [0.0], [0.0], [1.0]]))
    assert venv.closed
    assert not any(process.is_alive() for process in venv.processes)

    with pytest.raises(SubEnvError, match="sub-env 2 raised RuntimeError: no env for you"):
        ShardedVectorEnv([ExitingEnv, ExitingEnv, failing_factory], processes=2)


def test_close_stops_the_workers() -> None:
    venv = make_sharded_task_env(POINT_GOAL, 4, processes=2)
    processes = list(venv.processes)
    assert all(process.is_alive() for process in processes)
    venv.close()
    assert venv.closed and not any(process.is_alive() for process in processes)
    venv.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        venv.reset()

    venv = make_sharded_task_env(POINT_GOAL, 2, processes=2)
    processes = list(venv.processes)
    venv.__del__()
    assert not any(process.is_alive() for process in processes)


def test_vector_episode_collector_on_the_sharded_env_matches_the_default_env() -> None:
    tasks = point_tasks(2)

    def actor(observations: np.ndarray) -> np.ndarray:  # deterministic, depends on the obs
        return 0.1 * np.tanh(3.0 * observations[:, ::-1] + 0.2)

    venv = make_sharded_task_env(POINT_GOAL, 6, processes=2, horizon=5)
    try:
        batches = VectorEpisodeCollector(venv, episodes_per_task=3).collect(tasks, actor, seed=0)
    finally:
        venv.close()
    default_env = make_task_vec_env(POINT_GOAL, 6, env_kwargs={"horizon": 5})
    expected = VectorEpisodeCollector(default_env, episodes_per_task=3).collect(
        tasks, actor, seed=0
    )
    default_env.close()
    assert len(batches) == 2
    for batch, reference, task in zip(batches, expected, tasks, strict=True):
        assert batch.lengths.tolist() == [5, 5, 5]
        assert list(batch.episode_infos["task"]) == [task] * 3
        for field in ("observations", "actions", "rewards", "step_types", "last_observations"):
            np.testing.assert_array_equal(getattr(batch, field), getattr(reference, field))


@pytest.mark.metaworld
@pytest.mark.filterwarnings("ignore:.*Box observation space:UserWarning")
def test_metaworld_ml1_matches_single_envs_stepped_by_hand() -> None:
    from metabench.tasks.metaworld.envs import ML1Env

    horizon, n = 10, 4
    reference = [ML1Env("reach-v3", horizon=horizon) for _ in range(n)]
    tasks = reference[0].sample_tasks(n, np.random.default_rng(0))
    actions = random_actions(n, horizon + 2, dim=4, scale=1.0).astype(np.float32)
    venv = make_sharded_task_env(
        "metabench/ML1-v0", n, processes=2, env_name="reach-v3", horizon=10
    )
    try:
        assert [stop - start for start, stop in venv.shards] == [2, 2]
        sharded, _ = step_vector(venv, tasks, 3, actions)
    finally:
        venv.close()
    by_hand = step_by_hand(reference, tasks, 3, actions)
    assert by_hand[horizon][3].all() and not by_hand[horizon + 1][3].any()  # autoreset happened
    for ours, hand in zip(sharded, by_hand, strict=True):
        for a, b in zip(ours, hand, strict=True):
            np.testing.assert_array_equal(a, b)


@pytest.mark.mujoco
@pytest.mark.parametrize(
    "name",
    [name for name in sampling_task_envs() if task_envs()[name].steps_in_workers],
)
def test_maml_batches_of_the_families_stepped_in_workers_match_one_process(name: str) -> None:
    """MAML steps these envs in worker processes when a run has several cores: the batches
    must be the ones one process collects."""
    env_id = f"metabench/{name}-v0"
    probe = gym.make(env_id, horizon=6).unwrapped
    tasks = probe.sample_tasks(2, np.random.default_rng(4))
    act_dim = probe.action_space.shape[0]

    def actor(observations: np.ndarray) -> np.ndarray:  # deterministic, depends on the obs
        return np.tanh(observations[:, :act_dim] + 0.3)

    venv = make_sharded_task_env(env_id, 4, processes=2, info_keys=(), horizon=6)
    try:
        batches = VectorEpisodeCollector(venv, episodes_per_task=2).collect(tasks, actor, seed=5)
    finally:
        venv.close()
    default_env = make_task_vec_env(env_id, 4, seed=0, env_kwargs={"horizon": 6})
    expected = VectorEpisodeCollector(default_env, episodes_per_task=2).collect(
        tasks, actor, seed=5
    )
    default_env.close()
    for batch, reference in zip(batches, expected, strict=True):
        assert batch.lengths.sum() > 0
        for field in ("observations", "actions", "rewards", "step_types", "last_observations"):
            np.testing.assert_array_equal(getattr(batch, field), getattr(reference, field))
