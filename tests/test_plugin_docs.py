"""What ``docs/own-algorithm.md`` tells plug-in authors, checked through the example plug-in
(``examples/my_algorithm``): the members of the ``spec`` it is built on, the task env's
``reset``, the observation layouts, the episodes its ``adapt_policy`` receives in the meta-test,
and where ``check_benchmark`` goes. The tests read the page's tables, so the page cannot say one
thing while the code does another; each value is recomputed here from what it describes (MuJoCo's
joints, the point's moves), not from the code that produces it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from metabench.algos.base import MetaRLAlgorithm, Policy
from metabench.algos.benchmark import Benchmark
from metabench.algos.run_envs import RunEnvs
from metabench.cli import main
from metabench.data import EpisodeBatch, StepType
from metabench.harness.algorithms import clear_spec_caches, get_algorithm
from metabench.harness.benchmarks import BenchmarkSpec
from metabench.harness.run import benchmark_for, make_evaluator
from metabench.tasks.base import TaskEnv, TaskSampler
from metabench.wrappers import RL2Env
from tests.factories import ROOT
from tests.harness.test_plugins import EXAMPLE, EXAMPLE_SPEC, one_error_line

PAGE = (ROOT / "docs" / "own-algorithm.md").read_text(encoding="utf-8")


def section(title: str) -> str:
    """The text of the page's ``### title`` section, up to the next heading."""
    parts = PAGE.split(f"\n### {title}\n", 1)
    assert len(parts) == 2, f"docs/own-algorithm.md has no section '### {title}'"
    return parts[1].split("\n#", 1)[0]


def table(text: str) -> list[list[str]]:
    """The body rows of the first Markdown table in ``text``, as lists of stripped cells."""
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    assert len(rows) >= 3 and set(rows[1]) <= set("|- "), rows[:2]
    return [[cell.strip() for cell in row.strip("| ").split(" | ")] for row in rows[2:]]


def python_block(text: str) -> str:
    """The first ```python block of ``text``."""
    match = re.search(r"^```python\n(.*?)^```$", text, re.MULTILINE | re.DOTALL)
    assert match is not None
    return match[1]


Build = Callable[..., tuple[BenchmarkSpec, Any]]
UserSpecs = Callable[[str, str], Path]
"""The ``user_specs`` fixture of ``tests/conftest.py``: writes a file into the spec folder."""


@pytest.fixture
def example(user_specs: UserSpecs, monkeypatch: pytest.MonkeyPatch) -> Build:
    """Builds the example on a benchmark as ``metabench train`` does (its spec file in a
    ``METABENCH_SPECS`` folder); returns ``(spec, algorithm)``."""
    user_specs("baselines/random-search.toml", EXAMPLE_SPEC.read_text())
    monkeypatch.syspath_prepend(str(EXAMPLE))

    def build(benchmark: str, seed: int = 0) -> tuple[BenchmarkSpec, Any]:
        entry = get_algorithm("random-search")
        spec = benchmark_for(benchmark, "random-search")
        return spec, entry.build(RunEnvs(spec, seed), entry.hyperparameters(spec, {}), None)

    return build


# -- the benchmark: spec ---------------------------------------------------------------------------
TYPES: dict[str, Callable[[Any], bool]] = {
    "`str`": lambda value: isinstance(value, str),
    "`int`": lambda value: type(value) is int,
    "`bool`": lambda value: type(value) is bool,
    "`str` or `None`": lambda value: value is None or isinstance(value, str),
    "`dict[str, Any]`": lambda value: (
        isinstance(value, dict) and all(isinstance(key, str) for key in value)
    ),
    "`TaskSampler` or `None`": lambda value: value is None or isinstance(value, TaskSampler),
    "task env": lambda value: isinstance(value, gym.Env) and isinstance(value, TaskEnv),
}
"""What each type the page's ``spec`` table names means, as a check of a value."""


