"""What a task env is and where its tasks come from.

A *task env* is a Gymnasium env whose dynamics or reward depend on a task, with garage's protocol:
``sample_tasks(n)`` draws tasks from the env's own distribution, ``set_task(task)`` switches to
one, and ``reset(options={"task": task})`` does both in one call. Tasks are plain values that a
result file can record and a later run can replay.

A :class:`TaskSampler` draws meta-batches of tasks from an explicit random generator, so the same
seed always gives the same tasks and no global random state is touched.
"""

from __future__ import annotations

import abc
import copy
import difflib
import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol, Self, runtime_checkable

import gymnasium as gym
import numpy as np
from gymnasium import utils

from metabench.errors import InvalidActionError, InvalidTaskError, StepBeforeResetError
from metabench.rng import METAWORLD_TASK_CYCLES
from metabench.validation import ConfigError, check_count

Task = Any
"""A task: a JSON-able dict for the HalfCheetah envs, a ``metaworld.Task`` for Meta-World."""


@runtime_checkable
class TaskEnv(Protocol):
    """The task protocol of every metabench task env (garage's ``sample_tasks``/``set_task``)."""

    def sample_tasks(self, n: int, rng: np.random.Generator | None = None) -> list[Task]:
        """Draw ``n`` tasks from this env's distribution (``rng`` defaults to ``np_random``)."""
        ...

    def set_task(self, task: Task) -> None:
        """Switch to ``task``; takes effect at the next ``reset``."""
        ...


class EzPickleWithTask(utils.EzPickle):
    """Gymnasium's ``EzPickle`` (a copy is the env rebuilt from its constructor's arguments) that
    also carries the env's task, and whether the env drew it itself.

    Without them a pickled or ``copy.deepcopy``-ed task env came back without its task, and its
    next ``reset`` drew a random one; garage's ``test_pickling_keeps_goal`` asserts that a copy
    keeps it, and worker updates and env pools copy envs this way. As with garage's envs, the
    copy is a fresh env with the same task: the running episode and the random generator's state
    are not carried over, so ``reset(seed=s)`` on the copy repeats the original's.

    For an env with the task protocol (``task``, ``set_task``, ``_task_drawn``) that calls
    ``EzPickle.__init__`` with its constructor's arguments, in place of ``EzPickle``.
    """

    if TYPE_CHECKING:  # the task protocol of the env it is mixed into
        _task_drawn: bool

        @property
        def task(self) -> Task: ...

        def set_task(self, task: Task) -> None: ...

    def __getstate__(self) -> dict[str, Any]:
        return {**super().__getstate__(), "task": self.task, "task_drawn": self._task_drawn}

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = dict(state)
        task, drawn = state.pop("task"), state.pop("task_drawn")
        super().__setstate__(state)
        if task is not None:
            self.set_task(task)
            self._task_drawn = drawn


