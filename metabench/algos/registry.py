"""Deprecated: the names this module used to hold, for one release.

The algorithms' :class:`~metabench.algos.implementation.Implementation` objects now live in their
own modules (:data:`MOVED` lists where), and the reading of ``baselines/*.toml`` in
:mod:`metabench.harness.algorithms`. A spec file whose ``entry_point`` still names
``metabench.algos.registry:NOP`` (or another name here) loads as before, with a warning that
names the new entry point.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

MOVED = {
    "RL2_PPO": "metabench.algos.rl2.algorithm:RL2_PPO",
    "MAML_TRPO": "metabench.algos.maml:MAML_TRPO",
    "NOP": "metabench.algos.nop:NOP_IMPLEMENTATION",
    "CEM": "metabench.algos.cem:CEM_IMPLEMENTATION",
    "CMAES": "metabench.algos.cmaes:CMAES_IMPLEMENTATION",
    "ORACLE": "metabench.algos.reference:ORACLE",
    "MULTITASK": "metabench.algos.reference:MULTITASK",
    "Implementation": "metabench.algos.implementation:Implementation",
    "Builder": "metabench.algos.implementation:Builder",
    **{
        name: f"metabench.harness.algorithms:{name}"
        for name in (
            "BASELINE_SCHEMA",
            "PROFILE_SCHEMA",
            "PROFILE_BENCHMARK_SCHEMA",
            "Setting",
            "ProfileSettings",
            "AlgorithmEntry",
            "load_implementation",
            "algorithm_from_spec",
            "load_algorithms",
            "get_algorithm",
            "clear_spec_caches",
        )
    },
}
"""Each old name of this module: ``"module:attribute"`` where it is now."""

__all__ = sorted(MOVED)


def moved(name: str) -> Any:
    """What the old name ``name`` of this module now is (no warning)."""
    module, _, attribute = MOVED[name].partition(":")
    return getattr(importlib.import_module(module), attribute)


def __getattr__(name: str) -> Any:
    if name not in MOVED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        f"metabench.algos.registry.{name} is deprecated and goes in the next release: "
        f"use {MOVED[name]}",
        FutureWarning,
        stacklevel=2,
    )
    return moved(name)
