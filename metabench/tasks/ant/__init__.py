"""Ant-Dir and Ant-Goal, the ant tasks of PEARL and VariBAD, on Gymnasium's v5 Ant model.

Each code's variant is a named protocol of the same env (``protocol="oyster"``, ...);
:mod:`metabench.tasks.ant.envs` says where they differ.
"""

from __future__ import annotations

from metabench.tasks.ant.envs import (
    CONTACT_COST_WEIGHT,
    HORIZON,
    OYSTER_TASK_COUNTS,
    AntDirEnv,
    AntDirProtocol,
    AntGoalEnv,
    AntGoalProtocol,
    AntTaskEnv,
)

__all__ = [
    "CONTACT_COST_WEIGHT",
    "HORIZON",
    "OYSTER_TASK_COUNTS",
    "AntDirEnv",
    "AntDirProtocol",
    "AntGoalEnv",
    "AntGoalProtocol",
    "AntTaskEnv",
]
