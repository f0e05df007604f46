"""Exceptions raised by metabench: the env errors subclass the built-in users already catch;
:class:`RunError` stops a command with a message that says what to change."""

from __future__ import annotations


class InvalidActionError(ValueError):
    """An action has the wrong shape or contains NaN or inf."""


class InvalidTaskError(ValueError):
    """A task is of the wrong kind for the env it is given to, or names an unknown task."""


class StepBeforeResetError(RuntimeError):
    """``step`` was called before ``reset``, or after an episode ended without a new ``reset``."""


class RunError(Exception):
    """A run cannot start or continue; the message says what to change."""
