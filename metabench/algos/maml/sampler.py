"""Deprecated: the old name of :mod:`metabench.algos.maml.collector` (goes in the next release).

MAML's episode sampler is now called a collector, so that *sampler* only means a task sampler:
``VectorEpisodeSampler`` is :class:`~metabench.algos.maml.collector.VectorEpisodeCollector`.
"""

from __future__ import annotations

import warnings
from typing import Any

from metabench.algos.maml.collector import (
    Actor,
    TaskVectorEnv,
    VectorEpisodeCollector,
    make_maml_vec_env,
)

__all__ = ["Actor", "TaskVectorEnv", "VectorEpisodeCollector", "make_maml_vec_env"]


def __getattr__(name: str) -> Any:
    if name == "VectorEpisodeSampler":
        warnings.warn(
            "VectorEpisodeSampler is now metabench.algos.maml.VectorEpisodeCollector; the old "
            "name goes in the next release",
            DeprecationWarning,
            stacklevel=2,
        )
        return VectorEpisodeCollector
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
