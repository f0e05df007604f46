"""What an algorithm's ``entry_point`` names: an :class:`Implementation`, the Python side of an
algorithm (its class and its config dataclass).

Each algorithm module exports its own (``metabench.algos.rl2:RL2_PPO``,
``metabench.algos.maml:MAML_IMPLEMENTATION``, ...); ``baselines/*.toml`` name them and set their
hyperparameters, and :mod:`metabench.harness.algorithms` reads those files. A hyperparameter
takes one path: the config dataclass's default, then the spec file's tables, then ``--set``,
resolved into one config object that the harness records (``config.json``) and hands to
:meth:`MetaRLAlgorithm.from_benchmark <metabench.algos.base.MetaRLAlgorithm.from_benchmark>`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from metabench.algos.base import MetaRLAlgorithm
from metabench.algos.benchmark import Benchmark
from metabench.validation import config_dict


@dataclass(frozen=True)
class Implementation:
    """The Python side of an algorithm.

    :param algorithm: the :class:`MetaRLAlgorithm` subclass; the harness builds it with
        :meth:`~MetaRLAlgorithm.from_benchmark`.
    :param config: its frozen config dataclass (fields made with
        :func:`metabench.validation.option`): every hyperparameter, its default, type and range.
    :param benchmark_defaults: the defaults that depend on the benchmark (RL2's episodes per
        trial, a policy search's population), over the dataclass's.
    :param check_benchmark: raises ``ValueError`` (naming the fix) when a resolved config cannot
        work on a benchmark; called with ``(spec, config)`` wherever a run's hyperparameters are
        resolved (``train``, every cell of ``plan`` and ``bench``), before anything is built or
        written.
    """

    algorithm: type[MetaRLAlgorithm]
    config: type[Any]
    benchmark_defaults: Callable[[Benchmark], dict[str, Any]] | None = None
    check_benchmark: Callable[[Benchmark, Any], None] | None = None

    def defaults(self, spec: Benchmark) -> dict[str, Any]:
        """Every hyperparameter with its default on ``spec`` (the names it takes)."""
        values = config_dict(self.config())
        if self.benchmark_defaults is not None:
            values.update(self.benchmark_defaults(spec))
        return values
