"""What an algorithm's ``entry_point`` names: an :class:`Implementation`, the Python side of an
algorithm (its defaults on a benchmark, its config dataclass, and the function that builds it).

Each algorithm module exports its own (``metabench.algos.rl2.algorithm:RL2_PPO``,
``metabench.algos.maml:MAML_TRPO``, ...); ``baselines/*.toml`` name them, and
:mod:`metabench.harness.algorithms` reads those files. The builders see a benchmark only through
the :class:`Benchmark` protocol, so nothing under :mod:`metabench.algos` imports the harness.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from metabench.algos.base import MetaRLAlgorithm
from metabench.tasks.base import TaskSampler


class Benchmark(Protocol):
    """What a builder reads of a benchmark
    (:class:`metabench.harness.benchmarks.BenchmarkSpec` is one)."""

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
    def metaworld(self) -> str | None: ...

    def train_sampler(self, seed: int) -> TaskSampler | None:
        """The task sampler of meta-training (``None``: the task env's own distribution)."""
        ...

    def train_env_kwargs(self, seed: int) -> dict[str, Any]: ...

    def make_test_env(self, seed: int) -> Any: ...


Builder = Callable[..., MetaRLAlgorithm]
"""``build(spec, seed, hyperparameters, log_dir)`` makes the algorithm, which sets
``steps_per_iteration``; a builder that also takes ``cpus=`` (the cores the run may use, or
``None``) gets it and bounds its worker processes, and one that takes ``device=`` (``"cpu"``,
``"cuda"``, ``"cuda:N"``; :mod:`metabench.devices`) puts its networks there. The harness checks
both when it loads and builds an algorithm (:mod:`metabench.harness.plugins`)."""


@dataclass(frozen=True)
class Implementation:
    """The Python side of an algorithm.

    :param defaults: every hyperparameter with its default on a benchmark (the names it takes).
    :param build: makes the algorithm from a benchmark, a seed and resolved hyperparameters.
    :param check: validates (and normalises) a full set of hyperparameters; raises ``ValueError``.
    :param config: ``"module:Class"`` of the algorithm's frozen config dataclass (fields made
        with :func:`metabench.validation.option`), imported when first needed: every value is
        checked against its field's type and range where it was set, and recorded as the field
        normalises it.
    :param check_benchmark: raises ``ValueError`` (naming the fix) when resolved
        hyperparameters cannot work on a benchmark.
    """

    defaults: Callable[[Benchmark], dict[str, Any]]
    build: Builder
    check: Callable[[dict[str, Any]], dict[str, Any]] = dict
    config: str | None = None
    check_benchmark: Callable[[Benchmark, dict[str, Any]], None] | None = None

    def config_class(self) -> type | None:
        """The class :attr:`config` names (``None`` when there is none)."""
        if self.config is None:
            return None
        module, _, name = self.config.partition(":")
        config: type = getattr(importlib.import_module(module), name)
        return config
