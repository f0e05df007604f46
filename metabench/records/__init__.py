"""A run's records, typed: its configuration (:class:`RunConfig`, ``config.json``), its
meta-tests (:class:`MetaTestRecord`; during training :class:`EvaluationRecord`,
``evaluations/*.json``) and its result (:class:`RunResult`, ``result.json``).

Each record is written by its ``to_json`` (every field, and the format's ``version``) and read by
its ``from_json``, which first brings a stored file of any earlier version to the current form
through the ordered migrations of :mod:`~metabench.records.migrations`. The numbers the tables
report are computed from the episodes a meta-test holds. Nothing here imports torch, so the
analysis of results loads without it.
"""

from metabench.records.metatest import FORMAT, EvaluationRecord, MetaTestRecord, SuccessCounts
from metabench.records.migrations import VERSION, RecordVersionError, migrate
from metabench.records.run import Protocol, RunConfig, RunResult

__all__ = [
    "FORMAT",
    "VERSION",
    "EvaluationRecord",
    "MetaTestRecord",
    "Protocol",
    "RecordVersionError",
    "RunConfig",
    "RunResult",
    "SuccessCounts",
    "migrate",
]
