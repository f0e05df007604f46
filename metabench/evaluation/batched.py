"""The batched meta-test: every test task's trial steps at once, one policy call per step.

:meth:`MetaEvaluator.evaluate(algo, processes=k) <metabench.evaluation.MetaEvaluator.evaluate>`
runs, through :func:`batched_trials`, the same protocol as the sequential meta-test (explore,
adapt, test, on the same tasks with the same reset seeds) on one trial per test task, stepped by
``k`` processes: this one steps the first shard of trials, ``k - 1`` worker processes (a
:class:`~metabench.vector.sharded.ShardedVectorEnv`) the others. Per step the algorithm's
:class:`~metabench.algos.base.PolicyBatch` acts for all tasks whose trial is still in the current
phase in one call (RL2: one recurrent forward pass over all of them), and only those tasks' envs
step, so a task whose episodes end early waits for the others at the adaptation point.

What changes against the sequential meta-test, and what does not:

* the envs see exactly the sequential meta-test's tasks, seeds and actions' semantics, and an
  env's results do not depend on the number of processes;
* policies that draw random actions draw them in a different order (all tasks per step instead
  of one task after another), and a batched forward pass may round differently from one row at
  a time: results are statistically equivalent, not bit-identical
  (``tests/evaluation/test_batched.py`` checks both: identical episodes for a deterministic
  per-row policy, equal return distributions for a sampling one).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np

from metabench.algos.base import MetaRLAlgorithm, PolicyBatch
from metabench.data import EpisodeRecorder
from metabench.evaluation.recording import EndFlags, check_trial_end, exploration_batch
from metabench.tasks.base import Task
from metabench.threads import torch_threads
from metabench.wrappers.trial import EPISODE_END, FINAL_OBSERVATION, Trial

__all__ = ["StepReport", "batched_trials"]


class StepReport(NamedTuple):
    """What one sub-env's step sends back: only what the evaluator records."""

    observation: np.ndarray
    reward: float
    trial_over: bool
    episode_ended: bool
    terminated: bool
    success: bool | None
    final_observation: np.ndarray


class _RowStepper(gym.Wrapper[Any, Any, Any, Any]):
    """The top of sub-env ``row``: steps only when its row acts (:meth:`step_rows`)."""

    def __init__(self, env: gym.Env[Any, Any], ends: Any, trial: Trial, row: int) -> None:
        super().__init__(env)
        self.ends = ends
        self.row = row
        # a wrapper that changes the observation (RL2) cannot use the raw final observation
        self.same_obs = env.observation_space == trial.observation_space

    def step_rows(self, actions: np.ndarray, rows: np.ndarray) -> StepReport | None:
        """Step with ``actions[row]`` if this sub-env's row is one of ``rows``, else do
        nothing (``actions`` holds a row for every sub-env)."""
        if not np.any(rows == self.row):
            return None
        obs, reward, terminated, truncated, info = self.env.step(actions[self.row])
        trial_over = bool(terminated or truncated)
        final = info.get(FINAL_OBSERVATION, obs) if self.same_obs else obs
        return StepReport(
            observation=obs,
            reward=float(reward),
            trial_over=trial_over,
            episode_ended=trial_over or bool(info.get(EPISODE_END)),
            terminated=self.ends.terminated,
            success=bool(info["success"]) if "success" in info else None,
            final_observation=final,
        )


def _sub_env(
    make_task_env: Callable[[], gym.Env[Any, Any]],
    episodes_per_trial: int,
    wrapper: Callable[[gym.Env[Any, Any]], gym.Env[Any, Any]],
    row: int,
) -> _RowStepper:
    ends = EndFlags(make_task_env())
    trial = Trial(ends, episodes_per_trial=episodes_per_trial)
    return _RowStepper(wrapper(trial), ends, trial, row)


def batched_trials(
    make_task_env: Callable[[], gym.Env[Any, Any]],
    tasks: Sequence[Task],
    seeds: Sequence[int],
    exploration_episodes: int,
    episodes_per_trial: int,
    algo: MetaRLAlgorithm,
    processes: int,
) -> list[list[EpisodeRecorder]]:
    """The recorded episodes of one trial per task, all trials stepped together by
    ``processes`` processes, this one included (see the module doc). Trial ``i`` runs on
    ``tasks[i]``, reset with ``seeds[i]``; the algorithm adapts after ``exploration_episodes``."""
    n = len(tasks)
    wrapper = algo.env_wrapper()
    factories = [
        functools.partial(_sub_env, make_task_env, episodes_per_trial, wrapper, row)
        for row in range(n)
    ]
    envs = _TrialEnvs(factories, processes)
    # the policy acts on one torch thread: a second would spin on a core a worker steps on
    with torch_threads(1):
        try:
            envs.set_tasks(tasks)
            observations = envs.reset(list(seeds))
            run = _BatchedTrials(envs, observations, episodes_per_trial)
            policies = algo.get_exploration_policies(n)
            run.until(exploration_episodes, policies)
            explored = [
                exploration_batch(episodes[:exploration_episodes]) for episodes in run.episodes
            ]
            run.until(episodes_per_trial, algo.adapt_policies(policies, explored))
        finally:
            envs.close()
    return run.episodes


