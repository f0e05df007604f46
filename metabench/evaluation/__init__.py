"""The meta-test: explore each held-out task, adapt, then act with the adapted policy.

- :mod:`~metabench.evaluation.sequential`: :class:`MetaEvaluator`, the protocol, one task at a
  time (or all at once with ``evaluate(algo, processes=k)``);
- :mod:`~metabench.evaluation.batched`: every test task's trial stepped together, one batched
  policy call per step;
- :mod:`~metabench.evaluation.recording`: what both runners share, from recorded episodes to a
  :class:`TaskResult`;
- :mod:`~metabench.evaluation.results`: :class:`MetaTestResult` and the tasks' JSON form (a run
  stores its meta-tests as :class:`metabench.records.MetaTestRecord`);
- :mod:`~metabench.tasks.metaworld.count`: Meta-World's own count of the same episodes;
- :mod:`~metabench.evaluation.metaworld_adapter`: any algorithm under Meta-World's own
  evaluator (:class:`~metabench.evaluation.metaworld_adapter.MetaWorldAgent`).

The runners (which import torch, through the algorithms) are imported the first time one of their
names is used, so that reading results (:mod:`~metabench.evaluation.results`, used by
:mod:`metabench.analysis`) loads without torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from metabench.evaluation.results import MetaTestResult, TaskResult, task_from_json, task_to_json

if TYPE_CHECKING:
    from metabench.evaluation.sequential import (
        GARAGE_PROTOCOL,
        METAWORLD_PROTOCOL,
        MetaEvaluator,
    )

_ON_FIRST_USE = {
    "GARAGE_PROTOCOL": "metabench.evaluation.sequential",
    "METAWORLD_PROTOCOL": "metabench.evaluation.sequential",
    "MetaEvaluator": "metabench.evaluation.sequential",
}
"""The names whose module is imported on first use, and that module."""


def __getattr__(name: str) -> Any:
    """Import the module of a name of :data:`_ON_FIRST_USE` when the name is first asked for."""
    if name in _ON_FIRST_USE:
        return getattr(importlib.import_module(_ON_FIRST_USE[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "GARAGE_PROTOCOL",
    "METAWORLD_PROTOCOL",
    "MetaEvaluator",
    "MetaTestResult",
    "TaskResult",
    "task_from_json",
    "task_to_json",
]
