"""Meta-World task envs and the class-balanced task sampler (ML1 for most tests, ML10 once)."""

from __future__ import annotations

import dataclasses
import json
import pickle
from collections import Counter
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from metaworld.types import Task as MetaWorldTask

import metabench  # noqa: F401 - registers the metabench/ ids
from metabench.errors import InvalidActionError, InvalidTaskError, StepBeforeResetError
from metabench.evaluation.results import task_from_json, task_to_json
from metabench.harness.specfiles import SpecError
from metabench.tasks.base import TaskEnv
from metabench.tasks.metaworld.envs import (
    MetaWorldTaskEnv,
    MetaWorldTaskSampler,
    ML1Env,
    ML10Env,
    load_benchmark,
)

pytestmark = [
    pytest.mark.metaworld,
    pytest.mark.filterwarnings("ignore:.*Box observation space:UserWarning"),
]

ML10_TRAIN = [
    "reach-v3",
    "push-v3",
    "pick-place-v3",
    "door-open-v3",
    "drawer-close-v3",
    "button-press-topdown-v3",
    "peg-insert-side-v3",
    "window-open-v3",
    "sweep-v3",
    "basketball-v3",
]
ML10_TEST = ["drawer-open-v3", "door-close-v3", "shelf-place-v3", "sweep-into-v3", "lever-pull-v3"]


@pytest.fixture(scope="module")
def ml10() -> ML10Env:
    """The ML10 train env; builds (and caches) the ML10 benchmark once, ~8 s."""
    env = ML10Env(split="train", seed=0, horizon=20)
    yield env
    env.close()


@pytest.fixture
def reach() -> ML1Env:
    env = ML1Env("reach-v3", horizon=20)
    yield env
    env.close()


def rand_vec(task: MetaWorldTask) -> np.ndarray:
    """The goal (and object) positions stored in a task."""
    return pickle.loads(task.data)["rand_vec"]


def rollout(env: MetaWorldTaskEnv, task: MetaWorldTask, seed: int, steps: int):
    obs, _ = env.reset(seed=seed, options={"task": task})
    actions = np.random.default_rng(seed).uniform(-1, 1, size=(steps, 4)).astype(np.float32)
    observations, rewards = [obs], []
    for action in actions:
        obs, reward, *_ = env.step(action)
        observations.append(obs)
        rewards.append(reward)
    return np.array(observations), np.array(rewards)


# -- Gymnasium conformance -----------------------------------------------------------------------
def test_check_env_ml1(reach: ML1Env) -> None:
    check_env(reach, skip_render_check=True)
    assert isinstance(reach, TaskEnv)
    assert reach.observation_space.shape == (39,) and reach.observation_space.dtype == np.float64
    assert reach.action_space == gym.spaces.Box(-1.0, 1.0, (4,), np.float32)


def test_check_env_ml10(ml10: ML10Env) -> None:
    check_env(ml10, skip_render_check=True)


def test_gymnasium_ids_build_the_split() -> None:
    env = gym.make("metabench/ML1-v0", env_name="reach-v3", split="test", horizon=5)
    assert env.unwrapped.class_names == ["reach-v3"]
    assert env.unwrapped.tasks == list(load_benchmark("ML1", "reach-v3", 0).test_tasks)
    env.close()


def test_env_pickles_to_same_configuration(reach: ML1Env) -> None:
    copy = pickle.loads(pickle.dumps(reach))
    assert type(copy) is ML1Env
    assert (copy.env_name, copy.split, copy.benchmark_seed, copy.horizon) == (
        "reach-v3",
        "train",
        0,
        20,
    )
    assert copy.tasks == reach.tasks