def check_documented_members(spec: Any, seed: int) -> dict[str, Any]:
    """Assert that the page's ``spec`` table lists exactly the :class:`Benchmark` protocol's
    members and that ``spec`` has each with the documented type; return their values."""
    values = {}
    for member, documented, _ in table(section("The benchmark: `envs.benchmark`")):
        match = re.fullmatch(r"`(\w+)(\(seed\))?`", member)
        assert match is not None, member
        name, is_method = match[1], bool(match[2])
        value = getattr(spec, name)(seed) if is_method else getattr(spec, name)
        assert documented in TYPES, f"the page names a type the test does not know: {documented}"
        assert TYPES[documented](value), f"spec.{member} is {value!r}, not {documented}"
        values[name] = value
    assert set(values) == {name for name in vars(Benchmark) if not name.startswith("_")}
    return values


def test_the_spec_the_example_is_built_on_has_the_documented_members(
    user_specs, short_point_goal, tmp_path, monkeypatch
):
    """Captured as ``metabench train`` hands it to the example's ``from_benchmark``, with an
    ``env.*`` setting of the algorithm's spec file."""
    user_specs(
        "baselines/random-search.toml",
        EXAMPLE_SPEC.read_text()
        + f'\n[benchmarks.{short_point_goal}]\nsource = "a test"\nenv.max_step = 0.05\n',
    )
    monkeypatch.syspath_prepend(str(EXAMPLE))
    from my_algorithm import RandomSearch

    received: list[tuple[Any, Any]] = []
    build = RandomSearch.from_benchmark.__func__

    def recording(cls: type[RandomSearch], envs: Any, config: Any, **kwargs: Any) -> Any:
        algo = build(cls, envs, config, **kwargs)
        received.append((envs, algo))
        return algo

    monkeypatch.setattr(RandomSearch, "from_benchmark", classmethod(recording))
    args = ["train", "--benchmark", short_point_goal, "--algorithm", "random-search",
            "--steps", "400", "--seed", "3", "--out", str(tmp_path / "run")]  # fmt: skip
    assert main(args) == 0
    (envs, algo), *_ = received
    assert isinstance(envs, RunEnvs) and (envs.seed, envs.processes) == (3, None)  # no --cpus
    spec = envs.benchmark
    assert isinstance(spec, BenchmarkSpec)  # which holds more than the protocol's members
    assert (spec.test_episodes, spec.reports_success, len(spec.test_tasks(3))) == (1, True, 20)
    values = check_documented_members(spec, seed=3)
    assert values["name"] == short_point_goal
    assert values["path"] == str(tmp_path / "specs" / "envs" / f"{short_point_goal}.toml")
    assert values["env_id"] in gym.registry
    assert (values["episodes_per_trial"], values["exploration_episodes"]) == (2, 1)
    assert not values["steps_in_workers"] and values["train_sampler"] is None
    # [tasks], horizon and the algorithm's env.* setting, as the example builds its env with them
    kwargs = values["train_env_kwargs"]
    assert kwargs == {"goal_range": [-0.5, 0.5], "horizon": 20, "max_step": 0.05}
    assert (algo.env.horizon, algo.env.action_space.high.tolist()) == (20, [0.05, 0.05])
    assert values["make_test_env"].max_step == 0.05


@pytest.mark.metaworld
def test_a_metaworld_spec_has_the_documented_members(example):
    spec, _ = example("ML1-reach")
    values = check_documented_members(spec, seed=0)
    assert values["steps_in_workers"] is True and values["batched_vector_env"] is False
    assert values["train_sampler"] is not None and values["train_env_kwargs"]["seed"] == 0


# -- tasks and reset -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name", ["PointGoal", pytest.param("HalfCheetahVel", marks=pytest.mark.mujoco)]
)
def test_an_unseeded_reset_keeps_the_task_of_the_example_env(example, name):
    _, algo = example(name)
    env = algo.env  # the task env the example trains on
    assert env.task is None
    _, info = env.reset()  # none yet: drawn
    assert info["task"] == env.task is not None
    _, info = env.reset(seed=1)  # drawn by the env: drawn again
    drawn = info["task"]
    policy = algo.get_exploration_policy()
    for _ in range(3):  # whole episodes, then unseeded resets
        obs, done = env.reset()[0], False
        assert env.task == drawn
        while not done:
            obs, _, terminated, truncated, _ = env.step(policy.get_action(obs))
            done = terminated or truncated
    assert env.reset(seed=1)[1]["task"] == drawn
    assert env.reset(seed=2)[1]["task"] != drawn
    given, other = env.sample_tasks(2, np.random.default_rng(5))
    env.set_task(given)
    assert [env.reset(seed=s)[1]["task"] for s in (3, None, 4)] == [given] * 3
    assert env.reset(options={"task": other})[1]["task"] == other
    assert [env.reset(seed=s)[1]["task"] for s in (None, 5)] == [other] * 2


