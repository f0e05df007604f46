"""Task envs and task samplers: what a task is and where tasks come from.

The protocol and the samplers (:mod:`metabench.tasks.base`) and the toys
(:mod:`metabench.tasks.toy.envs`) load with the package; the HalfCheetah envs (MuJoCo) and
Meta-World's are imported the first time one of their names is used, since ``import metabench``
imports this package to register its ids.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from metabench.tasks.base import (
    ActionScaling,
    EzPickleWithTask,
    ListTaskSampler,
    SetTaskSampler,
    Task,
    TaskEnv,
    TaskSampler,
)
from metabench.tasks.toy.envs import BanditEnv, PointGoalEnv

if TYPE_CHECKING:
    from metabench.tasks.halfcheetah.envs import (
        HalfCheetahDirEnv,
        HalfCheetahTaskEnv,
        HalfCheetahVelEnv,
    )
    from metabench.tasks.metaworld.envs import (
        MetaWorldTaskEnv,
        MetaWorldTaskSampler,
        ML1Env,
        ML10Env,
        ML45Env,
    )

_ON_FIRST_USE = {
    "HalfCheetahDirEnv": "metabench.tasks.halfcheetah.envs",
    "HalfCheetahTaskEnv": "metabench.tasks.halfcheetah.envs",
    "HalfCheetahVelEnv": "metabench.tasks.halfcheetah.envs",
    "ML1Env": "metabench.tasks.metaworld.envs",
    "ML10Env": "metabench.tasks.metaworld.envs",
    "ML45Env": "metabench.tasks.metaworld.envs",
    "MetaWorldTaskEnv": "metabench.tasks.metaworld.envs",
    "MetaWorldTaskSampler": "metabench.tasks.metaworld.envs",
}
"""The names whose module is imported on first use, and that module."""


def __getattr__(name: str) -> Any:
    """Import the module of a name of :data:`_ON_FIRST_USE` when the name is first asked for."""
    if name in _ON_FIRST_USE:
        return getattr(importlib.import_module(_ON_FIRST_USE[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ActionScaling",
    "BanditEnv",
    "EzPickleWithTask",
    "HalfCheetahDirEnv",
    "HalfCheetahTaskEnv",
    "HalfCheetahVelEnv",
    "ListTaskSampler",
    "ML1Env",
    "ML10Env",
    "ML45Env",
    "MetaWorldTaskEnv",
    "MetaWorldTaskSampler",
    "PointGoalEnv",
    "SetTaskSampler",
    "Task",
    "TaskEnv",
    "TaskSampler",
]
