"""Benchmarks (``envs/*.toml``): which task env, which tasks to train and test on, which protocol.

A benchmark fixes everything a result depends on besides the algorithm: the task env and its
horizon, where meta-training tasks come from, the held-out test tasks, and the meta-test protocol
(exploration episodes, then test episodes, per test task). Test tasks are drawn from a stream
of the run's seed that training never uses, and recorded with every result.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium.envs.registration import load_env_creator

from metabench.harness.specfiles import SpecError, SpecFile, check_table, find_line, read_specs
from metabench.tasks.base import Task, TaskSampler

TEST_STREAM = 7
TRAIN_EVALUATION_STREAM = 8
"""Stream of the seed that draws the training tasks meta-tested after training."""
"""``SeedSequence`` spawn key of the test-task stream (training uses the run seed directly)."""


@dataclass(frozen=True)
class BenchmarkSpec:
    """One benchmark.

    :param env_id: the registered task env id.
    :param env_kwargs: task env kwargs for meta-training (horizon, split, ...).
    :param test_env_kwargs: kwargs for the meta-test env (defaults to ``env_kwargs``).
    :param episodes_per_trial: episodes per task in a meta-training trial (RL2).
    :param exploration_episodes: meta-test episodes before ``adapt_policy``
        (``[evaluation] exploration_episodes``).
    :param test_episodes: meta-test episodes with the adapted policy
        (``[evaluation] test_episodes``).
    :param batched_metatest: meta-test all test tasks at once (``[evaluation] batched``; see
        :mod:`metabench.batched_evaluation`).
    :param n_test_tasks: held-out tasks evaluated at meta-test.
    :param n_train_evaluation_tasks: training tasks meta-tested too, after training, for the
        meta-train success per class Meta-World reports (``[evaluation] train_tasks``; 0: none).
    :param metaworld: ``None``, or the Meta-World benchmark name whose test split is used.
    :param reports_success: whether the task env reports ``info["success"]``.
    :param source: where the settings come from.
    :param path: the spec file it was read from.
    """

    name: str
    env_id: str
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    test_env_kwargs: dict[str, Any] | None = None
    episodes_per_trial: int = 2
    exploration_episodes: int = 1
    test_episodes: int = 1
    batched_metatest: bool = False
    n_test_tasks: int = 10
    n_train_evaluation_tasks: int = 0
    metaworld: str | None = None
    reports_success: bool = False
    description: str = ""
    source: str = ""
    path: str = ""

    @property
    def n_exploration_eps(self) -> int:
        """Deprecated name of :attr:`exploration_episodes` (goes in the next release)."""
        return self.exploration_episodes

    @property
    def n_test_episodes(self) -> int:
        """Deprecated name of :attr:`test_episodes` (goes in the next release)."""
        return self.test_episodes

    def train_sampler(self, seed: int) -> TaskSampler | None:
        """Meta-training tasks: ``None`` means the task env's own distribution."""
        if self.metaworld is None:
            return None
        from metabench.tasks.metaworld import MetaWorldTaskSampler

        return MetaWorldTaskSampler(
            self.metaworld, split="train", env_name=self.env_kwargs.get("env_name"), seed=seed
        )

    def make_test_env(self, seed: int) -> Any:
        """A fresh task env for meta-testing."""
        import gymnasium as gym

        kwargs = dict(self.env_kwargs if self.test_env_kwargs is None else self.test_env_kwargs)
        if self.metaworld is not None:
            kwargs["seed"] = seed
        try:
            return gym.make(self.env_id, **kwargs).unwrapped
        except (TypeError, ValueError) as error:
            if isinstance(error, SpecError):
                raise
            raise self.tasks_error(error) from None

    def tasks_error(self, error: Exception) -> SpecError:
        """A :class:`SpecError` naming this spec file's ``[tasks]`` table: the task env refused
        its values with ``error``."""
        text = Path(self.path).read_text() if Path(self.path).is_file() else ""
        keys = [key for key in self.env_kwargs if key in str(error)]
        line = (find_line(text, keys[0], "tasks") if keys else None) or find_line(text, "tasks")
        where = f"{self.path}:{line}" if line else self.path
        message = str(error).splitlines()[0] if str(error) else type(error).__name__
        return SpecError(
            f"{where}: {self.env_id} cannot be made with these [tasks] values ({message}): fix them"
        )

    def test_tasks(self, seed: int) -> list[Task]:
        """The held-out tasks of a run with this seed: the same seed gives the same tasks."""
        rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(TEST_STREAM,)))
        if self.metaworld is not None:
            from metabench.tasks.metaworld import MetaWorldTaskSampler

            sampler = MetaWorldTaskSampler(
                self.metaworld, split="test", env_name=self.env_kwargs.get("env_name"), seed=seed
            )
            return sampler.sample(self.n_test_tasks, rng)
        env = self.make_test_env(seed)
        return list(env.sample_tasks(self.n_test_tasks, rng))

    def train_evaluation_tasks(self, seed: int) -> list[Task]:
        """The training tasks meta-tested after training (Meta-World only: as many of each
        training class; none elsewhere)."""
        if self.metaworld is None or not self.n_train_evaluation_tasks:
            return []
        sampler = self.train_sampler(seed)
        assert sampler is not None
        stream = np.random.SeedSequence(seed, spawn_key=(TRAIN_EVALUATION_STREAM,))
        return sampler.sample(self.n_train_evaluation_tasks, np.random.default_rng(stream))

    def make_train_env(self, seed: int) -> Any:
        """A fresh task env of the training split (to meta-test on training tasks)."""
        import gymnasium as gym

        return gym.make(self.env_id, **self.train_env_kwargs(seed)).unwrapped

    def with_env_kwargs(self, extra: dict[str, Any]) -> BenchmarkSpec:
        """This benchmark with ``extra`` task env kwargs for training and meta-test alike (an
        algorithm's published setup, e.g. garage's action normalisation for MAML)."""
        if not extra:
            return self
        test_kwargs = None if self.test_env_kwargs is None else {**self.test_env_kwargs, **extra}
        return dataclasses.replace(
            self, env_kwargs={**self.env_kwargs, **extra}, test_env_kwargs=test_kwargs
        )

    def train_env_kwargs(self, seed: int) -> dict[str, Any]:
        """Task env kwargs for meta-training (Meta-World benchmarks are seeded here)."""
        kwargs = dict(self.env_kwargs)
        if self.metaworld is not None:
            kwargs["seed"] = seed
        return kwargs