# -- what the policies observe ---------------------------------------------------------------------
def documented_spaces(benchmark: str) -> tuple[tuple[int, ...], gym.spaces.Space[Any]]:
    """The observation shape and action space the page's table gives ``benchmark``."""
    (row,) = [
        row
        for row in table(section("What the policies observe"))
        if benchmark in row[0].split(", ")
    ]
    shape = tuple(int(n) for n in re.match(r"`\(([\d, ]+),\)`", row[1])[1].split(","))  # type: ignore[index]
    action = re.match(r"`(Box|Discrete)\(([^`]*)\)`", row[2])
    assert action is not None, row[2]
    arguments = eval(f"({action[2]},)")  # the page's own numbers
    space = (
        gym.spaces.Discrete(*arguments)
        if action[1] == "Discrete"
        else gym.spaces.Box(*arguments, dtype=np.float64)
    )
    return shape, space


def test_the_observation_table_covers_every_shipped_benchmark() -> None:
    documented = {
        name for row in table(section("What the policies observe")) for name in row[0].split(", ")
    }
    shipped = {path.stem for path in (ROOT / "envs").glob("*.toml")}
    missing = sorted(shipped - documented)
    assert not missing, f"docs/own-algorithm.md's observation table lacks {missing}: add a row"


def same_space(space: gym.spaces.Space[Any], documented: gym.spaces.Space[Any]) -> bool:
    """Whether ``space`` is the documented one (bounds to the precision of its dtype)."""
    if isinstance(documented, gym.spaces.Discrete):
        return space == documented
    assert isinstance(space, gym.spaces.Box) and isinstance(documented, gym.spaces.Box)
    return (
        space.shape == documented.shape
        and np.allclose(space.low, documented.low, rtol=1e-7, atol=0)
        and np.allclose(space.high, documented.high, rtol=1e-7, atol=0)
    )


@pytest.mark.parametrize(
    "name",
    ["PointGoal", "Bandit", pytest.param("HalfCheetahVel", marks=pytest.mark.mujoco),
     pytest.param("HalfCheetahDir", marks=pytest.mark.mujoco),
     pytest.param("ML1-reach", marks=pytest.mark.metaworld)],
)  # fmt: skip
def test_each_benchmark_observes_and_acts_as_the_page_says(example, name):
    shape, action_space = documented_spaces(name)
    if name == "Bandit":  # the example refuses a Discrete action space
        spec = benchmark_for(name, "random-search")
        env = spec.make_test_env(0)
    else:
        _, algo = example(name)
        env = algo.env
    obs, _ = env.reset(seed=0)
    assert env.observation_space.shape == obs.shape == shape
    assert same_space(env.action_space, action_space)
    if name.startswith("ML"):
        return  # a Meta-World task also places the objects, which are observed
    # the task is hidden: two tasks, the same seed and actions, the same observations
    tasks = env.sample_tasks(10, np.random.default_rng(1))
    first, second = tasks[0], next(task for task in tasks if task != tasks[0])
    env.action_space.seed(3)
    actions = [env.action_space.sample() for _ in range(5)]
    seen = []
    for task in (first, second):
        observations = [env.reset(seed=2, options={"task": task})[0]]
        for action in actions[: env.horizon]:
            observations.append(env.step(action)[0])
        seen.append(observations)
    np.testing.assert_array_equal(seen[0], seen[1])


LAYOUT = re.compile(r"`obs\[(\d+):(\d+)\]` \| (positions|velocities) of `([\w ]+)`")


