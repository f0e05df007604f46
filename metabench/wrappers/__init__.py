"""Wrappers that turn a task env into what RL2 and other meta-RL algorithms consume."""

from metabench.wrappers.rl2 import RL2Env
from metabench.wrappers.trial import (
    EPISODE_END,
    EPISODE_INDEX,
    EPISODE_RETURN,
    EPISODE_SUCCESS,
    FINAL_OBSERVATION,
    Trial,
)

__all__ = [
    "EPISODE_END",
    "EPISODE_INDEX",
    "EPISODE_RETURN",
    "EPISODE_SUCCESS",
    "FINAL_OBSERVATION",
    "RL2Env",
    "Trial",
]