class CheckedKeywords:
    """Checks a task env's keyword arguments before its constructor runs, with an error that
    names the argument, the env's keyword arguments and the fix.

    Python's own error for an unknown one names the innermost base that rejected it (``MujocoEnv``
    for HalfCheetah), lists nothing, and ``gymnasium.make`` appends every keyword argument of the
    id (an RL2 id's internal ones too) to any ``TypeError``; :class:`ConfigError` is a
    ``ValueError``, which ``gymnasium.make`` passes on as it is. Only names are checked here:
    values are checked by the constructor, and valid arguments build the same env as before.
    """

    fixed_keywords: ClassVar[Mapping[str, str]] = {}
    """Arguments of a base's constructor that this env sets itself, and what it sets them to:
    not the caller's to give."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Self:
        if not args:  # positional arguments: Python's own checks
            check_keywords(cls, kwargs)
        return super().__new__(cls)


def keyword_parameters(creator: Any) -> list[inspect.Parameter] | None:
    """The parameters a class (its constructor, following ``**kwargs`` up its bases, each name
    as its first constructor declares it) or a function takes by keyword, less the
    :attr:`CheckedKeywords.fixed_keywords` of a class; ``None`` where a ``**kwargs`` leads
    nowhere that can be inspected."""
    functions = (
        [vars(owner)["__init__"] for owner in creator.__mro__ if "__init__" in vars(owner)]
        if isinstance(creator, type)
        else [creator]
    )
    fixed = getattr(creator, "fixed_keywords", {}) if isinstance(creator, type) else {}
    found: dict[str, inspect.Parameter] = {}
    for function in functions:
        parameters = list(inspect.signature(function).parameters.values())
        for parameter in parameters[1:] if isinstance(creator, type) else parameters:
            if parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY):
                found.setdefault(parameter.name, parameter)
        if not any(p.kind is p.VAR_KEYWORD for p in parameters):
            return [parameter for name, parameter in found.items() if name not in fixed]
    return None


def check_keywords(
    creator: Any, given: Mapping[str, Any], extra: Sequence[str] = (), name: str = ""
) -> None:
    """Raise :class:`ConfigError` for the first argument of ``given`` that ``creator`` (a task
    env's class) does not take, or one it sets itself; ``extra``: the arguments a wrapper around
    it takes too (an RL2 id's), ``name``: what to call it. Nothing is checked where the
    arguments cannot be told (a ``**kwargs`` to nowhere); a missing argument is left to Python
    (pickle and ``copy`` create an env with none before they restore it)."""
    parameters = keyword_parameters(creator)
    if parameters is None:
        return
    name = name or getattr(creator, "__name__", repr(creator))
    fixed = getattr(creator, "fixed_keywords", {})
    valid = [*extra, *(parameter.name for parameter in parameters)]
    for keyword in given:
        if keyword in fixed:
            raise ConfigError(f"{name} sets {keyword} itself ({fixed[keyword]}): remove {keyword}")
        if keyword not in valid:
            close = difflib.get_close_matches(keyword, valid, n=1)
            fix = f"did you mean {close[0]!r}?" if close else "remove it"
            raise ConfigError(
                f"{name} has no keyword argument {keyword!r}: {fix} (its keyword arguments: "
                f"{', '.join(valid)})"
            )


def check_action(action: Any, space: gym.spaces.Space[Any]) -> np.ndarray:
    """Return ``action`` as an array, or raise :class:`InvalidActionError` naming the fix.

    Called on every step, so it does only a shape comparison and one ``isfinite`` pass.
    """
    array = np.asarray(action, dtype=space.dtype)
    if array.shape != space.shape:
        raise InvalidActionError(
            f"action has shape {array.shape}, expected {space.shape}: "
            f"pass one action of the env's action_space, not a batch or a scalar"
        )
    if not np.isfinite(array).all():
        raise InvalidActionError(
            f"action contains NaN or inf ({array}): check the policy output before stepping"
        )
    return array


class ActionScaling:
    """garage's action normalisation (``normalize(env, expected_action_scale=scale)``).

    The policy acts in ``[-scale, scale]`` on every dimension, and an action ``a`` reaches the env
    as ``clip(low + (a + scale) * (high - low) / (2 * scale), low, high)``; for HalfCheetah's
    ``[-1, 1]`` that is ``clip(a / scale, -1, 1)``. With a large ``scale`` (garage's and
    pytorch-maml-rl's MAML HalfCheetah setups use 10), a Gaussian policy's unit exploration noise
    moves the actuators, and pays control cost, only a tenth as much. The same element-wise
    operations apply to one action or a batch of them, so a batched env gets the same bits.

    :param space: the env's own bounded action space.
    :param scale: the half-width of the interval the policy acts in.

    Example::

        >>> from gymnasium.spaces import Box
        >>> scaling = ActionScaling(Box(-1.0, 1.0, (2,), np.float32), 10.0)
        >>> scaling.space
        Box(-10.0, 10.0, (2,), float32)
        >>> scaling(np.array([5.0, -30.0], dtype=np.float32)).tolist()
        [0.5, -1.0]
    """

    def __init__(self, space: gym.spaces.Box, scale: float) -> None:
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not scale > 0:
            raise ValueError(f"action_scale must be a positive number, got {scale!r}")
        if not (np.isfinite(space.low).all() and np.isfinite(space.high).all()):
            raise ValueError(f"action_scale needs a bounded action space, got {space}")
        if not math.isfinite(scale):
            raise ValueError(f"action_scale must be finite, got {scale!r}")
        self.scale = float(scale)
        self.low = space.low.copy()
        self.high = space.high.copy()
        dtype = space.dtype.type
        # garage's order of operations, in the action space's dtype
        self._half_width = (0.5 * (self.high - self.low) / dtype(self.scale)).astype(space.dtype)
        self._offset = dtype(self.scale)
        self.space = gym.spaces.Box(-self.scale, self.scale, shape=space.shape, dtype=space.dtype)

    def __call__(self, action: np.ndarray) -> np.ndarray:
        """The env action for a policy action (or a batch of them, along the first axis)."""
        mapped = self.low + (action + self._offset) * self._half_width
        return np.clip(mapped, self.low, self.high)


class EpisodeGuard:
    """Tracks whether an env may be stepped, for the :class:`StepBeforeResetError` check."""

    __slots__ = ("active",)

    def __init__(self) -> None:
        self.active = False

    def check(self) -> None:
        if not self.active:
            raise StepBeforeResetError(
                "step() called before reset() or after the episode ended: call reset() first"
            )


class TaskState:
    """The task protocol of a MuJoCo task env, mixed in before Gymnasium's env: the current task
    (:attr:`task`, :meth:`set_task`), ``reset``'s ``task`` option, and a task the env draws
    itself when it has none, drawn again on a seeded reset so that ``reset(seed=s)`` determines
    every episode that follows (a task given with ``set_task`` is kept). It also starts the
    episode's step count and :class:`EpisodeGuard`.

    A subclass calls :meth:`_start_task_state` in ``__init__`` and provides ``sample_tasks`` and
    :meth:`_validated`; :meth:`_use` and :meth:`_public` say how a task is applied and shown.
    It goes before :class:`EzPickleWithTask` in the bases: Gymnasium's MuJoCo envs are
    ``EzPickle`` too, so a mixin after it would follow their ``reset`` in the MRO.
    """

    _task: Any
    _task_drawn: bool
    _steps: int
    _guard: EpisodeGuard

    if TYPE_CHECKING:

        def sample_tasks(self, n: int, rng: np.random.Generator | None = None) -> list[Task]: ...

    def _start_task_state(self) -> None:
        self._task = None
        self._task_drawn = False
        """Whether the env drew :attr:`task` itself (a seeded reset draws it again)."""
        self._steps = 0
        self._guard = EpisodeGuard()

    @abc.abstractmethod
    def _validated(self, task: Task) -> Any:
        """``task`` as the env keeps it, or :class:`InvalidTaskError` saying what to give."""

    def _use(self, task: Any) -> None:
        """Make ``task`` (validated) the current one (an env whose task is in its model writes
        it there too)."""
        self._task = task

    def _public(self, task: Any) -> Task:
        """``task`` as :attr:`task` and ``info["task"]`` give it: a copy the caller may change."""
        return copy.deepcopy(task)

    @property
    def task(self) -> Task | None:
        """The current task (``None`` until the first ``reset`` or ``set_task``)."""
        return None if self._task is None else self._public(self._task)

    def set_task(self, task: Task) -> None:
        """Switch to ``task``; the reward uses it at once."""
        self._use(self._validated(task))
        self._task_drawn = False

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        # an invalid task leaves the env as it was: validated before anything changes
        given = None if not options or "task" not in options else self._validated(options["task"])
        obs, info = super().reset(seed=seed, options=options)  # type: ignore[misc]  # the env's
        if given is not None:
            self._use(given)
            self._task_drawn = False
        elif self._task is None or (seed is not None and self._task_drawn):
            self._use(self._validated(self.sample_tasks(1)[0]))
            self._task_drawn = True
        self._steps = 0
        self._guard.active = True
        info["task"] = self.task
        return obs, info


def apply_reset_task(
    env: TaskEnv, options: dict[str, Any] | None, has_task: bool, seed: int | None = None
) -> None:
    """The task part of ``reset``: the task in ``options``, else a task drawn from the env's own
    distribution (with its ``np_random``) when it has none, or on a seeded reset when the env
    drew its task itself, so ``reset(seed=...)`` determines what follows. A task given with
    ``set_task`` is kept. The env's ``set_task`` must set ``_task_drawn = False``."""
    if options and options.get("task") is not None:
        env.set_task(options["task"])
    elif not has_task or (seed is not None and getattr(env, "_task_drawn", False)):
        env.set_task(env.sample_tasks(1)[0])
        env._task_drawn = True  # type: ignore[attr-defined]


def validated_angle(task: Task, env_name: str) -> dict[str, float]:
    """A ``{"angle": radians}`` task as a direction task env keeps it (Ant-Dir, Humanoid-Dir), or
    :class:`InvalidTaskError` naming the env (``env_name``) and what a valid task looks like."""
    if not isinstance(task, Mapping) or set(task) != {"angle"}:
        raise InvalidTaskError(
            f"{env_name} expects a task like {{'angle': <radians>}}, got {task!r}; "
            f"use env.sample_tasks(n) to make valid tasks"
        )
    angle = task["angle"]
    if isinstance(angle, bool) or not isinstance(angle, (int, float, np.number)):
        raise InvalidTaskError(f"task['angle'] must be a number (radians), got {angle!r}")
    if not math.isfinite(angle):
        raise InvalidTaskError(f"task['angle'] must be finite, got {angle}")
    return {"angle": float(angle)}


def validated_goal(task: Task, env_name: str) -> np.ndarray:
    """The goal of a ``{"goal": [x, y]}`` task, or :class:`InvalidTaskError` naming the env
    (``env_name``) and what a valid task looks like (the goal tasks of the point robots and
    Ant-Goal)."""
    if not isinstance(task, Mapping) or set(task) != {"goal"}:
        raise InvalidTaskError(
            f"{env_name} expects a task like {{'goal': [x, y]}}, got {task!r}; "
            f"use env.sample_tasks(n) to make valid tasks"
        )
    try:
        goal = np.asarray(task["goal"], dtype=np.float64)
    except (TypeError, ValueError):
        goal = np.full(1, np.nan)
    if goal.shape != (2,) or not np.isfinite(goal).all():
        raise InvalidTaskError(f"task['goal'] must be two finite numbers, got {task['goal']!r}")
    return goal


def check_n_tasks(n: int) -> None:
    """Reject a non-positive or non-integer number of tasks."""
    check_count("number of tasks", n)


class TaskSampler(abc.ABC):
    """Draws meta-batches of tasks. Deterministic given the generator it is handed."""

    @abc.abstractmethod
    def sample(self, n: int, rng: np.random.Generator) -> list[Task]:
        """Return ``n`` tasks drawn with ``rng``."""

    def check_batch_size(self, n: int) -> None:
        """Raise ``ValueError`` naming the valid sizes if a meta-batch of ``n`` is impossible."""
        check_n_tasks(n)

    def sample_batch(self, index: int, n: int, rng: np.random.Generator) -> list[Task]:
        """The ``index``-th (0-based) meta-batch of a run's training: ``sample(n, rng)``, unless
        the sampler follows a schedule over the run (:class:`CycledTaskSampler`)."""
        return self.sample(n, rng)

    def task_groups(self) -> list[list[Task]] | None:
        """The finite tasks this sampler draws from, one list per class that a balanced
        meta-batch takes equally from; ``None`` for a continuous distribution."""
        return None

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint must keep of this sampler (stateless samplers keep nothing)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:  # noqa: B027 - stateless default
        """Restore what :meth:`state_dict` returned."""


class SetTaskSampler(TaskSampler):
    """Samples tasks from a task env's own distribution (a continuous parameter, usually).

    :param sample_tasks: a task env's ``sample_tasks``, or any function ``(n, rng) -> tasks``.

    Example::

        >>> import numpy as np
        >>> from metabench.tasks.halfcheetah.envs import HalfCheetahVelEnv
        >>> sampler = SetTaskSampler(HalfCheetahVelEnv().sample_tasks)
        >>> len(sampler.sample(3, np.random.default_rng(0)))
        3
    """

    def __init__(self, sample_tasks: Callable[[int, np.random.Generator], Sequence[Task]]) -> None:
        self._sample_tasks = sample_tasks

    def sample(self, n: int, rng: np.random.Generator) -> list[Task]:
        check_n_tasks(n)
        return list(self._sample_tasks(n, rng))


class ListTaskSampler(TaskSampler):
    """Samples from a fixed, finite list of tasks, with or without replacement.

    Without replacement, the tasks of one meta-batch are distinct and a meta-batch larger than the
    list is a ``ValueError``.
    """

    def __init__(self, tasks: Sequence[Task], *, replace: bool = False) -> None:
        if len(tasks) == 0:
            raise ValueError("ListTaskSampler needs at least one task")
        self.tasks = list(tasks)
        self.replace = replace

    def check_batch_size(self, n: int) -> None:
        check_n_tasks(n)
        if not self.replace and n > len(self.tasks):
            raise ValueError(
                f"cannot draw {n} distinct tasks from {len(self.tasks)}: use a meta-batch of at "
                f"most {len(self.tasks)} or sample with replacement"
            )

    def sample(self, n: int, rng: np.random.Generator) -> list[Task]:
        self.check_batch_size(n)
        indices = rng.choice(len(self.tasks), size=n, replace=self.replace)
        return [self.tasks[i] for i in indices]

    def task_groups(self) -> list[list[Task]]:
        """All the tasks, as one class."""
        return [list(self.tasks)]


TrainTaskOrder = Literal["sampled", "cycled"]
"""How meta-training goes through a finite list of training tasks (:func:`ordered_sampler`)."""

TRAIN_TASK_ORDER_DOC = (
    "sampled: each meta-batch drawn afresh from all training tasks. cycled: the order of "
    "Meta-World's training envs (make_ml_envs_train, in Meta-World+'s training loop): each "
    "class's tasks cut into blocks of consecutive tasks, one block per meta-batch, every block "
    "once per cycle in an order reshuffled each cycle; Meta-World benchmarks only"
)


class CycledTaskSampler(TaskSampler):
    """Meta-training batches in the order of Meta-World's training vector envs.

    ``metaworld.make_ml_envs_train`` gives sub-env ``j`` of a class the tasks ``tasks[j::m]``
    (``m`` sub-envs per class) and, at each ``sample_tasks``, moves every sub-env to the next
    task of its list, shuffling the list in place when a cycle starts. The sub-envs share one
    seed, so they shuffle alike, and meta-batch ``k`` is the ``b``-th block of ``m`` consecutive
    tasks of every class, ``b`` the ``k``-th entry of a block order reshuffled every cycle by a
    generator of the seed (NumPy's ``default_rng(seed)``, which Meta-World's envs seed as well:
    the same seed gives Meta-World's own order). Every task is trained on once per cycle.

    :param base: the sampler whose :meth:`~TaskSampler.task_groups` are cycled through; its
        ``sample`` serves draws outside the schedule.
    :param seed: the run's seed.
    """

    def __init__(self, base: TaskSampler, seed: int) -> None:
        groups = base.task_groups()
        if groups is None:
            raise ValueError(
                "cycling through training tasks needs a finite list of them (a Meta-World "
                "benchmark's); this sampler draws from a continuous distribution"
            )
        sizes = {len(group) for group in groups}
        if len(sizes) != 1:
            raise ValueError(
                f"cycling through training tasks needs as many tasks in every class, got "
                f"{sorted(sizes)}: keep the same number of goals per class"
            )
        self.base = base
        self.groups = groups
        self.seed = int(seed)

    def check_batch_size(self, n: int) -> None:
        self.base.check_batch_size(n)
        k, size = len(self.groups), len(self.groups[0])
        if n % k or size % (n // k):
            raise ValueError(
                f"cannot cycle through {size} tasks per class in meta-batches of {n}: each "
                f"meta-batch takes the same number of tasks from each of the {k} classes, and "
                f"that number must divide {size}; use a meta-batch of {k} times a divisor of {size}"
            )

    def sample(self, n: int, rng: np.random.Generator) -> list[Task]:
        """``n`` tasks drawn with ``rng`` by the base sampler (outside the training schedule)."""
        return self.base.sample(n, rng)

    def sample_batch(self, index: int, n: int, rng: np.random.Generator) -> list[Task]:
        """Meta-batch ``index`` of the schedule (``rng`` is not used), grouped by class."""
        self.check_batch_size(n)
        per_class = n // len(self.groups)
        blocks = len(self.groups[0]) // per_class
        cycle, position = divmod(int(index), blocks)
        generator = METAWORLD_TASK_CYCLES.generator(self.seed)
        order = list(range(blocks))
        for _ in range(cycle + 1):  # in place, cycle after cycle, as Meta-World's envs do
            generator.shuffle(order)
        start = order[position] * per_class
        return [task for group in self.groups for task in group[start : start + per_class]]

    def task_groups(self) -> list[list[Task]]:
        return [list(group) for group in self.groups]


def ordered_sampler(
    sampler: TaskSampler | None, order: TrainTaskOrder, seed: int
) -> TaskSampler | None:
    """``sampler`` as meta-training goes through it in ``order`` (see :data:`TRAIN_TASK_ORDER_DOC`);
    a ``ValueError`` names the fix when it cannot."""
    if order == "sampled":
        return sampler
    if order != "cycled":
        raise ValueError(f"train_task_order must be 'sampled' or 'cycled', got {order!r}")
    if sampler is None or sampler.task_groups() is None:
        raise ValueError(
            "train_task_order='cycled' cycles through a finite list of training tasks (a "
            "Meta-World benchmark's); this benchmark draws them from its env's distribution: "
            "use 'sampled'"
        )
    return CycledTaskSampler(sampler, seed)
