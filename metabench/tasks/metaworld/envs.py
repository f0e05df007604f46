"""Meta-World ML1, ML10 and ML45 as task envs: one Gymnasium env over a benchmark split.

A Meta-World benchmark is a finite list of :class:`metaworld.Task` values (50 goal positions per
env class) split into train and test classes. :class:`MetaWorldTaskEnv` takes any task of its split
and switches the underlying Sawyer env class when the task's class changes (one instance per
class, built on first use). The goal is hidden from the observation (the ``ML`` benchmarks set
``partially_observable=True`` in every task); only the horizon ends an episode (``truncated``).

:class:`MetaWorldTaskSampler` draws meta-batches spread evenly across the split's classes, as
Meta-World's own ``make_ml_envs`` does. Benchmark objects are cached per process, because building
one draws its goals by resetting every class 50 times (ML1 ~1 s, ML10 ~8 s, ML45 ~26 s).
"""

from __future__ import annotations

import collections
import difflib
import functools
import io
import pickle
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

import gymnasium as gym
import metaworld
import numpy as np
from gymnasium import utils
from gymnasium.spaces import Box
from metaworld.env_dict import ALL_V3_ENVIRONMENTS
from metaworld.sawyer_xyz_env import SawyerXYZEnv
from metaworld.types import Task as MetaWorldTask

from metabench.errors import InvalidTaskError
from metabench.rng import combined_seed_sequence
from metabench.tasks.base import (
    CheckedKeywords,
    EpisodeGuard,
    EzPickleWithTask,
    ListTaskSampler,
    Task,
    TaskSampler,
    check_action,
    check_n_tasks,
)
from metabench.tasks.metaworld.lean import make_lean
from metabench.validation import check_count

BENCHMARKS = ("ML1", "ML10", "ML45")
"""The Meta-World meta-learning benchmarks metabench exposes."""

SPLITS = ("train", "test")

REWARD_FUNCTION_VERSIONS = ("v1", "v2")

MAX_PATH_LENGTH: int = SawyerXYZEnv.max_path_length
"""Meta-World's episode limit (500): its envs raise if stepped past it without a reset."""

ENV_NAMES: tuple[str, ...] = tuple(ALL_V3_ENVIRONMENTS)
"""Every Meta-World v3 env name, valid for ``ML1`` (``"reach-v3"``, ``"push-v3"``, ...)."""

_MAX_SEED = 2**32 - 2
"""``np.random.seed`` takes seeds below 2**32, and ML1 seeds its test goals with ``seed + 1``."""


# -- benchmarks ----------------------------------------------------------------------------------
def _check_benchmark_args(benchmark: str, env_name: str | None, split: str, seed: int) -> None:
    if benchmark not in BENCHMARKS:
        raise ValueError(
            f"unknown Meta-World benchmark {benchmark!r}: use one of {', '.join(BENCHMARKS)}"
        )
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}: use 'train' or 'test'")
    if benchmark == "ML1":
        if env_name is None:
            raise ValueError(
                "ML1 needs env_name, one Meta-World env such as 'reach-v3' "
                "(all names: metabench.tasks.metaworld.ENV_NAMES)"
            )
        if env_name not in ALL_V3_ENVIRONMENTS:
            close = difflib.get_close_matches(str(env_name), ENV_NAMES, n=3)
            hint = f"did you mean {', '.join(map(repr, close))}? " if close else ""
            raise ValueError(
                f"unknown Meta-World env name {env_name!r} for ML1: {hint}valid names look like "
                f"'reach-v3', 'push-v3', 'pick-place-v3'; all {len(ENV_NAMES)} are in "
                f"metabench.tasks.metaworld.ENV_NAMES (metaworld.env_dict.ALL_V3_ENVIRONMENTS)"
            )
    elif env_name is not None:
        raise ValueError(
            f"env_name is only for ML1; {benchmark} has a fixed set of env classes, "
            f"so drop env_name={env_name!r} (or use benchmark='ML1')"
        )
    if (
        isinstance(seed, bool)
        or not isinstance(seed, (int, np.integer))
        or not 0 <= seed <= _MAX_SEED
    ):
        raise ValueError(f"seed must be an integer in [0, {_MAX_SEED}], got {seed!r}")