# -- seeds and determinism -----------------------------------------------------------------------
def test_same_benchmark_seed_same_tasks_and_goals() -> None:
    fresh = load_benchmark.__wrapped__("ML1", "reach-v3", 0)  # bypass the per-process cache
    cached = load_benchmark("ML1", "reach-v3", 0)
    assert fresh is not cached
    assert [t.data for t in fresh.train_tasks] == [t.data for t in cached.train_tasks]
    assert [t.data for t in fresh.test_tasks] == [t.data for t in cached.test_tasks]

    other = ML1Env("reach-v3", seed=1)
    env = ML1Env("reach-v3", seed=0)
    assert len(env.tasks) == len(other.tasks) == 50
    assert all(a.data != b.data for a, b in zip(env.tasks, other.tasks, strict=True))
    assert not np.allclose(rand_vec(env.tasks[0]), rand_vec(other.tasks[0]))
    # the goal the running env uses is the task's (reach: the last three floats)
    env.reset(seed=0, options={"task": env.tasks[3]})
    np.testing.assert_array_equal(env.sawyer_env._target_pos, rand_vec(env.tasks[3])[-3:])
    assert len({t.data for t in env.tasks}) == 50


def test_ml1_test_goals_are_next_seeds_train_goals() -> None:
    """A Meta-World quirk: ML1 draws its test goals with ``seed + 1``."""
    test_0 = ML1Env("reach-v3", split="test", seed=0).tasks
    train_1 = ML1Env("reach-v3", split="train", seed=1).tasks
    train_0 = ML1Env("reach-v3", split="train", seed=0).tasks
    assert [t.data for t in test_0] == [t.data for t in train_1]
    assert not {t.data for t in test_0} & {t.data for t in train_0}


def test_reset_seed_is_deterministic(reach: ML1Env) -> None:
    first, info = reach.reset(seed=5)
    task = info["task"]
    second, info = reach.reset(seed=5)
    np.testing.assert_array_equal(first, second)
    assert info["task"] is task  # the Task object itself, no copy

    # a fresh env picks the same task for the same seed, a different one for most seeds
    fresh = ML1Env("reach-v3")
    fresh.reset(seed=5)
    assert fresh.task == task
    picked = set()
    for seed in range(6):
        fresh.close()
        fresh = ML1Env("reach-v3")
        picked.add(fresh.reset(seed=seed)[1]["task"].data)
    assert len(picked) > 1


def test_same_seed_task_actions_give_same_rollout(reach: ML1Env) -> None:
    other = ML1Env("reach-v3", horizon=20)
    task = reach.tasks[7]
    obs_a, rew_a = rollout(reach, task, seed=11, steps=20)
    obs_b, rew_b = rollout(other, task, seed=11, steps=20)
    np.testing.assert_array_equal(obs_a, obs_b)
    np.testing.assert_array_equal(rew_a, rew_b)
    # another goal: same observations at reset for reach (goal hidden) but other rewards
    _, rew_c = rollout(other, reach.tasks[8], seed=11, steps=20)
    assert not np.allclose(rew_a, rew_c)
    np.testing.assert_array_equal(obs_a[:, 36:], 0.0)  # the goal is hidden


def test_no_global_numpy_random(reach: ML1Env) -> None:
    state = np.random.get_state()
    sampler = MetaWorldTaskSampler("ML1", env_name="reach-v3")
    reach.sample_tasks(3)
    sampler.sample(4, np.random.default_rng(0))
    rollout(reach, sampler.tasks[0], seed=0, steps=5)
    after = np.random.get_state()
    assert state[0] == after[0] and np.array_equal(state[1], after[1]) and state[2:] == after[2:]


def test_sample_tasks(reach: ML1Env) -> None:
    tasks = reach.sample_tasks(10, np.random.default_rng(0))
    assert len({t.data for t in tasks}) == 10
    assert all(t in reach.tasks for t in tasks)
    assert tasks == reach.sample_tasks(10, np.random.default_rng(0))
    reach.reset(seed=1)  # picks a task with np_random
    reach.reset(seed=1)
    default = reach.sample_tasks(5)  # from np_random
    reach.reset(seed=1)
    assert reach.sample_tasks(5) == default
    with pytest.raises(ValueError, match="at most 50"):
        reach.sample_tasks(51)
    with pytest.raises(ValueError, match="positive integer"):
        reach.sample_tasks(0)


# -- episodes ------------------------------------------------------------------------------------
def test_truncates_exactly_at_horizon(reach: ML1Env) -> None:
    reach.reset(seed=0)
    for t in range(1, 21):
        _, reward, terminated, truncated, info = reach.step(reach.action_space.sample())
        assert terminated is False
        assert truncated is (t == 20)
        assert isinstance(reward, float)
        assert isinstance(info["success"], (bool, float, np.bool_)) and info["success"] in (0, 1)
    with pytest.raises(StepBeforeResetError):
        reach.step(np.zeros(4))
    reach.reset()
    assert reach.step(np.zeros(4))[3] is False


