"""Benchmarks (``envs/*.toml``): which task env, which tasks to train and test on, which protocol.

A benchmark fixes everything a result depends on besides the algorithm: the task env and its
horizon, where meta-training tasks come from, the held-out test tasks, and the meta-test protocol
(exploration episodes, then test episodes, per test task). Test tasks are drawn from a stream
of the run's seed that training never uses, and recorded with every result. A Meta-World
benchmark can meta-test on every test task of its split instead (``test_tasks = "all"``), in
Meta-World's order: the tasks of Meta-World's own ``metalearning_evaluation``.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from gymnasium.envs.registration import load_env_creator

from metabench.harness.specfiles import (
    Schema,
    SpecError,
    SpecFile,
    check_table,
    find_line,
    read_specs,
)
from metabench.registration import make_task_env
from metabench.rng import PERIODIC_TASKS, TEST_TASKS, TRAIN_EVALUATION_TASKS
from metabench.tasks.base import Task, TaskSampler
from metabench.tasks.family import (
    BUILT_IN_SPLITS,
    TaskEnvDeclaration,
    declaration_of,
    load_split_class,
    split_kinds,
)
from metabench.tasks.splits import SeedSplit, Split, SplitKeyError

ALL = "all"
"""``[split] test_tasks = "all"``: every test task of a Meta-World split."""


def task_classes(tasks: Sequence[Task]) -> dict[str, list[int]]:
    """The indices of ``tasks`` by class (a Meta-World task's env name; other tasks form one
    class), classes in the order they first appear."""
    classes: dict[str, list[int]] = {}
    for index, task in enumerate(tasks):
        classes.setdefault(getattr(task, "env_name", ""), []).append(index)
    return classes


def class_share_misfit(classes: dict[str, list[int]], n: int, verb: str) -> str | None:
    """Why ``n`` tasks cannot take as many of each of ``classes`` (``verb`` starts the fix:
    "use", "ask for"), or ``None`` when they can."""
    k, fewest = len(classes), min(len(pool) for pool in classes.values())
    if not (n % k or n // k > fewest):
        return None
    if k == 1:
        return f"there are {fewest} test tasks: {verb} at most {fewest}"
    return (
        f"it takes as many of each of the {k} classes of the test tasks: {verb} a multiple "
        f"of {k} up to {k * fewest}"
    )


def first_of_each_class(tasks: Sequence[Task], n: int) -> list[Task]:
    """The first ``n / k`` of each of the ``k`` classes of ``tasks``, in their order: a subset
    whose classes are ``tasks``' own, where the first ``n`` of ML10's test tasks would all be
    drawer-open.

    :raises ValueError: if ``n`` is not a multiple of ``k`` or is more than ``k`` times the
        smallest class, saying which counts fit.
    """
    classes = task_classes(tasks)
    misfit = class_share_misfit(classes, n, "ask for")
    if misfit is not None:
        raise ValueError(misfit)
    k = len(classes)
    chosen = sorted(index for pool in classes.values() for index in pool[: n // k])
    return [tasks[index] for index in chosen]


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
        :mod:`metabench.evaluation.batched`).
    :param n_test_tasks: held-out tasks evaluated at meta-test; ``"all"``: every test task of a
        finite split, in its order (``[split] test_tasks``).
    :param n_periodic_test_tasks: the meta-tests during training use this many of the test tasks,
        as many of each class, fixed per seed (``[evaluation] periodic_test_tasks``; ``None``:
        all of them); the final meta-test always uses all of them.
    :param n_train_evaluation_tasks: training tasks meta-tested too, after training, for the
        meta-train success per class Meta-World reports (``[evaluation] train_tasks``; 0: none).
    :param metaworld_envs_per_class: Meta-World only: the sub-envs per test class of
        Meta-World's own evaluation, for its count of the meta-test
        (:mod:`metabench.tasks.metaworld.count`; ``[evaluation] metaworld_envs_per_class``).
    :param split: where the training and test tasks come from (``[split]``; its family's kind).
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
    n_test_tasks: int | Literal["all"] = 10
    n_periodic_test_tasks: int | None = None
    n_train_evaluation_tasks: int = 0
    metaworld_envs_per_class: int | None = None
    split: Split = field(default_factory=SeedSplit)
    reports_success: bool = False
    description: str = ""
    source: str = ""
    path: str = ""

    def train_sampler(self, seed: int) -> TaskSampler | None:
        """Meta-training tasks: ``None`` means the task env's own distribution."""
        return self.split.train_sampler(
            lambda: make_task_env(self.env_id, **self.train_env_kwargs(seed)), self.env_kwargs, seed
        )

    def test_env_kwargs_for(self, seed: int) -> dict[str, Any]:
        """Task env kwargs of the meta-test of a run seeded ``seed``."""
        kwargs = self.env_kwargs if self.test_env_kwargs is None else self.test_env_kwargs
        return {**kwargs, **self.split.env_kwargs("test", seed)}

    def make_test_env(self, seed: int) -> Any:
        """A fresh task env for meta-testing."""
        kwargs = self.test_env_kwargs_for(seed)
        try:
            return make_task_env(self.env_id, **kwargs)
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

    def spec_error(self, message: str, key: str, table: str) -> SpecError:
        """A :class:`SpecError` at the line of ``key`` in ``[table]`` of this spec file."""
        text = Path(self.path).read_text() if Path(self.path).is_file() else ""
        return SpecFile(self.name, self.path, text, {}).error(message, key, table)

    def test_tasks(self, seed: int) -> list[Task]:
        """The held-out tasks of a run with this seed: the same seed gives the same tasks."""
        n = self.n_test_tasks if isinstance(self.n_test_tasks, int) else None  # None: "all"
        try:
            return self.split.test_tasks(
                lambda: self.make_test_env(seed),
                self.env_kwargs,
                seed,
                n,
                TEST_TASKS.generator(seed),
            )
        except SplitKeyError as error:
            raise self.spec_error(str(error), error.key, "split") from None

    def periodic_test_indices(self, seed: int, test_tasks: Sequence[Task]) -> list[int] | None:
        """Which of ``test_tasks`` the meta-tests during training use, in order: ``None`` (all),
        or ``n_periodic_test_tasks`` of them, as many of each class (a Meta-World task's env
        name; other tasks form one class), drawn with a stream of the seed.

        A few tasks are noisy but cheap: enough to watch training, never the final number.
        """
        n = self.n_periodic_test_tasks
        if n is None:
            return None
        classes = task_classes(test_tasks)
        misfit = class_share_misfit(classes, n, "use")
        if misfit is not None:
            raise self.spec_error(
                f"periodic_test_tasks = {n} does not fit: {misfit}",
                "periodic_test_tasks",
                "evaluation",
            )
        rng = PERIODIC_TASKS.generator(seed)
        share = n // len(classes)
        chosen = [i for pool in classes.values() for i in rng.choice(pool, share, replace=False)]
        return sorted(int(index) for index in chosen)

    def train_evaluation_tasks(self, seed: int) -> list[Task]:
        """The training tasks meta-tested after training (for a split of classes, as many of
        each training class; none where training samples the test tasks' distribution)."""
        rng = TRAIN_EVALUATION_TASKS.generator(seed)
        return self.split.train_evaluation_tasks(
            self.env_kwargs, seed, self.n_train_evaluation_tasks, rng
        )

    def make_train_env(self, seed: int) -> Any:
        """A fresh task env of the training split (to meta-test on training tasks)."""
        return make_task_env(self.env_id, **self.train_env_kwargs(seed))

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
        """Task env kwargs for meta-training (with the split's, e.g. Meta-World's seed)."""
        return {**self.env_kwargs, **self.split.env_kwargs("train", seed)}

    @property
    def declaration(self) -> TaskEnvDeclaration | None:
        """What the task env's family declares of it (``None``: an env of no family)."""
        return declaration_of(self.env_id)

    @property
    def steps_in_workers(self) -> bool:
        """Whether the task family steps a meta-batch in worker processes when a run has
        several cores."""
        return self.declaration is not None and self.declaration.steps_in_workers

    @property
    def batched_vector_env(self) -> bool:
        """Whether the task family has a batched vector env (``gymnasium.make_vec``'s default
        for the id) to step this benchmark's envs."""
        declared = self.declaration
        return declared is not None and declared.vector_entry_point is not None