ENV_SCHEMA = {
    "description": str, "source": str, "env_id": str, "horizon": int,
    "episodes_per_trial": int, "reports_success": bool,
    "tasks": dict, "split": dict, "evaluation": dict,
}  # fmt: skip
SPLIT_SCHEMA = {"kind": str, "benchmark": str, "test_tasks": int}
EVALUATION_SCHEMA = {
    "exploration_episodes": int, "test_episodes": int, "batched": bool, "train_tasks": int,
}  # fmt: skip
SPLIT_KINDS = ("seed", "metaworld")


def benchmark_from_spec(spec: SpecFile) -> BenchmarkSpec:
    """The :class:`BenchmarkSpec` of one ``envs/*.toml`` file (see ``envs/HalfCheetahVel.toml``)."""
    top = check_table(
        spec, spec.data, ENV_SCHEMA,
        required=("description", "source", "env_id", "episodes_per_trial", "split", "evaluation"),
    )  # fmt: skip
    split = check_table(spec, top["split"], SPLIT_SCHEMA, where="split", required=("kind",))
    evaluation = check_table(
        spec, top["evaluation"], EVALUATION_SCHEMA, where="evaluation",
        required=("exploration_episodes", "test_episodes"),
    )  # fmt: skip
    if split["kind"] not in SPLIT_KINDS:
        raise spec.error(
            f"split kind {split['kind']!r} is unknown: use one of {', '.join(SPLIT_KINDS)}",
            "kind", "split",
        )  # fmt: skip
    metaworld = split.get("benchmark")
    if (split["kind"] == "metaworld") != (metaworld is not None):
        raise spec.error(
            '[split] needs benchmark = "ML1" | "ML10" | "ML45" exactly when kind = "metaworld"',
            "benchmark",
            "split",
        )
    counts: dict[str, int] = {
        **{key: top[key] for key in ("episodes_per_trial", "horizon") if key in top},
        "test_tasks": split.get("test_tasks", 10),
        **{key: evaluation[key] for key in ("exploration_episodes", "test_episodes")},
    }
    for key, value in counts.items():
        if value < 1:
            raise spec.error(f"{key} must be at least 1, got {value}", key)
    env_kwargs = dict(top.get("tasks", {}))  # the task distribution, as the env's kwargs
    if "horizon" in top:
        env_kwargs["horizon"] = top["horizon"]
    test_env_kwargs = None
    if metaworld is not None:
        test_env_kwargs = {**env_kwargs, "split": "test"}
        env_kwargs["split"] = "train"
    return BenchmarkSpec(
        spec.name,
        top["env_id"],
        env_kwargs=env_kwargs,
        test_env_kwargs=test_env_kwargs,
        episodes_per_trial=top["episodes_per_trial"],
        exploration_episodes=evaluation["exploration_episodes"],
        test_episodes=evaluation["test_episodes"],
        batched_metatest=evaluation.get("batched", False),
        n_test_tasks=counts["test_tasks"],
        n_train_evaluation_tasks=evaluation.get("train_tasks", 0),
        metaworld=metaworld,
        reports_success=top.get("reports_success", False),
        description=top["description"],
        source=top["source"],
        path=spec.path,
    )


