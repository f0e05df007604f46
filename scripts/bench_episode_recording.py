"""MAML's episode collection: whole vector steps recorded at once (what
:class:`~metabench.algos.maml.collector.VectorEpisodeCollector` does) against one
:class:`~metabench.data.EpisodeRecorder` per sub-env (what the evaluator and the Meta-World
adapter use), side by side.

Both collect the same episodes and return equal batches (checked). Two settings:

    replay   a vector env that hands out precomputed arrays, so the time is the recording and
             the loop alone (the MAML HalfCheetah meta-batch: 40 tasks x 20 episodes, horizon 200)
    cheetah  the real batched HalfCheetahVel vector env with a zero-cost actor, for scale

Rounds are interleaved and the best of each is kept. Run from the repository root::

    .venv/bin/python scripts/bench_episode_recording.py
    .venv/bin/python scripts/bench_episode_recording.py --rounds 3 --horizon 50 --no-cheetah
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from metabench.algos.maml.collector import Actor, VectorEpisodeCollector
from metabench.data import EpisodeBatch, EpisodeRecorder
from metabench.tasks.base import Task


class ReplayVectorEnv(gym.vector.VectorEnv[Any, Any, Any]):
    """Steps nothing: returns precomputed observations and rewards, ending at ``horizon``."""

    def __init__(self, num_envs: int, horizon: int, obs_dim: int = 20, act_dim: int = 6) -> None:
        rng = np.random.default_rng(0)
        self.num_envs = num_envs
        self.horizon = horizon
        self.single_observation_space = gym.spaces.Box(-np.inf, np.inf, (obs_dim,))
        self.single_action_space = gym.spaces.Box(-1.0, 1.0, (act_dim,))
        self.metadata = {"autoreset_mode": gym.vector.AutoresetMode.NEXT_STEP}
        self.observations = rng.standard_normal((horizon + 1, num_envs, obs_dim))
        self.rewards = rng.standard_normal((horizon, num_envs))
        self.t = 0

    def set_tasks(self, tasks: Sequence[Task] | None) -> None:
        pass

    def reset(self, *, seed: Any = None, options: Any = None) -> tuple[np.ndarray, dict[str, Any]]:
        self.t = 0
        return self.observations[0], {}

    def step(self, actions: Any) -> tuple[Any, ...]:
        self.t += 1
        ended = np.full(self.num_envs, self.t >= self.horizon)
        return (
            self.observations[self.t],
            self.rewards[self.t - 1],
            np.zeros(self.num_envs, dtype=bool),
            ended,
            {},
        )


class RecorderEpisodeCollector(VectorEpisodeCollector):
    """The same collection with one :class:`EpisodeRecorder` per sub-env (NEXT_STEP autoreset
    only: enough for the comparison)."""

    def collect(
        self, tasks: Sequence[Task], actor: Actor, seed: int | None = None
    ) -> list[EpisodeBatch]:
        num_envs = self.vec_env.num_envs
        self.vec_env.set_tasks([task for task in tasks for _ in range(self.episodes_per_task)])
        observations, _ = self.vec_env.reset(seed=seed)
        observations = np.array(observations)
        recorders = [EpisodeRecorder() for _ in range(num_envs)]
        active = np.ones(num_envs, dtype=bool)
        step = 0
        while active.any():
            actions = np.array(actor(observations))
            next_observations, rewards, terminated, truncated, _ = self.vec_env.step(actions)
            next_observations = np.array(next_observations)
            step += 1
            terminated = np.asarray(terminated, dtype=bool)
            ended = terminated | np.asarray(truncated, dtype=bool)
            if self.max_episode_length is not None and step >= self.max_episode_length:
                ended = np.ones(num_envs, dtype=bool)
            for i in np.flatnonzero(active):
                recorders[i].record(
                    observations[i],
                    actions[i],
                    rewards[i],
                    ended=bool(ended[i]),
                    terminated=bool(terminated[i]),
                )
                if ended[i]:
                    recorders[i].last_observation = next_observations[i]
            active &= ~ended
            observations = next_observations
        batches = []
        for k, task in enumerate(tasks):
            envs = range(k * self.episodes_per_task, (k + 1) * self.episodes_per_task)
            paths = [recorders[i].path() for i in envs]
            for path in paths:
                path["episode_infos"] = {"task": task}
            batches.append(EpisodeBatch.from_list(paths))
        return batches


def same_batches(a: list[EpisodeBatch], b: list[EpisodeBatch]) -> bool:
    fields = ("observations", "last_observations", "actions", "rewards", "step_types", "lengths")
    return all(
        all(np.array_equal(getattr(x, name), getattr(y, name)) for name in fields)
        and x.observations.dtype == y.observations.dtype
        for x, y in zip(a, b, strict=True)
    )


def measure(vec_env: Any, episodes_per_task: int, rounds: int) -> dict[str, float]:
    """Best seconds per ``collect`` call of each collector on ``vec_env``."""
    act_dim = vec_env.single_action_space.shape[0]
    zeros = np.zeros((vec_env.num_envs, act_dim))

    def actor(observations: np.ndarray) -> np.ndarray:
        return zeros

    collectors = {
        "vector steps (VectorEpisodeCollector)": VectorEpisodeCollector(vec_env, episodes_per_task),
        "per-env EpisodeRecorder": RecorderEpisodeCollector(vec_env, episodes_per_task),
    }
    n_tasks = vec_env.num_envs // episodes_per_task
    tasks: list[Task] = [{"velocity": 0.1 * k} for k in range(n_tasks)]
    first = [collector.collect(tasks, actor, seed=0) for collector in collectors.values()]
    assert same_batches(*first), "the two collectors returned different batches"
    best = dict.fromkeys(collectors, float("inf"))
    for _ in range(rounds):
        for name, collector in collectors.items():
            start = time.perf_counter()
            collector.collect(tasks, actor, seed=0)
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def report(title: str, best: dict[str, float]) -> None:
    base = next(iter(best.values()))
    print(title)
    for name, seconds in best.items():
        print(f"  {name:38s} {seconds * 1e3:9.1f} ms  x{seconds / base:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--episodes-per-task", type=int, default=20)
    parser.add_argument("--horizon", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-cheetah", action="store_true")
    args = parser.parse_args()
    num_envs = args.tasks * args.episodes_per_task
    shape = f"{args.tasks} tasks x {args.episodes_per_task} episodes, horizon {args.horizon}"
    replay = ReplayVectorEnv(num_envs, args.horizon)
    report(f"replay ({shape}):", measure(replay, args.episodes_per_task, args.rounds))
    if not args.no_cheetah:
        import metabench.registration  # noqa: F401  (registers the ids)

        cheetah = gym.make_vec(
            "metabench/HalfCheetahVel-v0",
            num_envs=num_envs,
            vectorization_mode="vector_entry_point",
            horizon=args.horizon,
            processes=1,
        )
        try:
            best = measure(cheetah, args.episodes_per_task, args.rounds)
        finally:
            cheetah.close()
        report(f"HalfCheetahVel vector env, one process ({shape}):", best)


if __name__ == "__main__":
    main()