def test_full_meta_world_horizon_never_oversteps() -> None:
    env = ML1Env("reach-v3")  # horizon 500 = Meta-World's max_path_length
    env.reset(seed=0)
    action = np.zeros(4, np.float32)
    truncations = [env.step(action)[3] for _ in range(500)]
    assert truncations.index(True) == 499
    with pytest.raises(StepBeforeResetError):
        env.step(action)
    env.reset()  # Meta-World's own counter restarts too
    assert env.step(action)[3] is False


def test_step_before_reset_raises() -> None:
    with pytest.raises(StepBeforeResetError):
        ML1Env("reach-v3").step(np.zeros(4))


@pytest.mark.parametrize(
    "action", [np.zeros(3), np.zeros((1, 4)), 0.0, [0.0, np.nan, 0.0, 0.0], [np.inf, 0, 0, 0]]
)
def test_invalid_action_raises(reach: ML1Env, action) -> None:
    reach.reset(seed=0)
    with pytest.raises(InvalidActionError):
        reach.step(action)


# -- tasks of the wrong kind ---------------------------------------------------------------------
def test_wrong_task_kind_raises(reach: ML1Env) -> None:
    good = reach.tasks[0]
    data = pickle.loads(good.data)
    goal_visible = MetaWorldTask("reach-v3", pickle.dumps({**data, "partially_observable": False}))
    push_data = pickle.loads(load_benchmark("ML1", "push-v3", 0).train_tasks[0].data)
    mislabeled = MetaWorldTask("reach-v3", pickle.dumps(push_data))
    for bad in (
        {"velocity": 1.0},
        ("reach-v3", good.data),  # a plain tuple, not a metaworld.Task
        MetaWorldTask("reach-v3", b"not a pickle"),
        MetaWorldTask("push-v3", good.data),  # not a class of this split
        goal_visible,  # an MT task
        mislabeled,
    ):
        with pytest.raises(InvalidTaskError):
            reach.set_task(bad)
        with pytest.raises(InvalidTaskError):
            reach.reset(options={"task": bad})
    with pytest.raises(InvalidTaskError, match=r"use env\.sample_tasks"):
        reach.set_task({"velocity": 1.0})
    reach.set_task(good)
    assert reach.task is good