@pytest.mark.mujoco
def test_halfcheetah_observations_are_the_joints_the_page_names(example):
    """Every slice of the page's HalfCheetah table, from MuJoCo's named joints and torso, on the
    example's env and policy; and HalfCheetahVel's reward from the forward position MuJoCo moved."""
    text = section("What the policies observe").split("HalfCheetah, from MuJoCo", 1)[1]
    joints = LAYOUT.findall(text)
    assert [kind for *_, kind, _ in joints] == ["positions", "velocities"]
    torso = re.search(r"`obs\[(\d+):(\d+)\]` \| the torso's position x, y, z", text)
    assert torso is not None
    spans = sorted([(int(a), int(b)) for a, b, *_ in joints] + [(int(torso[1]), int(torso[2]))])
    assert [a for a, _ in spans] == [0, *(b for _, b in spans[:-1])] and spans[-1][1] == 20
    _, algo = example("HalfCheetahVel")
    env, policy = algo.env, algo.get_exploration_policy()
    obs, info = env.reset(seed=4)
    velocity = info["task"]["velocity"]
    data = env.data
    for _ in range(30):
        action = policy.get_action(obs)
        x_before = float(data.joint("rootx").qpos[0])
        obs, reward, *_ = env.step(action)
        for start, stop, kind, names in joints:
            field = "qpos" if kind == "positions" else "qvel"
            expected = [getattr(data.joint(name), field)[0] for name in names.split()]
            np.testing.assert_array_equal(obs[int(start) : int(stop)], expected)
        np.testing.assert_array_equal(obs[int(torso[1]) : int(torso[2])], data.body("torso").xpos)
        v = (float(data.joint("rootx").qpos[0]) - x_before) / env.dt
        assert env.dt == 0.05
        action = np.asarray(action, dtype=np.float64)
        assert reward == pytest.approx(-abs(v - velocity) - 0.05 * float(action @ action), abs=1e-9)


@pytest.mark.metaworld
def test_metaworld_observations_repeat_the_last_frame_and_hide_the_goal(example):
    _, algo = example("ML1-reach")
    env, policy = algo.env, algo.get_exploration_policy()
    obs, _ = env.reset(seed=0)
    for _ in range(5):
        previous = obs
        obs, *_ = env.step(policy.get_action(obs))
        np.testing.assert_array_equal(obs[18:36], previous[0:18])
        assert not obs[36:39].any()


# -- what adapt_policy receives --------------------------------------------------------------------
def adapted_batches(
    spec: BenchmarkSpec, algo: MetaRLAlgorithm, n_tasks: int
) -> tuple[list[EpisodeBatch], Any]:
    """The batches ``algo.adapt_policy`` receives in its run's meta-test of the first
    ``n_tasks`` test tasks (``make_evaluator``, as ``train`` and ``evaluate`` run it), and the
    result."""
    batches: list[EpisodeBatch] = []
    adapt = algo.adapt_policy

    def recording(policy: Policy, episodes: EpisodeBatch) -> Policy:
        batches.append(episodes)
        return adapt(policy, episodes)

    algo.adapt_policy = recording  # type: ignore[assignment]
    evaluator = make_evaluator(spec, 0, test_tasks=spec.test_tasks(0)[:n_tasks])
    return batches, evaluator.evaluate(algo)


def check_steps(batch: EpisodeBatch, horizon: int) -> None:
    """Each episode: FIRST, MID, ..., TIMEOUT, ``horizon`` steps."""
    assert batch.lengths.tolist() == [horizon] * batch.n_episodes
    episode = [StepType.FIRST, *[StepType.MID] * (horizon - 2), StepType.TIMEOUT]
    assert batch.step_types.tolist() == episode * batch.n_episodes


