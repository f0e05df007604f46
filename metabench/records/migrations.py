"""The stored formats of a run's records and the migrations between them.

Every file metabench writes (``config.json``, ``result.json``, ``evaluations/*.json``) is read
through :func:`migrate`, which brings it, version by version, to the form of :data:`VERSION`:
:data:`MIGRATIONS` holds one small function per step, the one from version ``n`` to ``n + 1`` at
index ``n - 1``. A change of the format adds one step (and raises :data:`VERSION`); the readers
only ever see the newest form.

* Version 1: the meta-test protocol's episode counts are ``n_exploration_eps`` and
  ``n_test_episodes`` (in ``config.protocol``, in a meta-test and in each of its tasks).
* Version 2: they are ``exploration_episodes`` and ``test_episodes``, as the API names them. Keys
  were written only when set: ``protocol.batched``, ``periodic_test_tasks``,
  ``train_evaluation_tasks``, ``cpus``, ``device``, ``algorithm_spec`` (config),
  ``metatest_protocol``, ``train_evaluation`` (result), ``metaworld_envs_per_class`` and each
  task's ``episode_success_steps`` and ``episode_returns_to_success`` (meta-test).
* Version 3: every file records its ``version`` and every field, ``null`` where a run has
  none.
* Version 4: ``processes`` is only ever a count of processes. The true/false options of the
  built-in RL2 algorithms that were named for it are ``step_in_workers`` (was ``processes``) and
  ``update_in_workers`` (was ``update_processes``).
* Version 5 (:data:`VERSION`): a result records ``env_steps_taken``, the steps stepped where
  the algorithm counts them apart from its budget's ``env_steps`` (``null`` before).

Only meta-tests recorded their version before version 3: a ``config.json`` without one is of
version 1 or 2 by its protocol's names, a ``result.json`` of its meta-test's version.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

__all__ = ["MIGRATIONS", "VERSION", "Kind", "RecordVersionError", "migrate"]

VERSION = 5
"""The version every record is written in (``"version"`` of each file)."""

Kind = Literal["config", "result", "metatest", "evaluation"]
"""Which record a file holds: ``config.json``, ``result.json``, a meta-test, or a meta-test
during training or by ``metabench evaluate`` (``evaluations/*.json``: a meta-test and more)."""

Record = dict[str, Any]


class RecordVersionError(ValueError):
    """A stored record of a version this metabench cannot read."""


def version_of(data: Mapping[str, Any], kind: Kind) -> Any:
    """The version ``data`` was written in (see the module docstring for files without one)."""
    if "version" in data:
        return data["version"]
    if kind == "config":
        protocol = data.get("protocol")
        return 1 if isinstance(protocol, Mapping) and "n_exploration_eps" in protocol else 2
    if kind == "result" and isinstance(data.get("metatest"), Mapping):
        return data["metatest"].get("version")
    return None


def migrate(data: Mapping[str, Any], kind: Kind) -> Record:
    """``data`` (left unchanged) in the form of :data:`VERSION`.

    :raises RecordVersionError: for a version other than 1 to :data:`VERSION`.
    """
    version = version_of(data, kind)
    if not (isinstance(version, int) and 1 <= version <= VERSION):
        newer = isinstance(version, int) and version > VERSION
        raise RecordVersionError(
            f"{kind} record version {version!r} is "
            + ("newer than this metabench reads" if newer else "not one metabench writes")
            + f" (versions 1 to {VERSION}): "
            + ("upgrade metabench to read it" if newer else "the file is not a valid record")
        )
    record = dict(data)
    for step in MIGRATIONS[version - 1 :]:
        record = step(record, kind)
    return record


def _parts(record: Record, kind: Kind, step: Callable[[Record, Kind], Record]) -> Record:
    """``record`` with ``step`` applied to the records it holds (a result's config and
    meta-tests)."""
    if kind != "result":
        return record
    parts: Record = {"config": step(dict(record["config"]), "config")}
    for key in ("metatest", "train_evaluation"):
        if isinstance(record.get(key), Mapping):
            parts[key] = step(dict(record[key]), "metatest")
    return {**record, **parts}


# -- version 1 -> 2 ------------------------------------------------------------------------------
VERSION_1_NAMES = {"n_exploration_eps": "exploration_episodes", "n_test_episodes": "test_episodes"}
"""Version 1's keys of the meta-test protocol's episode counts, and version 2's."""


def _renamed(data: Mapping[str, Any]) -> Record:
    return {VERSION_1_NAMES.get(key, key): value for key, value in data.items()}


def _names_of_version_2(record: Record, kind: Kind) -> Record:
    """Version 1's ``n_exploration_eps`` and ``n_test_episodes`` become ``exploration_episodes``
    and ``test_episodes`` in the protocol, the meta-test and each of its tasks."""
    if kind == "config":
        return {**record, "protocol": _renamed(record["protocol"])}
    if kind == "result":
        return _parts(record, kind, _names_of_version_2)
    tasks = [_renamed(task) for task in record["tasks"]]
    return {**_renamed(record), "version": 2, "tasks": tasks}


# -- version 2 -> 3 ------------------------------------------------------------------------------
VERSION_2_UNSET: dict[str, Record] = {
    "config": {
        "periodic_test_tasks": None,
        "train_evaluation_tasks": None,
        "cpus": None,
        "device": "cpu",
        "algorithm_spec": None,
    },
    "result": {"metatest_protocol": None, "train_evaluation": None},
    "metatest": {"metaworld_envs_per_class": None},
    "evaluation": {
        "metaworld_envs_per_class": None,
        "env_steps": None,
        "test_task_indices": None,
        "metatest_protocol": None,
        "provenance": None,
        "command": None,
        "run": None,
        "device": None,
    },
}
"""What version 2 left out of each record where a run had none, and what that meant."""

VERSION_2_UNSET_TASK: Record = {"episode_success_steps": None, "episode_returns_to_success": None}
"""What version 2 left out of a meta-test's task without first-success steps."""


def _every_field(record: Record, kind: Kind) -> Record:
    """Every field, with its version-2 meaning where it was left out, and the ``version``."""
    record = {**VERSION_2_UNSET[kind], **_parts(record, kind, _every_field), "version": 3}
    if kind == "config":
        record["protocol"] = {"batched": False, **record["protocol"]}
    if kind in ("metatest", "evaluation"):
        record["tasks"] = [{**VERSION_2_UNSET_TASK, **task} for task in record["tasks"]]
    return record


# -- version 3 -> 4 ------------------------------------------------------------------------------
VERSION_3_OPTIONS = {"processes": "step_in_workers", "update_processes": "update_in_workers"}
"""The built-in RL2 algorithms' true/false options of version 3 named ``processes``, and version
4's names."""


def renamed_options(hyperparameters: Mapping[str, Any]) -> Record:
    """A built-in algorithm's hyperparameters (a config record's, or those its checkpoints and
    agents hold) under version 4's names: only RL2's had version 3's, and none has them since."""
    return {VERSION_3_OPTIONS.get(key, key): value for key, value in hyperparameters.items()}


def _options_of_version_4(record: Record, kind: Kind) -> Record:
    """The RL2 options named ``processes`` and ``update_processes`` become ``step_in_workers``
    and ``update_in_workers`` in a built-in algorithm's hyperparameters (a third-party one's keep
    their names: they are its own)."""
    if kind == "result":
        record = _parts(record, kind, _options_of_version_4)
    elif kind == "config" and record["algorithm_spec"] is None:
        record = {**record, "hyperparameters": renamed_options(record["hyperparameters"])}
    return {**record, "version": 4}


# -- version 4 -> 5 ------------------------------------------------------------------------------
def _steps_taken_of_version_5(record: Record, kind: Kind) -> Record:
    """A result gains ``env_steps_taken``, not counted before (``None``)."""
    if kind == "result":
        record = {"env_steps_taken": None, **_parts(record, kind, _steps_taken_of_version_5)}
    return {**record, "version": 5}


MIGRATIONS: tuple[Callable[[Record, Kind], Record], ...] = (
    _names_of_version_2,
    _every_field,
    _options_of_version_4,
    _steps_taken_of_version_5,
)
"""The step from version ``n`` to ``n + 1`` at index ``n - 1``."""
