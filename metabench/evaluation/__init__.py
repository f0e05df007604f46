"""The meta-test: explore each held-out task, adapt, then act with the adapted policy.

- :mod:`~metabench.evaluation.sequential`: :class:`MetaEvaluator`, the protocol, one task at a
  time (or all at once with ``evaluate(algo, processes=k)``);
- :mod:`~metabench.evaluation.batched`: every test task's trial stepped together, one batched
  policy call per step;
- :mod:`~metabench.evaluation.recording`: what both runners share, from recorded episodes to a
  :class:`TaskResult`;
- :mod:`~metabench.evaluation.results`: :class:`MetaTestResult`, the tasks' JSON form and
  :func:`~metabench.evaluation.results.upgrade_record`, the reader of earlier versions;
- :mod:`~metabench.evaluation.metaworld_count`: Meta-World's own count of the same episodes;
- :mod:`~metabench.evaluation.metaworld_adapter`: any algorithm under Meta-World's own
  evaluator (:class:`~metabench.evaluation.metaworld_adapter.MetaWorldAgent`).
"""

from metabench.evaluation.results import (
    RESULT_FORMAT,
    RESULT_VERSION,
    MetaTestResult,
    ResultVersionError,
    TaskResult,
    task_from_json,
    task_to_json,
    upgrade_record,
)
from metabench.evaluation.sequential import GARAGE_PROTOCOL, METAWORLD_PROTOCOL, MetaEvaluator

__all__ = [
    "GARAGE_PROTOCOL",
    "METAWORLD_PROTOCOL",
    "RESULT_FORMAT",
    "RESULT_VERSION",
    "MetaEvaluator",
    "MetaTestResult",
    "ResultVersionError",
    "TaskResult",
    "task_from_json",
    "task_to_json",
    "upgrade_record",
]
