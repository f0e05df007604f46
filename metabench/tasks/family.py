"""Task families: each package of :mod:`metabench.tasks` that declares a ``FAMILY`` is one.

A family's package holds its envs, its batched vector env where it has one, its train/test
splits and any success count of its own. What the rest of metabench needs of it (its ids, its RL2
defaults, its vector entry points, its kinds of split) it declares in a :class:`TaskFamily` in
its ``__init__``, as strings, so that registering every id imports none of the families' code
(MuJoCo and Meta-World load when an env is first made). Registration and the benchmarks' reader
loop over :func:`task_families`, found rather than listed: a new family is a new folder.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from metabench.tasks.splits import ListSplit, SeedSplit, Split

BUILT_IN_SPLITS: dict[str, type[Split]] = {SeedSplit.kind: SeedSplit, ListSplit.kind: ListSplit}
"""The kinds of split every family has: they draw from the task env's own distribution."""

TASKS_PACKAGE = __name__.rpartition(".")[0]
TASKS_FOLDER = Path(__file__).parent
"""Where the families are looked for: the packages of :mod:`metabench.tasks`."""


@dataclass(frozen=True)
class TaskEnvDeclaration:
    """One task env of a family, registered as ``metabench/<name>-v0`` and
    ``metabench/RL2-<name>-v0``.

    :param entry_point: ``"module:Class"`` of the task env.
    :param episodes_per_trial: the RL2 id's default trial length: the benchmark's
        (``tests/test_registration.py`` checks that they agree with ``envs/*.toml``).
    :param reward_scale: the RL2 id's default reward scale (RL2-PPO's on the benchmark).
    :param vector_entry_point: ``"module:Class"`` of a vector env that steps many of these envs
        as one (``gymnasium.make_vec``'s default for the id), or ``None``.
    :param score: what its benchmarks publish as their measure, and what comparisons score
        runs by: ``"return"``, or ``"success"`` (Meta-World's). A success that is only a side
        measure (PointGoal's: within one step of the goal, which a wandering policy reaches more
        often than one that stops short) is not a score.
    :param steps_in_workers: whether a meta-batch of these envs is stepped in worker processes
        when a run has several cores (envs slow enough to step that the processes pay; the
        numbers are the same either way).
    """

    entry_point: str
    episodes_per_trial: int
    reward_scale: float = 1.0
    vector_entry_point: str | None = None
    score: Literal["return", "success"] = "return"
    steps_in_workers: bool = False


@dataclass(frozen=True)
class TaskFamily:
    """What a family declares to the rest of metabench.

    :param envs: its task envs by name.
    :param splits: its kinds of train/test split (``[split] kind`` in ``envs/*.toml``), each the
        ``"module:Class"`` of a :class:`~metabench.tasks.splits.Split`; a family without one
        trains and tests on its envs' own task distribution (``kind = "seed"``).
    """

    envs: Mapping[str, TaskEnvDeclaration]
    splits: Mapping[str, str] = field(default_factory=dict)


@functools.cache
def task_families() -> dict[str, TaskFamily]:
    """Every family of :mod:`metabench.tasks`, by package name, in alphabetical order.

    :raises ValueError: if two families declare the same env name or split kind, or a family
        a built-in kind of split.
    """
    found: dict[str, TaskFamily] = {}
    for module in sorted(pkgutil.iter_modules([str(TASKS_FOLDER)]), key=lambda m: m.name):
        if not module.ispkg:
            continue
        family = getattr(importlib.import_module(f"{TASKS_PACKAGE}.{module.name}"), "FAMILY", None)
        if isinstance(family, TaskFamily):
            found[module.name] = family
    for kind in ("envs", "splits"):
        owners = dict.fromkeys(BUILT_IN_SPLITS, "metabench") if kind == "splits" else {}
        for package, family in found.items():
            for name in getattr(family, kind):
                if name in owners:
                    raise ValueError(
                        f"task families {owners[name]} and {package} both declare {name!r} in "
                        f"their {kind}: rename one"
                        if owners[name] != "metabench"
                        else f"task family {package} declares the built-in split kind {name!r}: "
                        f"rename its own"
                    )
                owners[name] = package
    return found


def task_envs() -> dict[str, TaskEnvDeclaration]:
    """Every family's task envs, by name."""
    return {name: env for family in task_families().values() for name, env in family.envs.items()}


def sampling_task_envs() -> list[str]:
    """The task envs that sample their own tasks, by name: every env of the families without a
    kind of split of their own. A family with one (Meta-World's) draws its tasks from a split."""
    return [
        name for family in task_families().values() if not family.splits for name in family.envs
    ]


def declaration_of(env_id: str) -> TaskEnvDeclaration | None:
    """What a family declares of the task env registered as ``env_id``
    (``"metabench/<name>-v0"``); ``None`` for an env of no family (a plug-in's)."""
    return task_envs().get(env_id.removeprefix("metabench/").removesuffix("-v0"))


def split_kinds() -> dict[str, str]:
    """Every family's own kinds of split, by kind: the ``"module:Class"`` of each (the
    :data:`BUILT_IN_SPLITS` are not among them)."""
    return {
        kind: path for family in task_families().values() for kind, path in family.splits.items()
    }


def load_split_class(kind: str) -> type[Split]:
    """The class of the split kind ``kind``: one of :data:`BUILT_IN_SPLITS`, else the one a
    family declares (importing its module).

    :raises KeyError: for a kind no family declares.
    """
    if kind in BUILT_IN_SPLITS:
        return BUILT_IN_SPLITS[kind]
    module, _, name = split_kinds()[kind].partition(":")
    split_class = getattr(importlib.import_module(module), name)
    assert isinstance(split_class, type) and issubclass(split_class, Split), split_class
    return split_class
