"""Task envs and task samplers: what a task is and where tasks come from."""

from metabench.tasks.base import (
    ListTaskSampler,
    SetTaskSampler,
    Task,
    TaskEnv,
    TaskSampler,
)

__all__ = ["ListTaskSampler", "SetTaskSampler", "Task", "TaskEnv", "TaskSampler"]
