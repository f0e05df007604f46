"""Exceptions raised by metabench, each a subclass of the built-in users already catch."""

from __future__ import annotations


class InvalidActionError(ValueError):
    """An action has the wrong shape or contains NaN or inf."""


class InvalidTaskError(ValueError):
    """A task is of the wrong kind for the env it is given to, or names an unknown task."""


class StepBeforeResetError(RuntimeError):
    """``step`` was called before ``reset``, or after an episode ended without a new ``reset``."""