def test_the_example_adapts_to_the_documented_episodes_on_point_goal(example):
    spec, algo = example("PointGoal")
    batches, result = adapted_batches(spec, algo, n_tasks=2)
    assert len(batches) == 2
    for batch, task in zip(batches, result.tasks, strict=True):
        n, horizon = spec.exploration_episodes, 100
        assert isinstance(batch, EpisodeBatch) and batch.n_episodes == n == 20
        check_steps(batch, horizon)
        assert batch.observations.shape == (n * horizon, 2)
        assert batch.last_observations.shape == (n, 2)
        # the actions the example's linear policy takes in those observations
        policy = algo.get_exploration_policy()
        np.testing.assert_array_equal(
            batch.actions, [policy.get_action(o) for o in batch.observations]
        )
        # each episode starts at (0, 0) and moves by the clipped actions
        moves = np.clip(batch.actions, -0.1, 0.1)
        for episode, start in zip(batch.split(), np.cumsum([0, *batch.lengths[:-1]]), strict=True):
            np.testing.assert_array_equal(episode.observations[0], [0.0, 0.0])
            positions = np.cumsum(moves[start : start + horizon], axis=0)
            np.testing.assert_allclose(episode.observations[1:], positions[:-1], atol=1e-12)
            np.testing.assert_allclose(episode.last_observations[0], positions[-1], atol=1e-12)
        # unscaled rewards: minus the distance to the hidden goal after each move
        distance = np.linalg.norm(batch.next_observations - np.asarray(task.task["goal"]), axis=1)
        np.testing.assert_allclose(batch.rewards, -distance, atol=1e-12)
        assert batch.episode_returns().tolist() == pytest.approx(task.episode_returns[:n])
        # only success, of all of the env's info (which holds "distance" too)
        assert set(batch.env_infos) == {"success"}
        np.testing.assert_array_equal(batch.env_infos["success"], distance < 0.1)
        assert batch.agent_infos == {} and batch.episode_infos == {}


@pytest.mark.mujoco
def test_the_example_adapts_to_episodes_without_env_infos_on_halfcheetah(example):
    spec, algo = example("HalfCheetahVel")
    (batch,), result = adapted_batches(spec, algo, n_tasks=1)
    n = spec.exploration_episodes
    assert batch.n_episodes == n == 10
    check_steps(batch, 100)
    assert batch.observations.shape == (n * 100, 20) and batch.actions.shape == (n * 100, 6)
    assert batch.env_infos == {} and batch.agent_infos == {} and batch.episode_infos == {}
    assert batch.episode_returns().tolist() == pytest.approx(result.tasks[0].episode_returns[:n])


RL2_SHAPES = re.compile(r"`\((\d+),\)` on ([\w-]+)(?: and ([\w-]+))?")


@pytest.mark.parametrize(
    "name",
    ["PointGoal", "Bandit", pytest.param("HalfCheetahVel", marks=pytest.mark.mujoco),
     pytest.param("ML1-reach", marks=pytest.mark.metaworld)],
)  # fmt: skip
def test_rl2env_widens_each_observation_as_the_page_says(name):
    """The page's ``(k,) on <benchmarks>`` for ``RL2Env``: the task env's observation, one
    number per action dimension (one per arm for a ``Discrete`` one), reward and done."""
    text = section("What the policies observe").split("`wrap_env` returning", 1)[1]
    shapes = {
        family: int(size)
        for size, *families in RL2_SHAPES.findall(text.split(". ", 1)[0].replace("\n", " "))
        for family in families
        if family
    }
    family = next(
        family for family in shapes if name.startswith(family.replace("Meta-World", "ML"))
    )
    env = benchmark_for(name, "nop").make_test_env(0)
    action = env.action_space
    width = action.n if isinstance(action, gym.spaces.Discrete) else action.shape[0]
    assert shapes[family] == env.observation_space.shape[0] + width + 2
    assert RL2Env(env).observation_space.shape == (shapes[family],)
    obs, _ = RL2Env(env).reset(seed=0)
    assert obs.shape == (shapes[family],) and not obs[-width - 2 :].any()


class FirstColumns(Policy):
    """A policy acting on the first ``n`` numbers of each observation."""

    def __init__(self, policy: Policy, n: int) -> None:
        self.policy, self.n = policy, n

    def get_action(self, observation: np.ndarray) -> np.ndarray:
        return self.policy.get_action(observation[: self.n])