class _TrialEnvs:
    """The sub-envs of a batched meta-test in ``processes`` interleaved shards (row ``i`` in
    shard ``i % processes``, so that the test tasks of one class, listed together, spread over
    the processes): the first stepped in this process while the others step in worker processes
    (a :class:`~metabench.vector.sharded.ShardedVectorEnv`). Stepping a shard here instead of
    waiting on one more worker matters on virtual machines, where waking an idle core costs
    about as much as a Meta-World step."""

    def __init__(self, factories: Sequence[Callable[[], _RowStepper]], processes: int) -> None:
        from metabench.vector.sharded import ShardedVectorEnv

        n = len(factories)
        processes = min(processes, n)
        shards = [list(range(p, n, processes)) for p in range(processes)]
        self.order = [row for shard in shards for row in shard]  # local rows, then remote ones
        self.unshard = np.argsort(self.order)  # shard-major results -> row order
        self.local = [factories[row]() for row in shards[0]]
        remote = [factories[row] for shard in shards[1:] for row in shard]
        # contiguous worker shards of `remote` are the interleaved shards 1, 2, ...
        self.remote = ShardedVectorEnv(remote, processes=processes - 1) if remote else None

    def set_tasks(self, tasks: Sequence[Task]) -> None:
        ordered = [tasks[row] for row in self.order]
        for env, task in zip(self.local, ordered, strict=False):
            env.get_wrapper_attr("set_task")(task)
        if self.remote is not None:
            self.remote.set_tasks(ordered[len(self.local) :])

    def reset(self, seeds: list[int]) -> np.ndarray:
        ordered = [seeds[row] for row in self.order]
        if self.remote is not None:
            remote, _ = self.remote.reset(seed=ordered[len(self.local) :])
        observations = [env.reset(seed=s)[0] for env, s in zip(self.local, ordered, strict=False)]
        if self.remote is not None:
            observations += list(remote)
        return np.array([observations[j] for j in self.unshard])

    def step_rows(self, actions: np.ndarray, rows: np.ndarray) -> list[StepReport | None]:
        """Step the sub-envs of ``rows`` with their rows of ``actions``; one report per row
        (``None`` for those not stepped)."""
        if self.remote is not None:
            self.remote.call_async("step_rows", actions, rows)
        reports = [env.step_rows(actions, rows) for env in self.local]
        if self.remote is not None:
            reports += list(self.remote.call_wait())
        return [reports[j] for j in self.unshard]

    def close(self) -> None:
        for env in self.local:
            env.close()
        if self.remote is not None:
            self.remote.close()


class _BatchedTrials:
    """The trials of a batched meta-test, each recorded episode by episode."""

    def __init__(self, envs: _TrialEnvs, observations: np.ndarray, episodes_per_trial: int) -> None:
        self.envs = envs
        self.observations = observations
        self.episodes_per_trial = episodes_per_trial
        n = len(observations)
        self.episodes: list[list[EpisodeRecorder]] = [[EpisodeRecorder()] for _ in range(n)]
        self.completed = np.zeros(n, dtype=np.int64)

    def until(self, episodes: int, policies: PolicyBatch) -> None:
        """Step every trial until it has completed ``episodes`` episodes, acting with
        ``policies`` (reset at the start of every episode, the first one included)."""
        policies.reset(np.flatnonzero(self.completed < episodes))
        actions: np.ndarray | None = None
        while True:
            rows = np.flatnonzero(self.completed < episodes)
            if rows.size == 0:
                return
            chosen = np.asarray(policies.get_actions(self.observations[rows], rows))
            if actions is None:
                actions = np.zeros((len(self.observations), *chosen.shape[1:]), chosen.dtype)
            actions[rows] = chosen
            reports = self.envs.step_rows(actions, rows)
            starting = []
            for row in rows:
                report = reports[row]
                assert report is not None  # every row asked to step did
                if self._record(int(row), actions[row], report) and self.completed[row] < episodes:
                    starting.append(int(row))
            if starting:
                policies.reset(np.array(starting))

    def _record(self, row: int, action: np.ndarray, report: StepReport) -> bool:
        """Record ``row``'s step; True if it ended an episode."""
        episode = self.episodes[row][-1]
        episode.record(
            self.observations[row],
            action,
            report.reward,
            ended=report.episode_ended,
            terminated=report.episode_ended and report.terminated,
            success=report.success,
        )
        self.observations[row] = report.observation
        if not report.episode_ended:
            return False
        episode.last_observation = np.array(report.final_observation, copy=True)
        self.completed[row] += 1
        completed = int(self.completed[row])
        check_trial_end(row, completed, self.episodes_per_trial, report.trial_over)
        if completed < self.episodes_per_trial:
            self.episodes[row].append(EpisodeRecorder())
        return True
