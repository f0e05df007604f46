"""The result file (``result.json``): the one place that writes, validates and reads it.

A result file holds::

    config          the run's resolved configuration (config.json): benchmark, algorithm,
                    hyperparameters, seed, budget, test tasks
    command         the command line that produced it (``null`` from Python)
    provenance      versions, git revision, host
    iterations      meta-training iterations run
    env_steps       environment steps of meta-training
    wall_time_s     seconds of training and meta-test (over every resumed session)
    metatrain       the last iteration's meta-training numbers (``metatrain/...``)
    metatest        the final meta-test (:meth:`metabench.evaluation.MetaTestResult.to_dict`)
    metatest_protocol  what changes the meta-test's numbers, in one place: test tasks,
                    episodes, whether test episodes act with the mode, and for Meta-World its
                    version, reward function and goals per test class
                    (:func:`metabench.harness.run.metatest_protocol`; absent from older results)
    train_evaluation  (Meta-World only) the same meta-test on training tasks, after training:
                    the meta-train success per class Meta-World reports

Non-finite numbers are written as ``null`` (JSON has no NaN). The meta-test protocol's episode
counts are ``exploration_episodes`` and ``test_episodes`` (in ``config.protocol`` and
``metatest``) since version 2 of the meta-test result; :func:`read_result` reads version 1's
``n_exploration_eps`` and ``n_test_episodes`` through
:func:`metabench.evaluation.upgrade_record`, so that its readers only know version 2.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from metabench.atomic import atomic_write_json
from metabench.evaluation.results import ResultVersionError, upgrade_record

RESULT_FILE = "result.json"

REQUIRED = ("config", "provenance", "env_steps", "wall_time_s", "metatest")
"""What a result file must hold to count as a finished run."""


class CorruptResultError(ValueError):
    """A result file that cannot be read or lacks required fields."""


def make_result(
    *,
    config: dict[str, Any],
    command: str | None,
    provenance: dict[str, Any],
    iterations: int,
    env_steps: int,
    wall_time_s: float,
    metatrain: Mapping[str, float],
    metatest: dict[str, Any],
    metatest_protocol: dict[str, Any],
    train_evaluation: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A result record with every field (see the module docstring); ``train_evaluation``, the
    meta-test on training tasks, only when the benchmark has one."""
    extra = {} if train_evaluation is None else {"train_evaluation": train_evaluation}
    return {
        "config": config,
        "command": command,
        "provenance": provenance,
        "iterations": iterations,
        "env_steps": env_steps,
        "wall_time_s": wall_time_s,
        "metatrain": dict(metatrain),
        "metatest": metatest,
        "metatest_protocol": metatest_protocol,
        **extra,
    }


def write_result(path: Path, result: dict[str, Any]) -> None:
    """Write ``result`` atomically (a killed process leaves the old file or the new one)."""
    atomic_write_json(path, result)


def read_result(path: Path) -> dict[str, Any]:
    """One ``result.json``, with every :data:`REQUIRED` field, in the current version's form
    (:func:`~metabench.evaluation.upgrade_record`); :class:`CorruptResultError` names the file
    and the fix.

    :raises ResultVersionError: naming the file, for a meta-test result of a version this
        metabench cannot read (a newer one).
    """
    try:
        result = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise CorruptResultError(f"{path} is unreadable ({error}): delete it and re-run") from None
    if not isinstance(result, dict):
        raise CorruptResultError(f"{path} is not a JSON object: delete it and re-run")
    missing = [key for key in REQUIRED if key not in result]
    if missing:
        raise CorruptResultError(f"{path} lacks {', '.join(missing)}: delete it and re-run")
    try:
        return upgrade_record(result)
    except ResultVersionError as error:
        raise ResultVersionError(f"{path}: {error}") from None


def table_problem(result: Mapping[str, Any]) -> str | None:
    """Why the tables and plots cannot use ``result`` (a missing field, a ``null`` return), or
    ``None`` when they can."""
    checks: list[tuple[str, Callable[[Any], bool], str]] = [
        ("config.benchmark", _is_text, "a name"),
        ("config.algorithm", _is_text, "a name"),
        ("config.seed", _is_integer, "an integer"),
        ("env_steps", _is_integer, "an integer"),
        ("wall_time_s", _is_finite, "a number"),
        ("metatest.exploration_episodes", _is_integer, "an integer"),
        ("metatest.tasks", lambda value: isinstance(value, list), "a list"),
        ("metatest.aggregate.test_return", _is_finite, "a finite number"),
        ("metatest.aggregate.return_per_episode", _finite_list, "a list of finite numbers"),
        ("metatest.aggregate.test_success_rate", _finite_or_null, "a finite number or null"),
    ]
    for dotted, valid, expected in checks:
        found, value = _lookup(result, dotted)
        if not found:
            return f"lacks {dotted}"
        if not valid(value):
            return f"{dotted} is {json.dumps(value)}, not {expected}"
    return None


def collect_results(
    root: Path, warn: Callable[[str], None] | None = None
) -> list[tuple[Path, dict[str, Any]]]:
    """Every result file below ``root`` that the tables can use, sorted by benchmark, algorithm
    and seed. A file they cannot use (unreadable, a missing field, a ``null`` return) is left
    out, and ``warn`` (if given) is called with a message naming it; so is a file of a newer
    version than this metabench reads."""
    found = []
    for path in sorted(root.rglob(RESULT_FILE)):
        try:
            result = read_result(path)
        except (CorruptResultError, ResultVersionError) as error:
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
            item[1]["config"]["benchmark"],
            item[1]["config"]["algorithm"],
            item[1]["config"]["seed"],
        ),
    )


def _lookup(data: Any, dotted: str) -> tuple[bool, Any]:
    for key in dotted.split("."):
        if not isinstance(data, Mapping) or key not in data:
            return False, None
        data = data[key]
    return True, data


def _is_text(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


def _is_integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _finite_list(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(_is_finite(item) for item in value)


def _finite_or_null(value: Any) -> bool:
    return value is None or _is_finite(value)