@functools.lru_cache(maxsize=16)
def load_benchmark(benchmark: str, env_name: str | None = None, seed: int = 0) -> Any:
    """The ``metaworld.ML1/ML10/ML45`` object for ``seed``, built once per process.

    The seed fixes every goal position: Meta-World seeds the global ``np.random`` with it while
    drawing goals and restores the previous state afterwards.
    """
    _check_benchmark_args(benchmark, env_name, "train", seed)
    if benchmark == "ML1":
        return metaworld.ML1(env_name, seed=int(seed))
    return getattr(metaworld, benchmark)(seed=int(seed))


def _split_of(
    benchmark: str, env_name: str | None, split: str, seed: int
) -> tuple[dict[str, type[SawyerXYZEnv]], list[MetaWorldTask]]:
    """The ``(classes, tasks)`` of one split, after checking the arguments."""
    _check_benchmark_args(benchmark, env_name, split, seed)
    bench = load_benchmark(benchmark, env_name, int(seed))
    if split == "train":
        return dict(bench.train_classes), list(bench.train_tasks)
    return dict(bench.test_classes), list(bench.test_tasks)


def _describe(benchmark: str, env_name: str | None, split: str, seed: int) -> str:
    """Name a split in messages: ``"ML10 train (seed 0)"``, ``"ML1 'reach-v3' test (seed 0)"``."""
    name = f"ML1 {env_name!r}" if benchmark == "ML1" else benchmark
    return f"{name} {split} (seed {seed})"


def _observation_space(classes: Sequence[type[SawyerXYZEnv]]) -> Box:
    """The elementwise union of the goal-hidden observation spaces of ``classes``.

    Mirrors ``SawyerXYZEnv.sawyer_observation_space`` with ``partially_observable=True`` (hand
    position and gripper opening, 14 object floats, the same 18 for the previous frame, a zero goal)
    without building a MuJoCo model per class; :meth:`MetaWorldTaskEnv._env_for` checks the real
    space of every instance it builds against it.
    """
    lows, highs = [], []
    for cls in classes:
        hand = cls._HAND_SPACE
        obj = np.full(14, np.inf)
        frame_low = np.concatenate((hand.low, [-1.0], -obj))
        frame_high = np.concatenate((hand.high, [1.0], obj))
        lows.append(np.concatenate((frame_low, frame_low, np.zeros(3))))
        highs.append(np.concatenate((frame_high, frame_high, np.zeros(3))))
    return Box(np.min(lows, axis=0), np.max(highs, axis=0), dtype=np.float64)


# -- the env -------------------------------------------------------------------------------------
class _TaskUnpickler(pickle.Unpickler):
    """Reads a ``metaworld.Task``'s data, which Meta-World pickles, without running code.

    Task data reaches metabench from files (a run's ``config.json`` holds its test tasks), and
    plain ``pickle.loads`` would run whatever a crafted file asks. Meta-World's task data needs
    only NumPy's array reconstruction and the split's own env classes, so nothing else is found;
    an env class is then only referred to, never constructed, by the pickle.
    """

    _NUMPY: ClassVar[frozenset[tuple[str, str]]] = frozenset(
        {
            ("numpy._core.multiarray", "_reconstruct"),
            ("numpy.core.multiarray", "_reconstruct"),  # pickled by NumPy 1.x
            ("numpy", "ndarray"),
            ("numpy", "dtype"),
        }
    )

    def __init__(self, file: io.BytesIO, env_classes: Iterable[type[SawyerXYZEnv]]) -> None:
        super().__init__(file)
        self._classes = {(cls.__module__, cls.__qualname__): cls for cls in env_classes}

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in self._NUMPY:
            return super().find_class(module, name)
        if (module, name) in self._classes:
            return self._classes[(module, name)]
        raise pickle.UnpicklingError(
            f"refused {module}.{name}: Meta-World task data holds only NumPy arrays and the "
            f"split's env classes"
        )