def test_through_rl2env_the_episodes_hold_the_previous_action_reward_and_done(example):
    """The example seen through ``RL2Env``: the page's appended parts, from the batch's own
    actions and rewards."""
    spec, algo = example("PointGoal")

    class WithRL2(type(algo)):  # type: ignore[misc]
        def wrap_env(self, env: gym.Env[Any, Any]) -> gym.Env[Any, Any]:
            return RL2Env(env)

        def get_exploration_policy(self) -> Policy:
            return FirstColumns(super().get_exploration_policy(), 2)

    rl2 = WithRL2(algo.env, algo.config, seed=0)
    (batch,), _ = adapted_batches(spec, rl2, n_tasks=1)
    n, horizon = spec.exploration_episodes, 100
    assert batch.observations.shape == (n * horizon, 2 + 2 + 2)  # "(6,) on PointGoal"
    previous = batch.observations[:, 2:]
    first = np.arange(n) * horizon
    later = np.setdiff1d(np.arange(n * horizon), [0])
    np.testing.assert_array_equal(previous[0], np.zeros(4))  # the trial's first observation
    np.testing.assert_array_equal(previous[later, 0:2], batch.actions[later - 1])
    np.testing.assert_array_equal(previous[later, 2], batch.rewards[later - 1])
    np.testing.assert_array_equal(previous[later, 3], np.isin(later, first).astype(float))
    # an episode's last observation is the next one's first
    np.testing.assert_array_equal(batch.last_observations[:-1], batch.observations[first[1:]])


# -- where check_benchmark goes --------------------------------------------------------------------
@pytest.fixture
def documented_check(
    user_specs: UserSpecs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    """The page's ``check_benchmark`` block as the module of a plug-in ``mine`` (the example's
    spec file naming it, with a profile that sets ``steps_per_candidate = 50``), beside the
    example itself; yields the module's file."""
    code = python_block(section("Where `check_benchmark` goes"))
    module = tmp_path / "code" / f"documented_check_{tmp_path.name}.py"
    module.parent.mkdir()
    module.write_text(code)
    monkeypatch.syspath_prepend(str(EXAMPLE))
    monkeypatch.syspath_prepend(str(module.parent))
    user_specs("baselines/random-search.toml", EXAMPLE_SPEC.read_text())
    spec = EXAMPLE_SPEC.read_text().replace("my_algorithm:", f"{module.stem}:")
    profile = "steps = 200_000\nset = { steps_per_candidate = 50 }"
    user_specs("baselines/mine.toml", spec.replace("steps = 200_000", profile))
    clear_spec_caches()
    yield module
    clear_spec_caches()


REFUSAL = (
    "random-search on PointGoal: steps_per_candidate=50 scores each candidate on part of one "
    "100-step episode: set it to at least 100 (--set steps_per_candidate=100)"
)
"""The one line the documented check's refusal on PointGoal ends in: its message, as it is."""


def test_the_documented_check_benchmark_stops_train_before_anything_is_written(
    documented_check, tmp_path, capsys
):
    out = tmp_path / "run"
    args = ["train", "--benchmark", "PointGoal", "--algorithm", "mine", "--steps", "400",
            "--out", str(out), "--set", "steps_per_candidate=50"]  # fmt: skip
    assert one_error_line(capsys, args) == REFUSAL
    assert not out.exists()
    # it sees the resolved config: the spec file's defaults pass, as the boundary does
    entry, spec = get_algorithm("mine"), benchmark_for("PointGoal", "mine")
    assert entry.hyperparameters(spec, {})["steps_per_candidate"] == 200
    assert entry.hyperparameters(spec, {"steps_per_candidate": 100})["steps_per_candidate"] == 100


def test_the_documented_check_benchmark_stops_a_grid_before_its_first_cell(
    documented_check, tmp_path, capsys
):
    """The profile sets the value the check refuses; the example's cells, first in the grid,
    do not run."""
    results = tmp_path / "results"
    args = ["bench", "--benchmarks", "PointGoal", "--algorithms", "random-search", "mine",
            "--profile", "quick", "--results", str(results)]  # fmt: skip
    assert one_error_line(capsys, args) == REFUSAL
    assert not (results / "PointGoal").exists()