@functools.cache
def load_benchmarks() -> dict[str, BenchmarkSpec]:
    """Every benchmark of ``envs/*.toml`` (and ``$METABENCH_SPECS``), by name."""
    return {name: benchmark_from_spec(spec) for name, spec in read_specs("envs").items()}


def get_benchmark(name: str) -> BenchmarkSpec:
    """The benchmark called ``name``, its task env kwargs checked, or a ``KeyError`` listing the
    valid names."""
    benchmarks = load_benchmarks()
    try:
        spec = benchmarks[name]
    except KeyError:
        raise KeyError(
            f"unknown benchmark {name!r}; choose one of: {', '.join(sorted(benchmarks))}"
        ) from None
    _check_env(name)
    return spec


@functools.cache
def _check_env(name: str) -> None:
    """Fail on an unknown ``env_id`` or a ``[tasks]`` key the task env does not take (imports
    only this benchmark's env, so loading every spec stays cheap)."""
    import gymnasium as gym

    spec = load_benchmarks()[name]
    try:
        accepted = env_kwargs_accepted(spec.env_id)
    except gym.error.Error:
        raise SpecError(f"{spec.path}: env_id {spec.env_id!r} is not a registered env") from None
    for key in sorted(spec.env_kwargs):
        if accepted is not None and key not in accepted:
            text = Path(spec.path).read_text() if Path(spec.path).is_file() else ""
            line = find_line(text, key, "tasks") or find_line(text, key)
            raise SpecError(
                f"{spec.path}{f':{line}' if line else ''}: {spec.env_id} takes no argument "
                f"{key!r}; [tasks] keys it takes: {', '.join(sorted(accepted))}"
            )


def env_kwargs_accepted(env_id: str) -> set[str] | None:
    """The keyword arguments of the registered task env ``env_id`` (``None``: cannot tell).

    :raises gymnasium.error.Error: ``env_id`` is not registered.
    """
    import gymnasium as gym

    import metabench.registration  # noqa: F401  (registers the ids)

    entry_point = gym.spec(env_id).entry_point
    creator = load_env_creator(entry_point) if isinstance(entry_point, str) else entry_point
    return accepted_kwargs(creator)


def accepted_kwargs(creator: Any) -> set[str] | None:
    """The keyword arguments a class (following ``**kwargs`` up its bases) or function takes;
    ``None`` when some ``**kwargs`` leads nowhere that can be inspected."""
    classes = creator.__mro__ if isinstance(creator, type) else (creator,)
    names: set[str] = set()
    for owner in classes:
        function = owner.__dict__.get("__init__") if isinstance(creator, type) else owner
        if function is None:
            continue
        parameters = inspect.signature(function).parameters.values()
        names |= {p.name for p in parameters if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
        if not any(p.kind is p.VAR_KEYWORD for p in parameters):
            return names - {"self"}
    return None