ENV_SCHEMA = {
    "description": str, "source": str, "env_id": str, "horizon": int,
    "episodes_per_trial": int, "reports_success": bool,
    "tasks": dict, "split": dict, "evaluation": dict,
}  # fmt: skip
SPLIT_SCHEMA: Schema = {"kind": str, "test_tasks": (int, str)}
"""The ``[split]`` keys of every kind; a kind adds its own (:attr:`Split.keys`)."""
EVALUATION_SCHEMA: Schema = {
    "exploration_episodes": int, "test_episodes": int, "batched": bool, "train_tasks": int,
    "periodic_test_tasks": int,
}  # fmt: skip
"""The ``[evaluation]`` keys of every benchmark; a kind of split adds its own
(:attr:`Split.evaluation_keys`)."""


def split_classes() -> dict[str, type[Split]]:
    """Every kind of split, the built-in ones first, then the families' (their modules load
    without the families' envs)."""
    return {kind: load_split_class(kind) for kind in (*BUILT_IN_SPLITS, *split_kinds())}


def _kinds_taking(key: str, table: str, classes: dict[str, type[Split]]) -> str:
    """The kinds whose ``[table]`` takes ``key``, as ``kind = "a" | "b"``."""
    kinds = [
        kind
        for kind, cls in classes.items()
        if key in (cls.keys if table == "split" else cls.evaluation_keys)
    ]
    return "kind = " + " | ".join(f'"{kind}"' for kind in kinds)


