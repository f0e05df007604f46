"""What an algorithm reads of a benchmark when the harness builds it: the :class:`Benchmark`
protocol (:class:`metabench.harness.benchmarks.BenchmarkSpec` is one), so that nothing under
:mod:`metabench.algos` imports the harness."""

from __future__ import annotations

from typing import Any, Protocol

from metabench.tasks.base import TaskSampler


class Benchmark(Protocol):
    """What :meth:`~metabench.algos.base.MetaRLAlgorithm.from_benchmark` reads of a benchmark."""

    @property
    def name(self) -> str: ...

    @property
    def path(self) -> str:
        """The spec file the benchmark was read from (for error messages)."""
        ...

    @property
    def env_id(self) -> str: ...

    @property
    def episodes_per_trial(self) -> int: ...

    @property
    def exploration_episodes(self) -> int:
        """Meta-test episodes before ``adapt_policy``."""
        ...

    @property
    def steps_in_workers(self) -> bool:
        """Whether the task family steps a meta-batch in worker processes when a run has
        several cores."""
        ...

    @property
    def batched_vector_env(self) -> bool:
        """Whether the task family's batched vector env steps this benchmark's envs."""
        ...

    def train_sampler(self, seed: int) -> TaskSampler | None:
        """The task sampler of meta-training (``None``: the task env's own distribution)."""
        ...

    def train_env_kwargs(self, seed: int) -> dict[str, Any]: ...

    def make_test_env(self, seed: int) -> Any: ...