class _WritesFile:
    """Pickles to a call of ``pathlib.Path.touch``: what a crafted task file could run."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[object, tuple[str]]:
        import pathlib

        return (pathlib.Path.touch, (self.path,))


def test_task_data_from_a_file_runs_no_code(tmp_path: Path) -> None:
    """A run's config.json holds its test tasks as Meta-World's pickled data: a crafted one is
    refused before anything in it runs, while every real task of the split still loads."""
    reach = ML1Env(env_name="reach-v3", seed=0)
    good = reach.sample_tasks(1)[0]
    marker = tmp_path / "ran"
    data = pickle.loads(good.data)
    crafted = [
        {**data, "rand_vec": _WritesFile(str(marker))},
        {**data, "env_cls": _WritesFile(str(marker))},
        _WritesFile(str(marker)),
    ]
    for payload in crafted:
        recorded = task_to_json(MetaWorldTask("reach-v3", pickle.dumps(payload)))
        task = task_from_json(json.loads(json.dumps(recorded)))
        with pytest.raises(InvalidTaskError, match=r"refused pathlib"):
            reach.set_task(task)
        with pytest.raises(InvalidTaskError, match=r"refused pathlib"):
            reach.reset(options={"task": task})
    assert not marker.exists()
    # A real task survives the same round trip, and each of the split's tasks is accepted.
    reach.set_task(task_from_json(json.loads(json.dumps(task_to_json(good)))))
    for task in reach.tasks:
        reach.set_task(task)


def test_task_from_another_split_raises(ml10: ML10Env) -> None:
    test_task = load_benchmark("ML10", None, 0).test_tasks[0]
    assert test_task.env_name in ML10_TEST
    with pytest.raises(InvalidTaskError, match=r"not in ML10 train .*reach-v3"):
        ml10.set_task(test_task)
    with pytest.raises(InvalidTaskError):
        ml10.reset(options={"task": test_task})


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"benchmark": "ML20"}, "ML1, ML10, ML45"),
        ({"benchmark": "ML1", "env_name": "reach"}, "did you mean 'reach-v3'"),
        ({"benchmark": "ML1", "env_name": "no-such-env"}, "ENV_NAMES"),
        ({"benchmark": "ML1"}, "needs env_name"),
        ({"benchmark": "ML10", "env_name": "reach-v3"}, "only for ML1"),
        ({"benchmark": "ML1", "env_name": "reach-v3", "split": "val"}, "'train' or 'test'"),
        ({"benchmark": "ML1", "env_name": "reach-v3", "horizon": 501}, r"\[1, 500\]"),
        ({"benchmark": "ML1", "env_name": "reach-v3", "horizon": 0}, r"\[1, 500\]"),
        ({"benchmark": "ML1", "env_name": "reach-v3", "seed": -1}, "seed must be"),
        ({"benchmark": "ML1", "env_name": "reach-v3", "reward_function_version": "v3"}, "'v2'"),
    ],
)
def test_bad_configuration_raises_helpfully(kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        MetaWorldTaskEnv(**kwargs)


# -- ML10: class switching and observation space -------------------------------------------------
def test_ml10_splits(ml10: ML10Env) -> None:
    assert ml10.class_names == ML10_TRAIN
    assert len(ml10.tasks) == 500
    test_env = ML10Env(split="test")
    assert test_env.class_names == ML10_TEST
    assert {t.env_name for t in test_env.tasks} == set(ML10_TEST)


def test_setting_task_of_another_class_switches_model(ml10: ML10Env) -> None:
    by_class = {name: [t for t in ml10.tasks if t.env_name == name] for name in ML10_TRAIN}
    seen = {}
    for name in ML10_TRAIN:
        ml10.set_task(by_class[name][0])
        obs, info = ml10.reset(seed=0)
        assert info["task"].env_name == name
        sawyer = ml10.sawyer_env
        seen[name] = sawyer
        assert type(sawyer) is ml10.classes[name]
        assert obs in ml10.observation_space
        for _ in range(5):
            obs, *_ = ml10.step(ml10.action_space.sample())
            assert obs in ml10.observation_space
    assert len({type(env).__name__ for env in seen.values()}) == 10
    # switching back reuses the instance of that class, and the model really changed:
    # reach's object is pushed far away while push's puck sits on the table near the hand
    ml10.reset(options={"task": by_class["reach-v3"][0]})
    assert ml10.sawyer_env is seen["reach-v3"]
    reach_obs = ml10.reset(seed=0)[0]
    push_obs = ml10.reset(seed=0, options={"task": by_class["push-v3"][0]})[0]
    assert ml10.sawyer_env is seen["push-v3"]
    assert not np.allclose(reach_obs[4:18], push_obs[4:18])


# -- the sampler ---------------------------------------------------------------------------------
def test_ml10_sampler_balances_classes(ml10: ML10Env) -> None:
    sampler = MetaWorldTaskSampler("ML10")
    rng = np.random.default_rng(0)
    ten = sampler.sample(10, rng)
    assert Counter(t.env_name for t in ten) == dict.fromkeys(ML10_TRAIN, 1)
    twenty = sampler.sample(20, rng)
    assert Counter(t.env_name for t in twenty) == dict.fromkeys(ML10_TRAIN, 2)
    assert len({t.data for t in twenty}) == 20
    everything = sampler.sample(500, rng)
    assert {t.data for t in everything} == {t.data for t in ml10.tasks}
    assert all(t in ml10.tasks for t in ten)  # the env accepts every sampled task
    assert ml10.reset(options={"task": twenty[-1]})[1]["task"] is twenty[-1]


def test_ml10_sampler_rejects_impossible_batch_sizes() -> None:
    sampler = MetaWorldTaskSampler("ML10")
    for n in (15, 510, 5):
        with pytest.raises(
            ValueError, match=r"multiples of 10 up to 500 \(10, 20, 30, \.\.\., 500\)"
        ):
            sampler.check_batch_size(n)
        with pytest.raises(ValueError, match="valid sizes"):
            sampler.sample(n, np.random.default_rng(0))
    sampler.check_batch_size(500)
    replacing = MetaWorldTaskSampler("ML10", replace=True)
    assert (
        Counter(t.env_name for t in replacing.sample(1000, np.random.default_rng(0)))["push-v3"]
        == 100
    )
    with pytest.raises(ValueError, match=r"multiples of 10 \(10, 20, 30, \.\.\.\)"):
        replacing.check_batch_size(15)
    test_sampler = MetaWorldTaskSampler("ML10", split="test")
    with pytest.raises(ValueError, match=r"multiples of 5 up to 250"):
        test_sampler.check_batch_size(7)
    assert Counter(t.env_name for t in test_sampler.sample(5, np.random.default_rng(0))) == (
        dict.fromkeys(ML10_TEST, 1)
    )


def test_unbalanced_and_ml1_samplers() -> None:
    flat = MetaWorldTaskSampler("ML10", balanced=False)
    tasks = flat.sample(7, np.random.default_rng(0))
    assert len({t.data for t in tasks}) == 7
    with pytest.raises(ValueError, match="at most 500"):
        flat.check_batch_size(501)
    ml1 = MetaWorldTaskSampler("ML1", env_name="reach-v3")
    assert len({t.data for t in ml1.sample(50, np.random.default_rng(0))}) == 50
    with pytest.raises(ValueError, match="valid sizes are 1 to 50"):
        ml1.check_batch_size(51)
    with pytest.raises(ValueError, match="only for ML1"):
        MetaWorldTaskSampler("ML10", env_name="reach-v3")


def test_sampler_is_deterministic_and_picklable() -> None:
    sampler = MetaWorldTaskSampler("ML10")
    a = sampler.sample(20, np.random.default_rng(42))
    b = sampler.sample(20, np.random.default_rng(42))
    c = sampler.sample(20, np.random.default_rng(43))
    assert a == b and a != c
    copy = pickle.loads(pickle.dumps(sampler))
    assert copy.sample(20, np.random.default_rng(42)) == a


def test_goals_per_class_keeps_the_first_goals_of_each_class_in_meta_worlds_order(
    ml10: ML10Env,
) -> None:
    """``goals_per_class`` is ``total_tasks_per_cls`` of Meta-World's ``make_vec``: the first
    goals of each class, as Meta-World's own meta-test env holds them."""
    bench = load_benchmark("ML10", None, 0)
    first_40 = [
        task
        for name in ML10_TEST
        for task in [t for t in bench.test_tasks if t.env_name == name][:40]
    ]
    sampler = MetaWorldTaskSampler("ML10", split="test", goals_per_class=40)
    assert sampler.tasks == first_40 and len(first_40) == 200
    assert Counter(t.env_name for t in sampler.sample(200, np.random.default_rng(0))) == (
        dict.fromkeys(ML10_TEST, 40)
    )
    with pytest.raises(ValueError, match=r"goals_per_class=51 is more than the 50 goals per class"):
        MetaWorldTaskSampler("ML10", split="test", goals_per_class=51)


