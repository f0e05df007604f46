"""Meta-test: explore a held-out task, adapt to it, then act with the adapted policy.

:class:`MetaEvaluator` runs the meta-test protocol on a fixed list of test tasks and talks only to
the :class:`~metabench.algos.base.MetaRLAlgorithm` interface. For each test task it runs one
:class:`~metabench.wrappers.Trial` of ``exploration_episodes + test_episodes`` episodes, seen
through the algorithm's :meth:`~metabench.algos.base.MetaRLAlgorithm.wrap_env`:

1. ``policy = algo.get_exploration_policy()`` acts for ``exploration_episodes`` episodes;
2. ``adapted = algo.adapt_policy(policy, episodes)`` with those episodes as an
   :class:`~metabench.data.EpisodeBatch`;
3. ``adapted`` acts for ``test_episodes`` more episodes *of the same trial* (the trial is not
   reset in between, so RL2's recurrent state and its ``done`` flag carry over; a MAML-style
   adapted policy simply acts).

``policy.reset()`` (or ``adapted.reset()``) is called at the start of every episode.

The defaults follow Meta-World's protocol (10 adaptation episodes, then 3 evaluation episodes);
:meth:`MetaEvaluator.garage_protocol` gives garage's (10 exploration episodes, 1 test episode).

The result, :class:`MetaTestResult`, records the exact test tasks (replayable, see
:func:`task_from_json`), the return and success of every episode of every task (the adaptation
curve) and the post-adaptation numbers. Success is keyed by the task's index in the test task
list, never by env name (Meta-World's own ``metalearning_evaluation`` keys it by name, which
merges all the tasks of ML1 into one).
"""

from __future__ import annotations

import base64
import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

from metabench.algos.base import MetaRLAlgorithm, Policy
from metabench.data import EpisodeBatch, EpisodeRecorder
from metabench.metaworld_count import CountedEpisode, MetaWorldCount, metaworld_count, task_class
from metabench.tasks.base import Task
from metabench.validation import check_count, renamed_keyword
from metabench.wrappers.trial import EPISODE_END, FINAL_OBSERVATION, Trial

__all__ = [
    "GARAGE_PROTOCOL",
    "METAWORLD_PROTOCOL",
    "MetaEvaluator",
    "MetaTestResult",
    "TaskResult",
    "task_from_json",
    "task_to_json",
]

METAWORLD_PROTOCOL = {"exploration_episodes": 10, "test_episodes": 3}
"""Meta-World's meta-test: 10 adaptation episodes, then 3 evaluation episodes per test task."""
GARAGE_PROTOCOL = {"exploration_episodes": 10, "test_episodes": 1}
"""garage's ``MetaEvaluator`` defaults: 10 exploration episodes, then 1 test episode."""

RESULT_FORMAT = "metabench.MetaTestResult"
"""The ``"format"`` tag of :meth:`MetaTestResult.to_dict`."""
RESULT_VERSION = 1


# -- tasks as JSON -------------------------------------------------------------------------------
def _is_metaworld_task(task: Any) -> bool:
    """Duck-typed ``metaworld.types.Task`` check (importing Meta-World here would be slow)."""
    return (
        isinstance(task, tuple)
        and isinstance(getattr(task, "env_name", None), str)
        and isinstance(getattr(task, "data", None), bytes)
    )


