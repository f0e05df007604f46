"""Point-Robot and Sparse-Point-Robot, the 2-D navigation tasks of PEARL and VariBAD.

Each code's variant is a named protocol (``protocol="oyster"`` or ``"varibad"``) of the same two
envs; :mod:`metabench.tasks.point_robot.envs` says where they differ. No MuJoCo is needed.
"""

from __future__ import annotations

from metabench.tasks.point_robot.envs import (
    GOAL_RADIUS,
    HORIZONS,
    OYSTER_N_TASKS,
    OYSTER_N_TEST_TASKS,
    OYSTER_N_TRAIN_TASKS,
    PROTOCOLS,
    PointRobotEnv,
    Protocol,
    SparsePointRobotEnv,
    oyster_goals,
    oyster_tasks,
)

__all__ = [
    "GOAL_RADIUS",
    "HORIZONS",
    "OYSTER_N_TASKS",
    "OYSTER_N_TEST_TASKS",
    "OYSTER_N_TRAIN_TASKS",
    "PROTOCOLS",
    "PointRobotEnv",
    "Protocol",
    "SparsePointRobotEnv",
    "oyster_goals",
    "oyster_tasks",
]