def test_the_ml_benchmarks_meta_test_on_meta_world_plus_goals(ml10: ML10Env) -> None:
    """``test_tasks = "all"``: every test goal Meta-World+'s ``metalearning_evaluation`` runs
    (ML10: the first 40 of each test class; ML1: all 50), in Meta-World's order, whatever the
    test-task stream; the meta-tests during training take a class-balanced subset of them."""
    from metabench.harness.benchmarks import first_of_each_class, get_benchmark

    ml10_spec = get_benchmark("ML10")
    tasks = ml10_spec.test_tasks(0)
    assert tasks == MetaWorldTaskSampler("ML10", split="test", goals_per_class=40).tasks
    assert Counter(t.env_name for t in tasks) == dict.fromkeys(ML10_TEST, 40)
    assert len({t.data for t in tasks}) == 200
    reach = get_benchmark("ML1-reach")
    bench = load_benchmark("ML1", "reach-v3", 4)
    assert [t.data for t in reach.test_tasks(4)] == [t.data for t in bench.test_tasks]

    periodic = ml10_spec.periodic_test_indices(0, tasks)
    assert periodic is not None and periodic == sorted(periodic) and len(set(periodic)) == 20
    assert Counter(tasks[i].env_name for i in periodic) == dict.fromkeys(ML10_TEST, 4)
    assert ml10_spec.periodic_test_indices(0, tasks) == periodic  # fixed per seed
    assert ml10_spec.periodic_test_indices(1, tasks) != periodic
    with pytest.raises(SpecError, match=r"ML10.toml:\d+: .* use a multiple of 5 up to 200$"):
        dataclasses.replace(ml10_spec, n_periodic_test_tasks=7).periodic_test_indices(0, tasks)

    # metabench evaluate --test-tasks 20: the first 4 of each class, not 20 drawer-open goals
    seen: Counter[str] = Counter()
    first_4 = []
    for task in tasks:
        if seen[task.env_name] < 4:
            first_4.append(task)
        seen[task.env_name] += 1
    assert first_of_each_class(tasks, 20) == first_4
    assert Counter(t.env_name for t in first_4) == dict.fromkeys(ML10_TEST, 4)
    with pytest.raises(ValueError, match=r"ask for a multiple of 5 up to 200$"):
        first_of_each_class(tasks, 7)


