"""Train/test splits: where a benchmark's meta-training tasks and held-out test tasks come from.

A benchmark's ``[split]`` table names a kind. Two need nothing of a family:

- ``"seed"`` (:class:`SeedSplit`): training samples the task env's own distribution and the test
  tasks are drawn from it with a stream of the run's seed that training never uses;
- ``"list"`` (:class:`ListSplit`): PEARL's protocol, a fixed list of tasks drawn once, the first
  ones for training and the last ones held out.

A family whose tasks come in lists of its own (Meta-World's train and test classes) declares a
kind of its own, a :class:`Split` subclass, in its :class:`~metabench.tasks.family.TaskFamily`;
the benchmarks' reader and the harness only call the methods below, whatever the family.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Literal

import numpy as np

from metabench.rng import TASK_LIST
from metabench.tasks.base import ListTaskSampler, Task, TaskSampler

Part = Literal["train", "test"]
"""Which part of a split: meta-training's tasks or the held-out ones."""


class SplitKeyError(ValueError):
    """A ``[split]`` value the split cannot use; :attr:`key` names it, so the error can point at
    its line in the benchmark's file."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


class Split:
    """A kind of split. What is not overridden is :class:`SeedSplit`'s: the task env's own
    distribution.

    Subclasses set :attr:`kind` and the ``[split]`` keys they take, and override what differs.

    :param values: the ``[split]`` keys of :attr:`keys` the benchmark sets, type-checked.
    """

    kind: ClassVar[str]
    """The ``[split] kind`` that names it."""
    keys: ClassVar[Mapping[str, type | tuple[type, ...]]] = {}
    """The ``[split]`` keys of this kind besides ``kind`` and ``test_tasks``, with their types."""
    required: ClassVar[Mapping[str, str]] = {}
    """The keys of :attr:`keys` a benchmark must set, each with the values it takes."""
    evaluation_keys: ClassVar[tuple[str, ...]] = ()
    """The ``[evaluation]`` keys that only this kind takes (a count of its family's own)."""
    finite: ClassVar[bool] = False
    """Whether the test tasks form a list a benchmark can take whole (``test_tasks = "all"``)."""

    def __init__(self, **values: Any) -> None:
        self.values = dict(values)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Split) and type(other) is type(self) and other.values == self.values
        )

    def __hash__(self) -> int:
        return hash((type(self), tuple(sorted(self.values.items()))))

    def __repr__(self) -> str:
        values = ", ".join(f"{key}={value!r}" for key, value in self.values.items())
        return f"{type(self).__name__}({values})"

    def env_kwargs(self, part: Part, seed: int) -> dict[str, Any]:
        """Task env kwargs the split adds for ``part`` of a run seeded ``seed`` (none here)."""
        return {}

    def check(self, n_test_tasks: int | None) -> None:
        """Refuse ``[split]`` values that cannot work together (``n_test_tasks``: the
        benchmark's ``test_tasks``, ``None`` for ``"all"``).

        :raises SplitKeyError: naming the key to change.
        """

    def train_sampler(
        self, make_env: Callable[[], Any], env_kwargs: Mapping[str, Any], seed: int
    ) -> TaskSampler | None:
        """The meta-training tasks' sampler; ``None``: the task env's own distribution.

        :param make_env: builds a task env of meta-training (for a split drawn from its tasks).
        """
        return None

    def test_tasks(
        self,
        make_env: Callable[[], Any],
        env_kwargs: Mapping[str, Any],
        seed: int,
        n: int | None,
        rng: np.random.Generator,
    ) -> list[Task]:
        """``n`` held-out tasks drawn with ``rng`` (``None``: all of them, for a finite split).

        :param make_env: builds the meta-test's task env (its ``sample_tasks`` draws them here).
        :raises SplitKeyError: when a ``[split]`` value does not fit the tasks there are.
        """
        if n is None:
            raise SplitKeyError(
                "test_tasks", f'test_tasks = "all" needs a finite {self.kind} split'
            )
        return list(make_env().sample_tasks(n, rng))

    def train_evaluation_tasks(
        self, env_kwargs: Mapping[str, Any], seed: int, n: int, rng: np.random.Generator
    ) -> list[Task]:
        """``n`` meta-training tasks meta-tested after training, for a per-class success on
        them; none here (the training distribution is the test tasks')."""
        return []

    def test_tasks_note(self) -> str:
        """What ``metabench list`` adds to the number of test tasks ("" here)."""
        return ""

    def record(self, test_env: Any) -> dict[str, Any] | None:
        """What the meta-test's record adds under this kind's name (the versions and settings
        its numbers depend on), or ``None``."""
        return None


class SeedSplit(Split):
    """``kind = "seed"``: the task env's own distribution, test tasks drawn per seed."""

    kind = "seed"


class ListSplit(Split):
    """``kind = "list"``: ``n_tasks`` tasks drawn once from the task env's distribution, with a
    stream of the run's seed (:data:`~metabench.rng.TASK_LIST`); the first ``train_tasks`` are
    meta-training's, drawn with replacement, and the last ``test_tasks`` are held out.

    This is oyster's protocol (PEARL): ``env_params.n_tasks`` tasks made at launch,
    ``tasks[:n_train_tasks]`` to train and ``tasks[-n_eval_tasks:]`` to test, so that where the
    counts add up to more than ``n_tasks`` the two overlap (its Cheetah-Dir and Ant-Dir train and
    test on the same two tasks). Where the original's list is fixed (a seeded draw, or every task
    there is), the task env's ``listed_tasks(n_tasks)`` gives it; where oyster drew it unseeded,
    each seed here has its own.
    """

    kind = "list"
    keys: ClassVar[Mapping[str, type | tuple[type, ...]]] = {"n_tasks": int, "train_tasks": int}
    required: ClassVar[Mapping[str, str]] = {
        "n_tasks": "the number of tasks drawn",
        "train_tasks": "how many of them, from the first, meta-training uses",
    }

    def check(self, n_test_tasks: int | None) -> None:
        n_tasks = self.values["n_tasks"]
        if self.values["train_tasks"] > n_tasks:
            raise SplitKeyError("train_tasks", f"train_tasks must be at most n_tasks ({n_tasks})")
        if n_test_tasks is not None and n_test_tasks > n_tasks:
            raise SplitKeyError("test_tasks", f"test_tasks must be at most n_tasks ({n_tasks})")

    def _tasks(self, make_env: Callable[[], Any], seed: int) -> list[Task]:
        """The original's own list where the task env has one (``listed_tasks(n)``: oyster's
        seeded or enumerated lists), else ``n_tasks`` drawn with the seed's stream."""
        env, n = make_env(), self.values["n_tasks"]
        listed = getattr(env, "listed_tasks", None)
        tasks = None if listed is None else listed(n)
        return list(env.sample_tasks(n, TASK_LIST.generator(seed)) if tasks is None else tasks)

    def train_sampler(
        self, make_env: Callable[[], Any], env_kwargs: Mapping[str, Any], seed: int
    ) -> TaskSampler:
        tasks = self._tasks(make_env, seed)[: self.values["train_tasks"]]
        return ListTaskSampler(tasks, replace=True)

    def test_tasks(
        self,
        make_env: Callable[[], Any],
        env_kwargs: Mapping[str, Any],
        seed: int,
        n: int | None,
        rng: np.random.Generator,
    ) -> list[Task]:
        if n is None:
            raise SplitKeyError("test_tasks", 'test_tasks = "all" needs a finite split')
        return self._tasks(make_env, seed)[-n:]
