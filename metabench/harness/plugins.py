"""The plug-in contract: what metabench checks of an algorithm's Python side, and what it records
about an algorithm it does not ship.

An algorithm is a spec file (``baselines/<name>.toml``, in a ``METABENCH_SPECS`` folder, or
registered by a package's ``metabench.algorithms`` entry point) whose ``entry_point`` names an
:class:`~metabench.algos.implementation.Implementation`. Each check ends in a one-line error that
names the file and what to change:

- when the implementation is loaded: its module imports, it names a
  :class:`~metabench.algos.base.MetaRLAlgorithm` subclass and a dataclass, and its functions
  take the arguments metabench passes them (:func:`check_implementation`);
- when the algorithm is built, before a run writes anything: it is a
  :class:`~metabench.algos.base.MetaRLAlgorithm` that says how many environment steps one
  ``train()`` iteration takes (:func:`check_algorithm`);
- every iteration: ``train()`` returns numbers (:func:`metabench.harness.trainer.iteration_stats`);
- every checkpoint: ``state_dict()`` holds only what a checkpoint can read back
  (:meth:`metabench.harness.run.RunDirectory.save_checkpoint`).

The runs of such an algorithm record where it came from
(:func:`metabench.harness.provenance.algorithm_record`), and an error raised inside its code names
the method, file and line it came from (:func:`user_code_error`).
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import reprlib
import traceback
from collections.abc import Iterable
from typing import Any

from metabench.algos.base import MetaRLAlgorithm
from metabench.algos.implementation import Implementation
from metabench.harness.specfiles import SpecError

ARGUMENTS = {
    "benchmark_defaults": ("spec",),
    "check_benchmark": ("spec", "config"),
}
"""The arguments metabench passes to each function of an :class:`Implementation`."""


def check_implementation(implementation: Implementation, where: str) -> None:
    """Raise :class:`SpecError` (prefixed ``where``) if ``implementation`` does not name a
    :class:`MetaRLAlgorithm` subclass that metabench can build and a config dataclass, or one of
    its functions cannot be called with the arguments metabench passes it (:data:`ARGUMENTS`)."""
    algorithm, config = implementation.algorithm, implementation.config
    if not (isinstance(algorithm, type) and issubclass(algorithm, MetaRLAlgorithm)):
        raise SpecError(
            f"{where}: its algorithm is {reprlib.repr(algorithm)}, not a subclass of "
            f"metabench.algos.base.MetaRLAlgorithm: pass your algorithm's class"
        )
    if not (isinstance(config, type) and dataclasses.is_dataclass(config)):
        raise SpecError(
            f"{where}: its config is {reprlib.repr(config)}, not a dataclass: pass a frozen "
            f"dataclass of metabench.validation.option fields"
        )
    if not config.__dataclass_params__.frozen:  # type: ignore[attr-defined]
        raise SpecError(
            f"{where}: its config {config.__name__} is not frozen: declare it "
            f"@dataclasses.dataclass(frozen=True), so that a run's hyperparameters cannot change"
        )
    plain = [field.name for field in dataclasses.fields(config) if "doc" not in field.metadata]
    if plain:
        raise SpecError(
            f"{where}: {config.__name__}.{plain[0]} is a plain dataclass field: declare it with "
            f"metabench.validation.option(default, doc, low=..., high=...), so that metabench "
            f"can document it and refuse bad values before a run starts"
        )
    if algorithm.from_benchmark.__func__ is MetaRLAlgorithm.from_benchmark.__func__:  # type: ignore[attr-defined]
        function: Any = algorithm  # the default from_benchmark calls the constructor
        keywords: tuple[str, ...] = ("seed", "env_kwargs", "log_dir", "device")
        call = f"__init__(env, sampler, config, *, {', '.join(keywords)})"
        names: tuple[str, ...] = ("env", "sampler", "config")
    else:
        function = algorithm.from_benchmark
        call = "from_benchmark(envs, config, *, log_dir, device)"
        names, keywords = ("envs", "config"), ("log_dir", "device")
    try:
        inspect.signature(function).bind(*names, **dict.fromkeys(keywords))
    except TypeError:
        parameters = inspect.signature(function).parameters
        takes_any = any(p.kind is p.VAR_KEYWORD for p in parameters.values())
        missing = [k for k in keywords if k not in parameters and not takes_any]
        lacking = f" (it lacks {', '.join(missing)})" if missing else ""
        if function is algorithm:
            fix = "give the constructor those arguments, or override from_benchmark"
            shown = f"{algorithm.__name__}.__init__{inspect.signature(function)}"
        else:
            fix = "give it those arguments (**kwargs takes the ones it does not use)"
            shown = f"{algorithm.__name__}.from_benchmark{inspect.signature(function)}"
        raise SpecError(
            f"{where}: {algorithm.__name__} is built as {call}, which {shown} does not "
            f"take{lacking}: {fix}"
        ) from None
    for field, names in ARGUMENTS.items():
        function = getattr(implementation, field)
        if function is None:
            continue
        if not callable(function):
            raise SpecError(f"{where}: its {field} is a {type(function).__name__}, not a function")
        try:
            signature = inspect.signature(function)
        except (TypeError, ValueError):  # a built-in: nothing to check
            continue
        try:
            signature.bind(*names)
        except TypeError:
            raise SpecError(
                f"{where}: its {field} takes {signature} but is called as "
                f"{field}({', '.join(names)}): give it those arguments"
            ) from None


def check_algorithm(algo: Any, where: str) -> MetaRLAlgorithm:
    """``algo`` (what ``from_benchmark`` returned), or :class:`SpecError` (prefixed ``where``)
    if it is not a :class:`MetaRLAlgorithm` or does not set ``steps_per_iteration`` to an
    integer >= 0: without it, ``--steps`` cannot be turned into ``train()`` iterations."""
    if not isinstance(algo, MetaRLAlgorithm):
        raise SpecError(
            f"{where}: its from_benchmark returned a {type(algo).__name__}, not a "
            f"metabench.algos.base.MetaRLAlgorithm: return an instance of your subclass"
        )
    name = type(algo).__name__
    steps = getattr(algo, "steps_per_iteration", None)
    if steps is None:
        raise SpecError(
            f"{where}: {name} does not set steps_per_iteration, so --steps cannot say how many "
            f"train() iterations to run: set it to the environment steps one iteration takes "
            f"(0 if {name} does not meta-train)"
        )
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        raise SpecError(
            f"{where}: {name}.steps_per_iteration must be an int >= 0, got {steps!r} "
            f"({type(steps).__name__})"
        )
    return algo


def import_error(error: BaseException, module: str) -> str:
    """Why ``module`` did not import, in one line, with the fix where there is one."""
    missing = error.name if isinstance(error, ModuleNotFoundError) else None
    if missing and (module == missing or module.startswith(f"{missing}.")):
        return (
            f"no module named {missing!r}: install the package that holds it, or add the "
            f"folder that holds it to PYTHONPATH"
        )
    frames = [
        frame
        for frame in traceback.extract_tb(error.__traceback__)
        if not frame.filename.startswith("<")  # importlib's own frames
    ]
    where = f" ({shown_path(frames[-1].filename)}:{frames[-1].lineno})" if frames else ""
    return f"{type(error).__name__}: {first_line(error)}{where}"


def user_code_error(error: BaseException, modules: Iterable[str]) -> str | None:
    """``error in <method> (<file>:<line>): <type>: <message>`` when ``error`` came out of the
    code of ``modules`` (third-party algorithms' modules; any module of their top-level
    packages), else ``None``.

    ``<method>`` is the first function of that code on the way down (``adapt_policy``,
    ``train``, ``from_benchmark``, ...), ``<file>:<line>`` the last line of it the error passed
    through.
    """
    packages = {module.split(".")[0] for module in modules} - {"metabench"}
    frames = [
        (frame, line)
        for frame, line in traceback.walk_tb(error.__traceback__)
        if str(frame.f_globals.get("__name__", "")).split(".")[0] in packages
    ]
    if not frames:
        return None
    method = frames[0][0].f_code.co_name
    last, line = frames[-1]
    where = f"{shown_path(last.f_code.co_filename)}:{line}"
    return f"error in {method} ({where}): {type(error).__name__}: {first_line(error)}"


def first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else ""


def shown_path(filename: str) -> str:
    """``filename`` relative to the working folder when it lies inside it."""
    relative = os.path.relpath(filename)
    return filename if relative.startswith("..") else relative