def benchmark_from_spec(spec: SpecFile) -> BenchmarkSpec:
    """The :class:`BenchmarkSpec` of one ``envs/*.toml`` file (see ``envs/HalfCheetahVel.toml``)."""
    top = check_table(
        spec, spec.data, ENV_SCHEMA,
        required=("description", "source", "env_id", "episodes_per_trial", "split", "evaluation"),
    )  # fmt: skip
    classes = split_classes()
    split_keys = {key: t for cls in classes.values() for key, t in cls.keys.items()}
    evaluation_keys = {key: int for cls in classes.values() for key in cls.evaluation_keys}
    split = check_table(
        spec, top["split"], {**SPLIT_SCHEMA, **split_keys}, where="split", required=("kind",)
    )
    evaluation = check_table(
        spec, top["evaluation"], {**EVALUATION_SCHEMA, **evaluation_keys}, where="evaluation",
        required=("exploration_episodes", "test_episodes"),
    )  # fmt: skip
    kind = split["kind"]
    if kind not in classes:
        raise spec.error(
            f"split kind {kind!r} is unknown: use one of {', '.join(classes)}", "kind", "split"
        )
    split_class = classes[kind]
    for table, values, own in [
        ("split", split, split_class.keys),
        ("evaluation", evaluation, split_class.evaluation_keys),
    ]:
        for key in values:
            if key in (split_keys if table == "split" else evaluation_keys) and key not in own:
                raise spec.error(
                    f"{key} is for {_kinds_taking(key, table, classes)} only: remove it", key, table
                )
    for key, what in split_class.required.items():
        if key not in split:
            raise spec.error(
                f'[split] kind = "{kind}" needs {key} = {what}: add it', "kind", "split"
            )
    test_tasks = split.get("test_tasks", 10)
    if isinstance(test_tasks, str) and test_tasks != ALL:
        raise spec.error(
            f'test_tasks must be a positive integer or "all" (every test task of a finite '
            f"split), got {test_tasks!r}",
            "test_tasks",
            "split",
        )
    if test_tasks == ALL and not split_class.finite:
        finite = " | ".join(f'"{k}"' for k, cls in classes.items() if cls.finite)
        raise spec.error(
            f'test_tasks = "all" needs kind = {finite} (a finite test split): give a number',
            "test_tasks",
            "split",
        )
    counts: dict[str, int] = {
        **{key: top[key] for key in ("episodes_per_trial", "horizon") if key in top},
        **({} if test_tasks == ALL else {"test_tasks": test_tasks}),
        **{key: split[key] for key, t in split_class.keys.items() if t is int and key in split},
        **{key: evaluation[key] for key in ("exploration_episodes", "test_episodes")},
        **{
            key: evaluation[key]
            for key in ("periodic_test_tasks", *split_class.evaluation_keys)
            if key in evaluation
        },
    }
    for key, value in counts.items():
        if value < 1:
            raise spec.error(f"{key} must be at least 1, got {value}", key)
    chosen = split_class(**{key: split[key] for key in split_class.keys if key in split})
    try:
        chosen.check(None if test_tasks == ALL else test_tasks)
    except SplitKeyError as error:
        raise spec.error(str(error), error.key, "split") from None
    env_kwargs = dict(top.get("tasks", {}))  # the task distribution, as the env's kwargs
    if "horizon" in top:
        env_kwargs["horizon"] = top["horizon"]
    return BenchmarkSpec(
        spec.name,
        top["env_id"],
        env_kwargs=env_kwargs,
        episodes_per_trial=top["episodes_per_trial"],
        exploration_episodes=evaluation["exploration_episodes"],
        test_episodes=evaluation["test_episodes"],
        batched_metatest=evaluation.get("batched", False),
        n_test_tasks=test_tasks,
        n_periodic_test_tasks=evaluation.get("periodic_test_tasks"),
        n_train_evaluation_tasks=evaluation.get("train_tasks", 0),
        metaworld_envs_per_class=evaluation.get("metaworld_envs_per_class"),
        split=chosen,
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
