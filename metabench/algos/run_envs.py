"""The one place that builds a run's environments: :class:`RunEnvs`.

The harness builds every algorithm as ``from_benchmark(envs, config, *, log_dir, device)``.
``envs`` holds the benchmark, the run's seed and its ``processes``: the cores the run may use
(``--cpus``), counted as :mod:`metabench.vector` counts processes. It builds what the algorithm
steps: the training task sampler and task envs, the vector envs of a meta-batch for any task
family, and the meta-test's env for the spaces. How a meta-batch is stepped (in this process,
sharded over worker processes, or by the family's batched env) is decided here, from the
family's declaration and that one count, so that no algorithm takes a process count of its own.
The number of processes never changes the numbers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import gymnasium as gym

from metabench.algos.benchmark import Benchmark
from metabench.tasks.base import TaskSampler
from metabench.validation import check_count, check_seed

if TYPE_CHECKING:  # the vector envs load SB3 and torch: the harness reads results without them
    from metabench.vector import MetaBatchVecEnv

__all__ = ["RunEnvs"]


@dataclass(frozen=True)
class RunEnvs:
    """A run's environments on one benchmark.

    :param benchmark: what the envs are (:class:`~metabench.algos.benchmark.Benchmark`).
    :param seed: the run's seed: it seeds the envs and the training task sampler, and the
        algorithm built on them.
    :param processes: the processes that may step the run's envs at once, this one included
        where it steps some: the run's cores (``None``: every core of the machine).
    """

    benchmark: Benchmark
    seed: int = 0
    processes: int | None = 1

    def __post_init__(self) -> None:
        """:raises ValueError: for a seed outside 0 .. 2**32 - 1 (refused here for every
        algorithm: some took it, others failed in their generators) or a process count
        below 1."""
        object.__setattr__(self, "seed", check_seed(self.seed))
        if self.processes is not None:
            check_count("processes", self.processes, hint="or None for every core")

    @property
    def env_id(self) -> str:
        """The task env's id."""
        return self.benchmark.env_id

    def train_sampler(self) -> TaskSampler | None:
        """The task sampler of meta-training (``None``: the task env's own distribution)."""
        return self.benchmark.train_sampler(self.seed)

    def train_env_kwargs(self) -> dict[str, Any]:
        """The task env's arguments for meta-training."""
        return self.benchmark.train_env_kwargs(self.seed)

    def test_env(self) -> Any:
        """A meta-test env: the spaces an algorithm that does not meta-train is built on."""
        return self.benchmark.make_test_env(self.seed)

    def trial_batch(
        self,
        num_envs: int,
        *,
        in_workers: bool,
        sampler: TaskSampler | None,
        episodes_per_trial: int,
        rl2: bool,
        reward_scale: float = 1.0,
        zero_at_episode_start: bool = False,
        wrapper: Callable[[gym.Env[Any, Any]], gym.Env[Any, Any]] | None = None,
    ) -> MetaBatchVecEnv:
        """A trial-aware SB3 vector env of ``num_envs`` training tasks
        (:func:`~metabench.vector.make_meta_vec_env`, which documents the other arguments):
        stepped in this process, or with ``in_workers`` on :attr:`processes` processes, this
        one stepping a shard."""
        from metabench.vector import MetaBatchVecEnv, make_meta_vec_env

        venv = make_meta_vec_env(
            self.env_id,
            num_envs,
            episodes_per_trial=episodes_per_trial,
            sampler=sampler,
            rl2=rl2,
            reward_scale=reward_scale,
            zero_at_episode_start=zero_at_episode_start,
            seed=self.seed,
            backend="sb3",
            processes=self.processes if in_workers else 1,
            env_kwargs=self.train_env_kwargs(),
            wrapper=wrapper,
        )
        assert isinstance(venv, MetaBatchVecEnv)
        return venv

    def episode_batch(self, num_envs: int) -> gym.vector.VectorEnv[Any, Any, Any]:
        """``num_envs`` plain training task envs whose tasks the caller pins (``set_tasks``), the
        fastest way their family steps them: sharded over :attr:`processes` worker processes
        where it steps in workers (Meta-World, Ant, Humanoid), its batched env on
        :attr:`processes` processes where it has one for the benchmark's protocol
        (HalfCheetah), else in this process."""
        from metabench.vector import make_task_vec_env

        env_kwargs = self.train_env_kwargs()
        if self.benchmark.steps_in_workers:
            from metabench.vector.sharded import make_sharded_task_env

            # (MAML's collector reads no infos: the workers send none)
            return make_sharded_task_env(
                self.env_id, num_envs, processes=self.processes, info_keys=(), **env_kwargs
            )
        if self.benchmark.batched_vector_env:
            return gym.make_vec(
                self.env_id,
                num_envs=num_envs,
                vectorization_mode="vector_entry_point",
                **env_kwargs,
                processes=self.processes,
            )
        return make_task_vec_env(self.env_id, num_envs, seed=self.seed, env_kwargs=env_kwargs)