class MetaWorldTaskEnv(CheckedKeywords, EzPickleWithTask, gym.Env[np.ndarray, np.ndarray]):
    """One Gymnasium env over a Meta-World benchmark split, following the task protocol.

    A pickled or deep-copied env keeps its task (:class:`~metabench.tasks.base.EzPickleWithTask`).

    :param benchmark: ``"ML1"``, ``"ML10"`` or ``"ML45"``.
    :param env_name: the Meta-World env of ML1 (``"reach-v3"``...); must be ``None`` otherwise.
    :param split: ``"train"`` or ``"test"`` classes and goals.
    :param seed: the benchmark seed: the same seed gives the same task list and goal positions.
        (ML1 draws its test goals with ``seed + 1``, so ML1's test tasks for seed ``s`` are its
        train tasks for seed ``s + 1``.)
    :param horizon: episode length, at most Meta-World's ``max_path_length`` (500).
    :param reward_function_version: Meta-World's ``"v2"`` (default) or ``"v1"`` rewards.
    :param render_mode: passed to the Sawyer envs (``"rgb_array"``, ``"human"``, ...).
    :param lean: step the Sawyer envs with :func:`~metabench.tasks.metaworld.lean.make_lean`'s
        leaner Python (bit-identical observations, rewards and infos, about 1.5x faster on
        ML10); ``False`` runs Meta-World's code unchanged.

    Example::

        >>> env = MetaWorldTaskEnv("ML1", env_name="reach-v3", horizon=10)
        >>> task = env.sample_tasks(1, np.random.default_rng(0))[0]
        >>> obs, info = env.reset(seed=0, options={"task": task})
        >>> obs.shape, info["task"].env_name
        ((39,), 'reach-v3')
    """

    metadata: dict[str, Any] = {  # noqa: RUF012 - Gymnasium's convention
        "render_modes": ["human", "rgb_array", "depth_array"],
        "render_fps": 80,
    }

    def __init__(
        self,
        benchmark: str,
        env_name: str | None = None,
        split: str = "train",
        seed: int = 0,
        horizon: int = MAX_PATH_LENGTH,
        reward_function_version: str = "v2",
        render_mode: str | None = None,
        lean: bool = True,
    ) -> None:
        if (
            isinstance(horizon, bool)
            or not isinstance(horizon, (int, np.integer))
            or not 1 <= horizon <= MAX_PATH_LENGTH
        ):
            raise ValueError(
                f"horizon must be an integer in [1, {MAX_PATH_LENGTH}] (Meta-World's "
                f"max_path_length), got {horizon!r}"
            )
        if reward_function_version not in REWARD_FUNCTION_VERSIONS:
            raise ValueError(
                f"reward_function_version must be 'v1' or 'v2', got {reward_function_version!r}"
            )
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(
                f"render_mode must be None or one of {self.metadata['render_modes']}, "
                f"got {render_mode!r}"
            )
        self.classes, self.tasks = _split_of(benchmark, env_name, split, seed)
        utils.EzPickle.__init__(
            self,
            benchmark=benchmark,
            env_name=env_name,
            split=split,
            seed=seed,
            horizon=horizon,
            reward_function_version=reward_function_version,
            render_mode=render_mode,
            lean=lean,
        )
        self.benchmark = benchmark
        self.env_name = env_name
        self.split = split
        self.benchmark_seed = int(seed)
        self.horizon = int(horizon)
        self.reward_function_version = reward_function_version
        self.render_mode = render_mode
        self.lean = bool(lean)
        self.observation_space = _observation_space(list(self.classes.values()))
        self.action_space = Box(-1.0, 1.0, shape=(4,), dtype=np.float32)
        self._envs: dict[str, SawyerXYZEnv] = {}
        self._applied: dict[str, MetaWorldTask] = {}  # the task each instance was last set to
        self._reset_seed: int | None = None  # the last seed given to reset
        self._reseed: set[str] = set()  # instances to seed from it when next used
        self._env: SawyerXYZEnv | None = None  # the instance of the running episode
        self._task: MetaWorldTask | None = None
        self._task_drawn = False
        """Whether the env drew its task itself (a seeded reset draws it again)."""
        self._steps = 0
        self._guard = EpisodeGuard()

    # -- task protocol -------------------------------------------------------------------------
    @property
    def task(self) -> MetaWorldTask | None:
        """The task set last: the current one, or the one the next ``reset`` switches to."""
        return self._task

    @property
    def class_names(self) -> list[str]:
        """The env names of this split's classes, in Meta-World's order."""
        return list(self.classes)

    @property
    def sawyer_env(self) -> SawyerXYZEnv | None:
        """The Sawyer env of the running episode (``None`` before the first ``reset``)."""
        return self._env

    def sample_tasks(self, n: int, rng: np.random.Generator | None = None) -> list[Task]:
        """Draw ``n`` distinct tasks uniformly from this split (``rng`` defaults to ``np_random``).

        For meta-batches spread evenly over the classes use :class:`MetaWorldTaskSampler`.
        """
        check_n_tasks(n)
        if n > len(self.tasks):
            raise ValueError(
                f"cannot draw {n} distinct tasks from the {len(self.tasks)} of {self._describe()}: "
                f"ask for at most {len(self.tasks)} or use "
                f"MetaWorldTaskSampler(..., replace=True)"
            )
        rng = self.np_random if rng is None else rng
        return [self.tasks[i] for i in rng.choice(len(self.tasks), size=n, replace=False)]

    def set_task(self, task: Task) -> None:
        """Switch to ``task``, a ``metaworld.Task`` of this split, at the next ``reset``."""
        self._task = self._validated(task)
        self._task_drawn = False

    def _describe(self) -> str:
        return _describe(self.benchmark, self.env_name, self.split, self.benchmark_seed)

    def _validated(self, task: Task) -> MetaWorldTask:
        if not isinstance(task, MetaWorldTask) or not isinstance(task.data, bytes):
            raise InvalidTaskError(
                f"{type(self).__name__} expects a metaworld.Task, got {type(task).__name__}: "
                f"use env.sample_tasks(n) or MetaWorldTaskSampler to make valid tasks"
            )
        if task.env_name not in self.classes:
            raise InvalidTaskError(
                f"task of Meta-World env {task.env_name!r} is not in {self._describe()}, whose "
                f"classes are {', '.join(self.classes)}; a task from another split or benchmark "
                f"needs an env built with that split/benchmark"
            )
        try:
            data = _TaskUnpickler(io.BytesIO(task.data), self.classes.values()).load()
            env_cls = data["env_cls"]
            goal_hidden = data["partially_observable"]
        except Exception as error:
            raise InvalidTaskError(
                f"task data of {task.env_name!r} is not a Meta-World task ({error!r}): "
                f"use env.sample_tasks(n) to make valid tasks"
            ) from error
        if env_cls is not self.classes[task.env_name]:
            raise InvalidTaskError(
                f"task says {task.env_name!r} but its data is for {env_cls!r}: "
                f"use env.sample_tasks(n) to make valid tasks"
            )
        if goal_hidden is not True:
            raise InvalidTaskError(
                "task shows the goal in the observation (a multi-task MT benchmark task); "
                "meta-learning needs the ML benchmark's goal-hidden tasks: use env.sample_tasks(n)"
            )
        return task

    def _env_for(self, env_name: str) -> SawyerXYZEnv:
        """The Sawyer env of class ``env_name``, built on first use."""
        env = self._envs.get(env_name)
        if env is None:
            env = self.classes[env_name](
                reward_function_version=self.reward_function_version,
                render_mode=self.render_mode,  # type: ignore[arg-type]  # checked in __init__
            )
            space = env.observation_space
            own = self.observation_space
            assert isinstance(space, Box) and isinstance(own, Box)
            if not (np.all(space.low >= own.low) and np.all(space.high <= own.high)):
                raise RuntimeError(
                    f"Meta-World's observation space of {env_name!r} is not inside "
                    f"{type(self).__name__}.observation_space: the installed Meta-World is not "
                    f"the 3.x this module was written for"
                )
            if self.lean:
                make_lean(env)
            self._envs[env_name] = env
        return env

    # -- Gymnasium API -------------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        task = None if not options or "task" not in options else self._validated(options["task"])
        super().reset(seed=seed)
        if task is not None:
            self._task, self._task_drawn = task, False
        elif self._task is None or (seed is not None and self._task_drawn):
            # drawn again on a seeded reset, so that reset(seed=s) determines what follows
            self._task = self.tasks[int(self.np_random.integers(len(self.tasks)))]
            self._task_drawn = True
        env = self._env_for(self._task.env_name)
        if self._applied.get(self._task.env_name) != self._task:
            env.set_task(self._task)
            self._applied[self._task.env_name] = self._task
        if seed is not None:
            self._reset_seed = int(seed)
            self._reseed = set(self.classes)
        if self._task.env_name in self._reseed:
            # Sawyer envs ignore reset's seed (their ``seed()`` method reseeds them), so seed each
            # from ours when it is next used; our ``np_random`` stream is left untouched.
            assert self._reset_seed is not None
            index = self.class_names.index(self._task.env_name)
            entropy = combined_seed_sequence(self._reset_seed, index)
            env.np_random = np.random.Generator(np.random.PCG64(entropy))
            self._reseed.discard(self._task.env_name)
        obs, _ = env.reset()
        self._env = env
        self._steps = 0
        self._guard.active = True
        return obs, {"task": self._task}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self._guard.check()
        action = check_action(action, self.action_space)
        assert self._env is not None  # the guard is active only after a reset
        obs, reward, _, _, info = self._env.step(action)
        self._steps += 1
        truncated = self._steps >= self.horizon
        if truncated:
            self._guard.active = False
        return obs, float(reward), False, truncated, info

    def render(self) -> Any:
        """Render the running episode's Sawyer env (``None`` before the first ``reset``)."""
        return None if self._env is None else self._env.render()

    def close(self) -> None:
        for env in self._envs.values():
            env.close()
        self._envs.clear()
        self._applied.clear()
        self._reseed = set() if self._reset_seed is None else set(self.classes)
        self._env = None
        self._guard.active = False