def _jsonable(value: Any, where: str) -> Any:
    """``value`` with numpy arrays and scalars turned into lists and Python numbers."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Mapping):
        result = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"{where} has a non-string key {key!r}; JSON keys are strings")
            result[key] = _jsonable(item, f"{where}[{key!r}]")
        return result
    if isinstance(value, (list, tuple)):
        return [_jsonable(item, f"{where}[{i}]") for i, item in enumerate(value)]
    raise ValueError(
        f"{where} is a {type(value).__name__}, which a result file cannot record; "
        f"tasks must be dicts of numbers, strings and lists, or metaworld.Task values"
    )


def task_to_json(task: Task) -> Any:
    """The JSON form of a task: dicts as they are (numpy values as lists), Meta-World tasks as
    ``{"env_name": ..., "data": base64 of task.data}`` (Meta-World's own checkpoint format).

    :raises ValueError: for any other kind of task.
    """
    if _is_metaworld_task(task):
        return {"env_name": task.env_name, "data": base64.b64encode(task.data).decode("ascii")}
    if not isinstance(task, Mapping):
        raise ValueError(
            f"cannot record a task of type {type(task).__name__} ({task!r}): metabench records "
            f"dict tasks (HalfCheetah, PointGoal) and metaworld.Task values"
        )
    return _jsonable(task, "task")


def task_from_json(data: Any) -> Task:
    """Inverse of :func:`task_to_json`: the task to pass to ``set_task`` again.

    A dict with exactly the keys ``env_name`` and ``data`` (a string) becomes a
    ``metaworld.Task``; any other dict is returned as a new dict.
    """
    if not isinstance(data, Mapping):
        raise ValueError(f"a recorded task is a JSON object, got {type(data).__name__}: {data!r}")
    if set(data) == {"env_name", "data"} and isinstance(data["data"], str):
        from metaworld.types import Task as MetaWorldTask  # only Meta-World results need it

        return MetaWorldTask(env_name=data["env_name"], data=base64.b64decode(data["data"]))
    return dict(data)


# -- results -------------------------------------------------------------------------------------
def _mean(values: Sequence[float]) -> float:
    return float(np.mean(values)) if len(values) else math.nan


@dataclasses.dataclass
class TaskResult:
    """What happened on one test task: every episode of its trial, in order.

    :param task_index: the task's index in the evaluator's ``test_tasks``; results are keyed by
        it, so two tasks of the same env (two ML1 goals) never share a success count.
    :param task: the exact task, in JSON form (:func:`task_to_json`; restore it with
        :func:`task_from_json` or :meth:`restore_task`).
    :param n_exploration_eps: how many of the episodes came before adaptation.
    :param episode_returns: undiscounted return of each episode, exploration then test.
    :param episode_lengths: number of steps of each episode.
    :param episode_successes: whether any step of each episode reported ``info["success"]``;
        ``None`` if the env reports no success at all (HalfCheetah).
    :param episode_success_steps: the step (from 1) of each episode's first success, ``None``
        where none succeeded: its length where an episode ends at its first success, as in
        Meta-World's evaluation (``None`` if success is not reported).
    :param episode_returns_to_success: each episode's return up to and including its first
        success (its whole return where none succeeded).
    """

    task_index: int
    task: Any
    n_exploration_eps: int
    episode_returns: list[float]
    episode_lengths: list[int]
    episode_successes: list[bool] | None = None
    episode_success_steps: list[int | None] | None = None
    episode_returns_to_success: list[float] | None = None

    def restore_task(self) -> Task:
        """The recorded task as a value ``set_task`` accepts."""
        return task_from_json(self.task)

    @property
    def test_returns(self) -> list[float]:
        """Returns of the episodes after adaptation."""
        return self.episode_returns[self.n_exploration_eps :]

    @property
    def test_return(self) -> float:
        """Mean return of the episodes after adaptation."""
        return _mean(self.test_returns)

    @property
    def test_success(self) -> bool | None:
        """True if any episode after adaptation succeeded (``None`` if success is not reported)."""
        if self.episode_successes is None:
            return None
        return any(self.episode_successes[self.n_exploration_eps :])

    @property
    def test_episode_success_rate(self) -> float | None:
        """Fraction of the episodes after adaptation that succeeded."""
        if self.episode_successes is None:
            return None
        return _mean([float(s) for s in self.episode_successes[self.n_exploration_eps :]])

    def counted_test_episodes(self) -> list[CountedEpisode] | None:
        """The test episodes as Meta-World's evaluation ends them, at their first success
        (``None`` without first-success steps)."""
        if self.episode_success_steps is None or self.episode_returns_to_success is None:
            return None
        first = self.n_exploration_eps
        return [
            CountedEpisode(length, False, ret)
            if step is None
            else CountedEpisode(step, True, to_success)
            for length, ret, step, to_success in zip(
                self.episode_lengths[first:],
                self.episode_returns[first:],
                self.episode_success_steps[first:],
                self.episode_returns_to_success[first:],
                strict=True,
            )
        ]

    def to_dict(self) -> dict[str, Any]:
        """JSON-able dict; the derived ``test_*`` entries are for readers, not read back."""
        record = {
            "task_index": self.task_index,
            "task": self.task,
            "n_exploration_eps": self.n_exploration_eps,
            "episode_returns": list(self.episode_returns),
            "episode_lengths": list(self.episode_lengths),
            "episode_successes": (
                None if self.episode_successes is None else list(self.episode_successes)
            ),
            "test_return": self.test_return,
            "test_success": self.test_success,
        }
        if self.episode_success_steps is not None:  # results from before these keep their form
            record["episode_success_steps"] = list(self.episode_success_steps)
            record["episode_returns_to_success"] = list(self.episode_returns_to_success or [])
        return record

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TaskResult:
        successes = data.get("episode_successes")
        return cls(
            task_index=int(data["task_index"]),
            task=data["task"],
            n_exploration_eps=int(data["n_exploration_eps"]),
            episode_returns=[float(r) for r in data["episode_returns"]],
            episode_lengths=[int(n) for n in data["episode_lengths"]],
            episode_successes=None if successes is None else [bool(s) for s in successes],
            episode_success_steps=data.get("episode_success_steps"),
            episode_returns_to_success=data.get("episode_returns_to_success"),
        )


@dataclasses.dataclass
class MetaTestResult:
    """The outcome of :meth:`MetaEvaluator.evaluate`: per task and aggregated over tasks.

    Aggregates are computed from :attr:`tasks` (so they can never disagree with them):

    * :attr:`return_per_episode`, :attr:`success_rate_per_episode`: the adaptation curve, the
      mean over tasks at each episode index (``0 .. n_exploration_eps + n_test_episodes - 1``);
    * :attr:`test_return`: the mean over tasks of each task's mean post-adaptation return;
    * :attr:`test_success_rate`: the fraction of tasks that **succeeded after adaptation, a task
      counting as a success if any of its test episodes succeeded** (an episode succeeds if any
      of its steps reports ``info["success"]``);
    * :attr:`test_episode_success_rate`: the fraction of all test episodes that succeeded (the
      count of garage's evaluator); with one test episode the two rates are equal;
    * :attr:`metaworld`: with ``metaworld_envs_per_class`` set, Meta-World's own count of the
      same episodes (:mod:`metabench.metaworld_count`): the number Meta-World+ reports, higher
      than :attr:`test_episode_success_rate`, since it counts the first episodes to end;
    * :attr:`n_env_steps`: env steps used by the whole evaluation.

    Success rates only count tasks whose env reports success; they are ``None`` if none does.
    """

    algorithm: str
    env: str
    n_exploration_eps: int
    n_test_episodes: int
    seed: int
    tasks: list[TaskResult]
    metaworld_envs_per_class: int | None = None

    @property
    def n_tasks(self) -> int:
        return len(self.tasks)

    def _with_success(self) -> list[TaskResult]:
        return [t for t in self.tasks if t.episode_successes is not None]

    @property
    def return_per_episode(self) -> list[float]:
        """Mean return over tasks at each episode index: the adaptation curve."""
        n = self.n_exploration_eps + self.n_test_episodes
        return [_mean([t.episode_returns[i] for t in self.tasks]) for i in range(n)]

    @property
    def success_rate_per_episode(self) -> list[float] | None:
        """Fraction of tasks whose episode at each index succeeded (``None``: not reported)."""
        tasks = self._with_success()
        if not tasks:
            return None
        n = self.n_exploration_eps + self.n_test_episodes
        return [
            _mean([float(t.episode_successes[i]) for t in tasks if t.episode_successes])
            for i in range(n)
        ]

    @property
    def test_return(self) -> float:
        """Post-adaptation mean return: mean over tasks of the mean test-episode return."""
        return _mean([t.test_return for t in self.tasks])

    @property
    def test_success_rate(self) -> float | None:
        """Fraction of tasks with at least one successful test episode (``None``: not reported)."""
        tasks = self._with_success()
        return _mean([float(bool(t.test_success)) for t in tasks]) if tasks else None

    @property
    def test_episode_success_rate(self) -> float | None:
        """Fraction of test episodes that succeeded, over all tasks (garage's count; Meta-World's
        is :attr:`metaworld`)."""
        tasks = self._with_success()
        if not tasks:
            return None
        return _mean(
            [
                float(s)
                for t in tasks
                if t.episode_successes
                for s in t.episode_successes[t.n_exploration_eps :]
            ]
        )

    @property
    def metaworld(self) -> MetaWorldCount | None:
        """Meta-World's count of the test episodes (``None`` without ``metaworld_envs_per_class``
        or without first-success steps)."""
        episodes = [t.counted_test_episodes() for t in self.tasks]
        if self.metaworld_envs_per_class is None or any(e is None for e in episodes):
            return None
        return metaworld_count(
            [task_class(t.task) for t in self.tasks],
            [e for e in episodes if e is not None],
            self.metaworld_envs_per_class,
        )

    @property
    def n_env_steps(self) -> int:
        """Env steps taken by the evaluation, over all tasks and episodes."""
        return sum(sum(t.episode_lengths) for t in self.tasks)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict. ``aggregate`` repeats the derived numbers for readers of the file;
        :meth:`from_dict` recomputes them from ``tasks``."""
        record: dict[str, Any] = {
            "format": RESULT_FORMAT,
            "version": RESULT_VERSION,
            "algorithm": self.algorithm,
            "env": self.env,
            "n_exploration_eps": self.n_exploration_eps,
            "n_test_episodes": self.n_test_episodes,
            "seed": self.seed,
            "tasks": [t.to_dict() for t in self.tasks],
            "aggregate": {
                "return_per_episode": self.return_per_episode,
                "success_rate_per_episode": self.success_rate_per_episode,
                "test_return": self.test_return,
                "test_success_rate": self.test_success_rate,
                "test_episode_success_rate": self.test_episode_success_rate,
                "n_env_steps": self.n_env_steps,
                "n_tasks": self.n_tasks,
            },
        }
        count = self.metaworld
        if count is not None:  # recorded only when there is one: other results keep their form
            record["metaworld_envs_per_class"] = self.metaworld_envs_per_class
            record["aggregate"]["metaworld_success_rate"] = count.success_rate
            record["aggregate"]["metaworld_return"] = count.mean_return
            record["aggregate"]["metaworld_success_rate_per_class"] = count.success_rate_per_class
        return record

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MetaTestResult:
        """Rebuild a result from :meth:`to_dict` output (e.g. after ``json.load``)."""
        if data.get("format") != RESULT_FORMAT:
            raise ValueError(
                f"not a metabench meta-test result: 'format' is {data.get('format')!r}, "
                f"expected {RESULT_FORMAT!r} (write results with MetaTestResult.to_dict)"
            )
        if data.get("version") != RESULT_VERSION:
            raise ValueError(
                f"meta-test result version {data.get('version')!r} is not supported; "
                f"this metabench reads version {RESULT_VERSION}"
            )
        return cls(
            algorithm=str(data["algorithm"]),
            env=str(data["env"]),
            n_exploration_eps=int(data["n_exploration_eps"]),
            n_test_episodes=int(data["n_test_episodes"]),
            seed=int(data["seed"]),
            tasks=[TaskResult.from_dict(t) for t in data["tasks"]],
            metaworld_envs_per_class=data.get("metaworld_envs_per_class"),
        )


# -- the evaluator -------------------------------------------------------------------------------
class _EndFlags(gym.Wrapper[Any, Any, Any, Any]):
    """Remembers whether the last step terminated, which a :class:`Trial` hides at inner ends."""

    terminated = False

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.terminated = bool(terminated)
        return obs, reward, terminated, truncated, info


def _check_count(name: str, value: Any, fix: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}: {fix}")
    return int(value)


class MetaEvaluator:
    """Meta-tests a :class:`~metabench.algos.base.MetaRLAlgorithm` on fixed test tasks.

    :param make_task_env: builds the task env (e.g. ``lambda: PointGoalEnv()``,
        ``lambda: ML1Env("reach-v3", split="test")``); called once, on the first
        :meth:`evaluate`, and the env is reused for every task and every later call.
    :param test_tasks: the held-out tasks, each evaluated once, in order. Record them with the
        result (the result does): re-sampled tasks make numbers incomparable.
    :param exploration_episodes: episodes with the exploration policy before adaptation
        (default: Meta-World's 10).
    :param test_episodes: episodes with the adapted policy after adaptation (default:
        Meta-World's 3).
    :param seed: the env of task ``i`` is reset with a seed derived from ``(seed, i)``, so a
        result is reproducible and does not depend on which tasks come before.
    :param n_exploration_eps: the old name of ``exploration_episodes`` (goes in the next
        release).
    :param n_test_episodes: the old name of ``test_episodes`` (goes in the next release).

    Example::

        >>> from metabench.algos.nop import NOP
        >>> from metabench.tasks.toy import PointGoalEnv
        >>> evaluator = MetaEvaluator(PointGoalEnv, [{"goal": [0.3, 0.0]}], 2, 1)
        >>> result = evaluator.evaluate(NOP(PointGoalEnv().action_space))
        >>> round(result.test_return, 6), result.test_success_rate, result.n_env_steps
        (-6.0, 0.0, 60)
    """

    def __init__(
        self,
        make_task_env: Callable[[], gym.Env[Any, Any]],
        test_tasks: Sequence[Task],
        exploration_episodes: int | None = None,
        test_episodes: int | None = None,
        seed: int = 0,
        *,
        metaworld_envs_per_class: int | None = None,
        n_exploration_eps: int | None = None,
        n_test_episodes: int | None = None,
    ) -> None:
        if not callable(make_task_env):
            raise ValueError(
                f"make_task_env must be a function returning a task env (e.g. "
                f"lambda: PointGoalEnv()), got {type(make_task_env).__name__}"
            )
        # an error names the keyword the caller used
        explore_name = "exploration_episodes" if n_exploration_eps is None else "n_exploration_eps"
        test_name = "test_episodes" if n_test_episodes is None else "n_test_episodes"
        exploration_episodes = renamed_keyword(
            "exploration_episodes", exploration_episodes, "n_exploration_eps", n_exploration_eps
        )
        test_episodes = renamed_keyword(
            "test_episodes", test_episodes, "n_test_episodes", n_test_episodes
        )
        self.exploration_episodes = _check_count(
            explore_name,
            METAWORLD_PROTOCOL["exploration_episodes"]
            if exploration_episodes is None
            else exploration_episodes,
            "adaptation needs at least one exploration episode (Meta-World and garage use 10)",
        )
        self.test_episodes = _check_count(
            test_name,
            METAWORLD_PROTOCOL["test_episodes"] if test_episodes is None else test_episodes,
            "at least one episode with the adapted policy is needed (Meta-World uses 3, garage 1)",
        )
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
        if isinstance(test_tasks, (str, bytes, Mapping)) or not isinstance(test_tasks, Sequence):
            raise ValueError(
                f"test_tasks must be a list of tasks, got {type(test_tasks).__name__}; "
                f"wrap a single task in a list"
            )
        if len(test_tasks) == 0:
            raise ValueError(
                "test_tasks is empty: pass the held-out tasks to evaluate, e.g. "
                "env.sample_tasks(n, rng) or a test split's tasks"
            )
        self.make_task_env = make_task_env
        self.test_tasks = list(test_tasks)
        self._task_json = [task_to_json(task) for task in self.test_tasks]  # fail early
        self.seed = int(seed)
        self.metaworld_envs_per_class = (
            None
            if metaworld_envs_per_class is None
            else check_count("metaworld_envs_per_class", metaworld_envs_per_class)
        )
        self._task_env: gym.Env[Any, Any] | None = None

    @classmethod
    def garage_protocol(
        cls,
        make_task_env: Callable[[], gym.Env[Any, Any]],
        test_tasks: Sequence[Task],
        seed: int = 0,
    ) -> MetaEvaluator:
        """An evaluator with garage's defaults: 10 exploration episodes, then 1 test episode."""
        return cls(make_task_env, test_tasks, seed=seed, **GARAGE_PROTOCOL)

    @property
    def n_exploration_eps(self) -> int:
        """Deprecated name of :attr:`exploration_episodes` (goes in the next release)."""
        return self.exploration_episodes

    @property
    def n_test_episodes(self) -> int:
        """Deprecated name of :attr:`test_episodes` (goes in the next release)."""
        return self.test_episodes

    @property
    def episodes_per_trial(self) -> int:
        return self.exploration_episodes + self.test_episodes

    @property
    def task_env(self) -> gym.Env[Any, Any]:
        """The task env, built on first use."""
        if self._task_env is None:
            self._task_env = self.make_task_env()
        return self._task_env

    def task_seed(self, task_index: int) -> int:
        """The reset seed of the trial of ``test_tasks[task_index]``."""
        state = np.random.SeedSequence([self.seed, int(task_index)]).generate_state(1)
        return int(state[0])

    def close(self) -> None:
        """Close the task env (a later :meth:`evaluate` builds a new one)."""
        if self._task_env is not None:
            self._task_env.close()
            self._task_env = None

    def evaluate(self, algo: MetaRLAlgorithm, workers: int | None = None) -> MetaTestResult:
        """Explore, adapt and test ``algo`` on every test task; see the module doc.

        :param workers: ``None``: one task after another in this process. A number: all tasks
            at once, stepped by that many processes (this one included), one batched policy
            call per step (:mod:`metabench.batched_evaluation`; statistically equivalent, and
            faster).
        """
        task_env = self.task_env
        for index, task in enumerate(self.test_tasks):  # a bad task fails before any stepping
            try:
                task_env.get_wrapper_attr("set_task")(task)
            except Exception as error:
                raise ValueError(
                    f"test_tasks[{index}] is not a task of this env: {error}"
                ) from error
        if workers is not None:
            from metabench.batched_evaluation import evaluate_batched

            check_count("workers", workers, hint="or None for the sequential meta-test")
            results = evaluate_batched(self, algo, workers)
        else:
            ends = _EndFlags(task_env)
            trial = Trial(ends, episodes_per_trial=self.episodes_per_trial)
            env = algo.wrap_env(trial)
            same_obs = env.observation_space == trial.observation_space
            results = [
                self._run_task(algo, env, trial, ends, index, same_obs)
                for index in range(len(self.test_tasks))
            ]
        spec = getattr(task_env, "spec", None)
        return MetaTestResult(
            algorithm=type(algo).__name__,
            env=spec.id if spec is not None else type(task_env.unwrapped).__name__,
            n_exploration_eps=self.exploration_episodes,
            n_test_episodes=self.test_episodes,
            seed=self.seed,
            tasks=results,
            metaworld_envs_per_class=self.metaworld_envs_per_class,
        )

    def _run_task(
        self,
        algo: MetaRLAlgorithm,
        env: gym.Env[Any, Any],
        trial: Trial,
        ends: _EndFlags,
        index: int,
        same_obs: bool,
    ) -> TaskResult:
        trial.set_task(self.test_tasks[index])
        obs, _ = env.reset(seed=self.task_seed(index))
        exploration_policy = algo.get_exploration_policy()
        policy: Policy = exploration_policy
        episodes: list[EpisodeRecorder] = []
        for number in range(self.episodes_per_trial):
            if number == self.exploration_episodes:
                batch = self._exploration_batch(episodes)
                policy = algo.adapt_policy(exploration_policy, batch)
            policy.reset()
            episode = EpisodeRecorder()
            while True:
                action = np.asarray(policy.get_action(obs))
                next_obs, reward, terminated, truncated, info = env.step(action)
                trial_over = terminated or truncated
                ended = bool(trial_over or info.get(EPISODE_END))
                episode.record(
                    obs,
                    action,
                    float(reward),
                    ended=ended,
                    terminated=ended and ends.terminated,
                    success=bool(info["success"]) if "success" in info else None,
                )
                if ended:
                    final = info.get(FINAL_OBSERVATION, next_obs) if same_obs else next_obs
                    episode.last_observation = np.array(final, copy=True)
                    obs = next_obs
                    break
                obs = next_obs
            episodes.append(episode)
            last = number == self.episodes_per_trial - 1
            if trial_over != last:
                raise RuntimeError(
                    f"the trial of test task {index} ended after {number + 1} episodes, expected "
                    f"{self.episodes_per_trial}: algo.wrap_env must not end or cut the trial"
                )
        return self._task_result(index, episodes)

    def _task_result(self, index: int, episodes: Sequence[EpisodeRecorder]) -> TaskResult:
        """The :class:`TaskResult` of test task ``index`` from its trial's episodes."""
        successes = [e.success for e in episodes]
        reported = any(s is not None for s in successes)
        firsts = [next((i for i, s in enumerate(e.successes) if s), None) for e in episodes]
        return TaskResult(
            task_index=index,
            task=self._task_json[index],
            n_exploration_eps=self.exploration_episodes,
            episode_returns=[math.fsum(e.rewards) for e in episodes],
            episode_lengths=[len(e.rewards) for e in episodes],
            episode_successes=[bool(s) for s in successes] if reported else None,
            episode_success_steps=(
                [None if i is None else i + 1 for i in firsts] if reported else None
            ),
            episode_returns_to_success=(
                [
                    math.fsum(e.rewards if i is None else e.rewards[: i + 1])
                    for e, i in zip(episodes, firsts, strict=True)
                ]
                if reported
                else None
            ),
        )

    @staticmethod
    def _exploration_batch(episodes: Sequence[EpisodeRecorder]) -> EpisodeBatch:
        """The exploration episodes as an :class:`EpisodeBatch`.

        ``last_observations`` are the :data:`FINAL_OBSERVATION` of inner episodes (the final
        observation for the trial's last one). When ``wrap_env`` changes the observation space
        (RL2), the raw final observation has the wrong shape, so the observation returned by the
        ending step is used instead (for RL2: the next episode's first observation with the
        ending step's action, reward and ``done`` flag). ``env_infos["success"]`` is recorded
        when every step reported it.
        """
        with_success = all(s is not None for e in episodes for s in e.successes)
        return EpisodeBatch.from_list([e.path(with_success) for e in episodes])
