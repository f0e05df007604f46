"""The result file (``result.json``): the one place that writes and reads it.

A result file holds a :class:`metabench.records.RunResult` (see its fields): the run's
configuration, command, provenance, iterations, env steps, wall time, the last iteration's
meta-training numbers, the final meta-test and its protocol, and (Meta-World only) the same
meta-test on training tasks. :func:`read_result` reads a file of any version through the
records' migrations (:mod:`metabench.records.migrations`), so that its readers only know the
current form. Non-finite numbers are written as ``null`` (JSON has no NaN).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

from metabench.atomic import atomic_write_json
from metabench.records import RecordVersionError, RunResult

RESULT_FILE = "result.json"


class CorruptResultError(ValueError):
    """A result file that cannot be read or lacks required fields."""


def write_result(path: Path, result: RunResult) -> None:
    """Write ``result`` atomically (a killed process leaves the old file or the new one)."""
    atomic_write_json(path, result.to_json())


def read_result(path: Path) -> RunResult:
    """One ``result.json``, of any version; :class:`CorruptResultError` names the file and the
    fix.

    :raises RecordVersionError: naming the file, for a version this metabench cannot read (a
        newer one).
    """
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise CorruptResultError(f"{path} is unreadable ({error}): delete it and re-run") from None
    if not isinstance(data, dict):
        raise CorruptResultError(f"{path} is not a JSON object: delete it and re-run")
    try:
        return RunResult.from_json(data)
    except RecordVersionError as error:
        raise RecordVersionError(f"{path}: {error}") from None
    except KeyError as error:
        raise CorruptResultError(f"{path} lacks {error.args[0]}: delete it and re-run") from None
    except (TypeError, ValueError, AttributeError) as error:
        raise CorruptResultError(f"{path} is not a result ({error}): delete it, re-run") from None


def table_problem(result: RunResult) -> str | None:
    """Why the tables and plots cannot use ``result`` (a name left empty, a return that is not a
    finite number), or ``None`` when they can."""
    metatest = result.metatest
    checks: list[tuple[str, object, Callable[[object], bool], str]] = [
        ("config.benchmark", result.config.benchmark, _is_text, "a name"),
        ("config.algorithm", result.config.algorithm, _is_text, "a name"),
        ("metatest.tasks", list(metatest.tasks), bool, "a list of tasks"),
        ("metatest test return", metatest.test_return, _is_finite, "a finite number"),
        ("metatest return per episode", metatest.return_per_episode, _finite_list, "finite"),
        ("metatest success rate", _task_rate(result), _finite_or_null, "a finite number or null"),
    ]
    for name, value, valid, expected in checks:
        if not valid(value):
            return f"{name} is {json.dumps(value)}, not {expected}"
    return None


def collect_results(
    root: Path, warn: Callable[[str], None] | None = None
) -> list[tuple[Path, RunResult]]:
    """Every result file below ``root`` that the tables can use, sorted by benchmark, algorithm
    and seed. A file they cannot use (unreadable, a missing field, a ``null`` return) is left
    out, and ``warn`` (if given) is called with a message naming it; so is a file of a newer
    version than this metabench reads."""
    found = []
    for path in sorted(root.rglob(RESULT_FILE)):
        try:
            result = read_result(path)
        except (CorruptResultError, RecordVersionError) as error:
            if warn is not None:
                warn(f"skipped: {error}")
            continue
        problem = table_problem(result)
        if problem is not None:
            if warn is not None:
                warn(f"skipped {path}: {problem}")
            continue
        found.append((path, result))
    return sorted(
        found,
        key=lambda item: (
            item[1].config.benchmark,
            item[1].config.algorithm,
            item[1].config.seed,
        ),
    )


def _task_rate(result: RunResult) -> float | None:
    success = result.metatest.success
    return None if success is None else success.task_rate


def _is_text(value: object) -> bool:
    return isinstance(value, str) and bool(value)


def _is_finite(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _finite_list(value: object) -> bool:
    return isinstance(value, list) and bool(value) and all(_is_finite(item) for item in value)


def _finite_or_null(value: object) -> bool:
    return value is None or _is_finite(value)