class ML1Env(MetaWorldTaskEnv):
    """Meta-World ML1: the 50 goals of one env (``env_name``), train and test goals differ."""

    fixed_keywords: ClassVar[Mapping[str, str]] = {"benchmark": "ML1"}

    def __init__(self, env_name: str, split: str = "train", seed: int = 0, **kwargs: Any) -> None:
        super().__init__("ML1", env_name=env_name, split=split, seed=seed, **kwargs)
        utils.EzPickle.__init__(self, env_name=env_name, split=split, seed=seed, **kwargs)


class ML10Env(MetaWorldTaskEnv):
    """Meta-World ML10: 10 train classes, 5 held-out test classes, 50 goals each."""

    fixed_keywords: ClassVar[Mapping[str, str]] = {"benchmark": "ML10"}

    def __init__(self, split: str = "train", seed: int = 0, **kwargs: Any) -> None:
        super().__init__("ML10", split=split, seed=seed, **kwargs)
        utils.EzPickle.__init__(self, split=split, seed=seed, **kwargs)


class ML45Env(MetaWorldTaskEnv):
    """Meta-World ML45: 45 train classes, 5 held-out test classes, 50 goals each."""

    fixed_keywords: ClassVar[Mapping[str, str]] = {"benchmark": "ML45"}

    def __init__(self, split: str = "train", seed: int = 0, **kwargs: Any) -> None:
        super().__init__("ML45", split=split, seed=seed, **kwargs)
        utils.EzPickle.__init__(self, split=split, seed=seed, **kwargs)


