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

The result, :class:`~metabench.evaluation.results.MetaTestResult`, records the exact test tasks,
the return and success of every episode of every task (the adaptation curve) and the
post-adaptation numbers. ``evaluate(algo, processes=k)`` runs every trial at once instead
(:mod:`metabench.evaluation.batched`); both runners record through
:mod:`metabench.evaluation.recording`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from metabench.algos.base import MetaRLAlgorithm, Policy
from metabench.data import EpisodeRecorder
from metabench.evaluation.batched import batched_trials
from metabench.evaluation.recording import (
    EndFlags,
    check_trial_end,
    exploration_batch,
    task_result,
)
from metabench.evaluation.results import MetaTestResult, task_to_json
from metabench.rng import combined_seed_sequence
from metabench.tasks.base import Task
from metabench.validation import check_count
from metabench.wrappers.trial import EPISODE_END, FINAL_OBSERVATION, Trial

__all__ = ["GARAGE_PROTOCOL", "METAWORLD_PROTOCOL", "MetaEvaluator"]

METAWORLD_PROTOCOL = {"exploration_episodes": 10, "test_episodes": 3}
"""Meta-World's meta-test: 10 adaptation episodes, then 3 evaluation episodes per test task."""
GARAGE_PROTOCOL = {"exploration_episodes": 10, "test_episodes": 1}
"""garage's ``MetaEvaluator`` defaults: 10 exploration episodes, then 1 test episode."""


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

    Example::

        >>> from metabench.algos.nop import NOP
        >>> from metabench.tasks.toy.envs import PointGoalEnv
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
    ) -> None:
        if not callable(make_task_env):
            raise ValueError(
                f"make_task_env must be a function returning a task env (e.g. "
                f"lambda: PointGoalEnv()), got {type(make_task_env).__name__}"
            )
        self.exploration_episodes = _check_count(
            "exploration_episodes",
            METAWORLD_PROTOCOL["exploration_episodes"]
            if exploration_episodes is None
            else exploration_episodes,
            "adaptation needs at least one exploration episode (Meta-World and garage use 10)",
        )
        self.test_episodes = _check_count(
            "test_episodes",
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
        state = combined_seed_sequence(self.seed, task_index).generate_state(1)
        return int(state[0])

    def close(self) -> None:
        """Close the task env (a later :meth:`evaluate` builds a new one)."""
        if self._task_env is not None:
            self._task_env.close()
            self._task_env = None

    def evaluate(self, algo: MetaRLAlgorithm, processes: int | None = None) -> MetaTestResult:
        """Explore, adapt and test ``algo`` on every test task; see the module doc.

        :param processes: ``None``: one task after another in this process. A number: all tasks
            at once, stepped by that many processes (this one included), one batched policy
            call per step (:mod:`metabench.evaluation.batched`; statistically equivalent, and
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
        if processes is not None:
            check_count("processes", processes, hint="or None for the sequential meta-test")
            seeds = [self.task_seed(index) for index in range(len(self.test_tasks))]
            trials = batched_trials(
                self.make_task_env, self.test_tasks, seeds, self.exploration_episodes,
                self.episodes_per_trial, algo, processes,
            )  # fmt: skip
        else:
            ends = EndFlags(task_env)
            trial = Trial(ends, episodes_per_trial=self.episodes_per_trial)
            env = algo.wrap_env(trial)
            same_obs = env.observation_space == trial.observation_space
            trials = [
                self._run_trial(algo, env, trial, ends, index, same_obs)
                for index in range(len(self.test_tasks))
            ]
        results = [
            task_result(index, self._task_json[index], self.exploration_episodes, episodes)
            for index, episodes in enumerate(trials)
        ]
        spec = getattr(task_env, "spec", None)
        return MetaTestResult(
            algorithm=type(algo).__name__,
            env=spec.id if spec is not None else type(task_env.unwrapped).__name__,
            exploration_episodes=self.exploration_episodes,
            test_episodes=self.test_episodes,
            seed=self.seed,
            tasks=results,
            metaworld_envs_per_class=self.metaworld_envs_per_class,
        )

    def _run_trial(
        self,
        algo: MetaRLAlgorithm,
        env: gym.Env[Any, Any],
        trial: Trial,
        ends: EndFlags,
        index: int,
        same_obs: bool,
    ) -> list[EpisodeRecorder]:
        """The recorded episodes of test task ``index``'s trial, one task at a time."""
        trial.set_task(self.test_tasks[index])
        obs, _ = env.reset(seed=self.task_seed(index))
        exploration_policy = algo.get_exploration_policy()
        policy: Policy = exploration_policy
        episodes: list[EpisodeRecorder] = []
        for number in range(self.episodes_per_trial):
            if number == self.exploration_episodes:
                policy = algo.adapt_policy(exploration_policy, exploration_batch(episodes))
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
            check_trial_end(index, number + 1, self.episodes_per_trial, trial_over)
        return episodes
