"""The physical parameters that a Rand-Params task sets, drawn as ``rand_param_envs`` draws them.

``rand_param_envs/base.py`` (``dennisl88/rand_param_envs`` 4d1529d, oyster's submodule and the
copy VariBAD vendors at 57e1795) ``RandomEnv.sample_tasks``: for each task, in this order, every
element of ``body_mass``, ``body_inertia``, ``dof_damping`` and ``geom_friction`` is its value in
the model as loaded times ``base ** U(-3, 3)``, one independent draw per element, with base 1.5,
except ``dof_damping``'s 1.3. A task holds the new values themselves, which ``set_task`` writes
into the model: every task scales the nominal model, so tasks do not compound.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from metabench.errors import InvalidTaskError

LOG_SCALE_LIMIT = 3.0
"""``log_scale_limit``: the exponent is uniform in ``[-3, 3]`` (``Walker2DRandParamsEnv`` and
``HopperRandParamsEnv``'s default, which neither oyster nor VariBAD changes)."""

SCALE_BASES: Mapping[str, float] = {
    "body_mass": 1.5,
    "body_inertia": 1.5,
    "dof_damping": 1.3,
    "geom_friction": 1.5,
}
"""Each randomised parameter and the base of its log-uniform multiplier, in the order
``sample_tasks`` draws them (``RAND_PARAMS``, all four by default)."""

RAND_PARAMS = tuple(SCALE_BASES)
"""The names of the randomised ``MjModel`` fields."""


def nominal_parameters(model: Any) -> dict[str, np.ndarray]:
    """Copies of the randomised fields of ``model`` as loaded (``RandomEnv.save_parameters``)."""
    return {name: np.array(getattr(model, name), dtype=np.float64) for name in RAND_PARAMS}


def sample_parameters(
    nominal: Mapping[str, np.ndarray], n: int, rng: np.random.Generator
) -> list[dict[str, Any]]:
    """``n`` tasks: the fields of :data:`RAND_PARAMS`, each ``nominal`` times its multiplier, as
    nested lists of floats (the arrays' shapes)."""
    tasks = []
    for _ in range(n):
        task = {}
        for name, base in SCALE_BASES.items():
            exponents = rng.uniform(-LOG_SCALE_LIMIT, LOG_SCALE_LIMIT, size=nominal[name].shape)
            task[name] = (nominal[name] * np.array(base) ** exponents).tolist()
        tasks.append(task)
    return tasks


def validated_parameters(
    task: Any, nominal: Mapping[str, np.ndarray], env_name: str
) -> dict[str, np.ndarray]:
    """The arrays of a task, or :class:`InvalidTaskError` saying what a valid one holds: the four
    fields, each of the model's shape, finite, non-negative, and positive where the model's own
    value is (a massless link or a frictionless foot is not a task of this family)."""
    if not isinstance(task, Mapping) or set(task) != set(RAND_PARAMS):
        keys = sorted(task) if isinstance(task, Mapping) else type(task).__name__
        raise InvalidTaskError(
            f"{env_name} expects a task with the keys {', '.join(RAND_PARAMS)}, got {keys}; "
            f"use env.sample_tasks(n) to make valid tasks"
        )
    arrays = {}
    for name in RAND_PARAMS:
        try:
            values = np.array(task[name], dtype=np.float64)
        except (TypeError, ValueError):
            raise InvalidTaskError(
                f"task[{name!r}] must be numbers in an array of shape {nominal[name].shape}"
            ) from None
        if values.shape != nominal[name].shape:
            raise InvalidTaskError(
                f"task[{name!r}] has shape {values.shape}, the model's {name} has "
                f"{nominal[name].shape}: make tasks with this env's sample_tasks"
            )
        if not np.isfinite(values).all() or (values < 0).any():
            raise InvalidTaskError(f"task[{name!r}] must be finite and non-negative")
        if ((values == 0) & (nominal[name] > 0)).any():
            raise InvalidTaskError(
                f"task[{name!r}] is zero where the model's {name} is positive: scale it, "
                f"do not zero it"
            )
        arrays[name] = values
    return arrays