# -- the sampler ---------------------------------------------------------------------------------
def _first_goals(tasks: list[MetaWorldTask], n: int, where: str) -> list[MetaWorldTask]:
    """The first ``n`` tasks of each class of ``tasks``, in their order."""
    check_count("goals_per_class", n)
    counts = collections.Counter(task.env_name for task in tasks)
    fewest = min(counts.values())
    if n > fewest:
        raise ValueError(
            f"goals_per_class={n} is more than the {fewest} goals per class of {where}: "
            f"ask for at most {fewest}"
        )
    seen: collections.Counter[str] = collections.Counter()
    kept = []
    for task in tasks:
        seen[task.env_name] += 1
        if seen[task.env_name] <= n:
            kept.append(task)
    return kept


class MetaWorldTaskSampler(TaskSampler):
    """Draws meta-batches of a Meta-World split, spread evenly across its classes.

    With ``balanced=True`` a meta-batch of ``n`` holds ``n / k`` tasks of each of the split's ``k``
    classes, grouped by class in Meta-World's class order (as ``metaworld.make_ml_envs`` lays out
    its vector env), so ``n`` must be a multiple of ``k``. With ``balanced=False`` tasks are drawn
    uniformly from the whole split. Without replacement the tasks of one meta-batch are distinct.

    :param benchmark: ``"ML1"``, ``"ML10"`` or ``"ML45"``; ``env_name`` and ``seed`` as for
        :class:`MetaWorldTaskEnv` (the same seed gives the same tasks as the env).
    :param goals_per_class: keep only the first ``goals_per_class`` goals of each class, in
        Meta-World's order (``None``: all 50). This is ``total_tasks_per_cls`` of Meta-World's
        ``make_vec``, which Meta-World+ sets to 40 for its ML10 and ML45 meta-test.

    Example::

        >>> sampler = MetaWorldTaskSampler("ML1", env_name="reach-v3")
        >>> len(sampler.sample(5, np.random.default_rng(0)))
        5
    """

    def __init__(
        self,
        benchmark: str,
        split: str = "train",
        env_name: str | None = None,
        seed: int = 0,
        *,
        replace: bool = False,
        balanced: bool = True,
        goals_per_class: int | None = None,
    ) -> None:
        classes, tasks = _split_of(benchmark, env_name, split, seed)
        if goals_per_class is not None:
            where = _describe(benchmark, env_name, split, seed)
            tasks = _first_goals(tasks, goals_per_class, where)
        self.benchmark = benchmark
        self.split = split
        self.env_name = env_name
        self.benchmark_seed = int(seed)
        self.replace = bool(replace)
        self.balanced = bool(balanced)
        self.class_names = list(classes)
        self.tasks = tasks
        self.tasks_by_class = {name: [t for t in tasks if t.env_name == name] for name in classes}
        self._flat = ListTaskSampler(tasks, replace=self.replace)

    def _describe(self) -> str:
        return _describe(self.benchmark, self.env_name, self.split, self.benchmark_seed)

    @property
    def max_batch_size(self) -> int | None:
        """The largest meta-batch without replacement (``None``: unbounded with replacement)."""
        if self.replace:
            return None
        if not self.balanced:
            return len(self.tasks)
        return len(self.class_names) * min(len(t) for t in self.tasks_by_class.values())

    def check_batch_size(self, n: int) -> None:
        check_n_tasks(n)
        if not self.balanced:
            self._flat.check_batch_size(n)
            return
        k = len(self.class_names)
        top = self.max_batch_size
        if n % k == 0 and (top is None or n <= top):
            return
        where = f"the {len(self.tasks)} tasks of {self._describe()}"
        if k == 1:  # ML1: one class, so only the number of goals limits a batch
            raise ValueError(
                f"cannot draw {n} distinct tasks from {where}: valid sizes are 1 to {top}; "
                f"or pass replace=True"
            )
        if top is None:
            sizes = f"the multiples of {k} ({k}, {2 * k}, {3 * k}, ...)"
        else:
            listed = ", ".join(str(m) for m in range(k, top + 1, k))
            if top // k > 4:
                listed = f"{k}, {2 * k}, {3 * k}, ..., {top}"
            sizes = f"the multiples of {k} up to {top} ({listed})"
        distinct = "" if self.replace else " distinct"
        raise ValueError(
            f"cannot draw a balanced meta-batch of {n} from {where}: it takes the same number "
            f"of{distinct} tasks from each of the {k} classes, so valid sizes are {sizes}; "
            f"or pass balanced=False{'' if self.replace else ' or replace=True'}"
        )

    def task_groups(self) -> list[list[Task]]:
        """Each class's tasks in Meta-World's order (balanced), else all tasks as one class."""
        if not self.balanced:
            return [list(self.tasks)]
        return [list(self.tasks_by_class[name]) for name in self.class_names]

    def sample(self, n: int, rng: np.random.Generator) -> list[Task]:
        """``n`` tasks drawn with ``rng``; balanced ones are grouped by class."""
        if not self.balanced:
            return self._flat.sample(n, rng)
        self.check_batch_size(n)
        per_class = n // len(self.class_names)
        batch: list[Task] = []
        for name in self.class_names:
            pool = self.tasks_by_class[name]
            batch.extend(
                pool[i] for i in rng.choice(len(pool), size=per_class, replace=self.replace)
            )
        return batch