def goals(tasks: list[MetaWorldTask]) -> list[tuple[float, ...]]:
    """The goal position of each reach-v3 task, decoded from its data (the last three floats of
    its ``rand_vec``)."""
    return [tuple(rand_vec(task)[-3:].tolist()) for task in tasks]


@pytest.mark.parametrize("seed", [0, 3])
def test_ml1_training_tasks_are_the_train_goals_and_test_tasks_the_test_goals(seed: int) -> None:
    """Meta-World 3.x registers ``Meta-World/ML1-train`` with a lambda that captures its split
    by reference, so ML1 training envs made with ``gym.make_vec`` quietly get the test goals
    (Farama-Foundation/Metaworld PR #573). metabench builds its own split envs; this checks
    against a fresh ``metaworld.ML1`` (not metabench's cached one) that its training tasks are
    exactly the train goals, none of them a test goal, and its test tasks the test goals."""
    import metaworld

    from metabench.harness.benchmarks import get_benchmark

    bench = metaworld.ML1("reach-v3", seed=seed)
    train, test = goals(bench.train_tasks), goals(bench.test_tasks)
    assert len(set(train)) == len(set(test)) == 50 and not set(train) & set(test)

    spec = get_benchmark("ML1-reach")
    sampler = spec.train_sampler(seed)
    assert sampler is not None and goals(sampler.tasks) == train
    assert set(goals(sampler.sample(50, np.random.default_rng(seed)))) == set(train)
    env = gym.make("metabench/ML1-v0", env_name="reach-v3", split="train", seed=seed)
    assert goals(env.unwrapped.tasks) == train
    # the env meta-training runs on: the goal of every task it draws is a train goal
    training = gym.make(spec.env_id, **spec.train_env_kwargs(seed)).unwrapped
    for reset_seed in range(5):
        training.reset(seed=reset_seed)
        assert tuple(training.sawyer_env._target_pos.tolist()) in set(train)
    assert goals(spec.test_tasks(seed)) == test
    assert goals(spec.make_test_env(seed).tasks) == test
    env.close()
    training.close()


def test_the_envs_metabench_makes_for_itself_skip_gymnasiums_checker_whose_warning_is_noise():
    """Meta-World's ML observation holds the goal zeroed, with equal bounds, and Gymnasium's
    passive checker warns about that whenever ``gymnasium.make`` builds the env. metabench's own
    envs drop Gymnasium's wrappers (``.unwrapped``), so their checker would check nothing and only
    repeat the warning in every run's log; a user's ``gymnasium.make`` still checks."""
    import warnings

    from metabench.harness.benchmarks import get_benchmark

    spec = get_benchmark("ML1-reach")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        envs = [spec.make_test_env(0), spec.make_train_env(0)]
    assert all(env is env.unwrapped for env in envs)
    with pytest.warns(UserWarning, match="maximum and minimum values are equal"):
        gym.make(spec.env_id, **spec.train_env_kwargs(0))
