"""The meta-training loop, and the hooks it calls around each iteration and meta-test.

Everything a run does besides training (checkpoints, TensorBoard, the progress bar, meta-tests
during training, stopping on Ctrl-C) is a :class:`Hook` (those of ``metabench train`` are in
:mod:`metabench.harness.hooks`): the loop is the same whatever a run asks for, and a new concern
is a new hook, not a change to the loop.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

from metabench.algos.base import MetaRLAlgorithm
from metabench.evaluation import MetaEvaluator, MetaTestResult


def iteration_stats(output: Any, algorithm: str) -> dict[str, float]:
    """What ``algo.train(1)`` returned (``dict[str, float]``, see
    :meth:`~metabench.algos.base.MetaRLAlgorithm.train`), its values as floats; ``None`` (an
    algorithm of an older interface) gives ``{}``.

    :param algorithm: who returned it, for errors (e.g. ``RandomSearch``).
    :raises ValueError: ``output`` is not a dict, or holds a value that is not a number (named
        by its key).
    """
    if output is None:
        return {}
    if not isinstance(output, dict):
        raise ValueError(
            f"{algorithm}.train() returned a {type(output).__name__}: return a dict of numbers "
            f"keyed metatrain/<name> ({{}} when there are none)"
        )
    stats = {}
    for key, value in output.items():
        try:
            if isinstance(value, (str, bytes)):
                raise TypeError
            stats[str(key)] = float(value)
        except (TypeError, ValueError):
            raise ValueError(
                f"{algorithm}.train() returned {key!r}: {value!r} ({type(value).__name__}), "
                f"which is not a number: return numbers only"
            ) from None
    return stats


@dataclass(frozen=True)
class MetaTest:
    """A meta-test that :meth:`MetaTrainer.metatest` runs, and how hooks show it."""

    name: str
    """Its key in what :meth:`MetaTrainer.run` returns (``metatest``, ``train_evaluation``)."""
    evaluator: MetaEvaluator
    processes: int | None = None
    """``MetaEvaluator.evaluate``'s ``processes``."""
    description: str | None = None
    """What the progress bar says while it runs (``None``: the bar is left as it is)."""
    tensorboard: str | None = None
    """The TensorBoard prefix of its curves (``None``: not logged)."""


class Hook:
    """Called by :class:`MetaTrainer` at fixed points of a run; every method does nothing by
    default. Hooks are called in the order they are given (:meth:`on_end` in reverse, as nested
    ``with`` blocks close), so a hook sees what the hooks before it did, ``trainer.stopping``
    included."""

    def on_start(self, trainer: MetaTrainer) -> None:
        """Before the first iteration (after a resume): open what the hook writes to."""

    def after_iteration(
        self, trainer: MetaTrainer, iteration: int, stats: dict[str, float]
    ) -> bool:
        """After iteration ``iteration`` (from 1), which returned ``stats``; ``True`` stops
        training once every hook has seen this iteration."""
        return False

    def on_training_end(self, trainer: MetaTrainer) -> None:
        """After the last iteration, or the one a hook stopped at; before the final meta-tests."""

    def before_metatest(self, trainer: MetaTrainer, metatest: MetaTest) -> None:
        """Before any meta-test, a periodic one during training included."""

    def after_metatest(
        self, trainer: MetaTrainer, metatest: MetaTest, result: MetaTestResult
    ) -> None:
        """After any meta-test, with its result."""

    def on_end(self, trainer: MetaTrainer) -> None:
        """Last, however the run ends (an error included): close what :meth:`on_start` opened."""


class MetaTrainer:
    """Trains ``algorithm`` for ``n_iterations`` iterations of ``train(1)``, from where a
    checkpoint left it (:meth:`resume`), then runs the final meta-tests; the hooks do the rest.

    :param n_iterations: the iterations of the whole run (a resumed run counts those done).
    """

    def __init__(self, algorithm: MetaRLAlgorithm, n_iterations: int) -> None:
        self.algorithm = algorithm
        self.n_iterations = n_iterations
        self.steps_per_iteration = algorithm.steps_per_iteration
        self.initial_steps = algorithm.initial_steps
        self.iteration = 0
        """The last iteration done (0: none)."""
        self.stats: dict[str, float] = {}
        """What that iteration's ``train(1)`` returned."""
        self.stopping = False
        """Whether a hook asked to stop training after the current iteration."""
        self._wall_before = 0.0
        self._began = time.perf_counter()
        self._hooks: Sequence[Hook] = ()

    @property
    def env_steps(self) -> int:
        """The environment steps taken so far: the initial collection and the iterations done
        (before the first iteration an algorithm with an initial collection has not taken it
        yet, but counting it from the start keeps the count a function of the iteration)."""
        return self.initial_steps + self.iteration * self.steps_per_iteration

    @property
    def wall_time(self) -> float:
        """Seconds of training so far, those before the resume included."""
        return self._wall_before + time.perf_counter() - self._began

    def checkpoint(self) -> dict[str, Any]:
        """What :meth:`resume` needs to go on from the last iteration done, and how far the run
        is (``n_iterations``, ``env_steps`` and ``planned_env_steps``, the whole run's with an
        initial collection: for ``metabench status``, which reads no code)."""
        return {
            "iteration": self.iteration,
            "n_iterations": self.n_iterations,
            "env_steps": self.env_steps,
            "planned_env_steps": self.initial_steps + self.n_iterations * self.steps_per_iteration,
            "algorithm": self.algorithm.state_dict(),
            "wall_time": self.wall_time,
            "metatrain": self.stats,
        }

    def resume(self, checkpoint: dict[str, Any]) -> None:
        """Go on from ``checkpoint`` (a :meth:`checkpoint` read back)."""
        self.algorithm.load_state_dict(checkpoint["algorithm"])
        self.iteration = checkpoint["iteration"]
        self._wall_before = checkpoint["wall_time"]
        self.stats = checkpoint["metatrain"]

    def metatest(self, metatest: MetaTest) -> MetaTestResult:
        """Run ``metatest`` on the algorithm as it is; the hooks of the running :meth:`run`
        (a hook's periodic meta-test) are told before and after."""
        for hook in self._hooks:
            hook.before_metatest(self, metatest)
        result = metatest.evaluator.evaluate(self.algorithm, metatest.processes)
        for hook in self._hooks:
            hook.after_metatest(self, metatest, result)
        return result

    def run(
        self, hooks: Iterable[Hook] = (), metatests: Sequence[MetaTest] = ()
    ) -> dict[str, MetaTestResult]:
        """Train the remaining iterations, then run ``metatests`` in order; their results by
        name, or ``{}`` when a hook stopped training (the run is not finished)."""
        self._hooks = list(hooks)
        self._began = time.perf_counter()
        try:
            with ExitStack() as stack:
                for hook in self._hooks:
                    hook.on_start(self)
                    stack.callback(hook.on_end, self)
                return self._run(metatests)
        finally:
            self._hooks = ()

    def _run(self, metatests: Sequence[MetaTest]) -> dict[str, MetaTestResult]:
        name = type(self.algorithm).__name__
        for iteration in range(self.iteration + 1, self.n_iterations + 1):
            self.stats = iteration_stats(self.algorithm.train(1), name)
            self.iteration = iteration
            for hook in self._hooks:
                if hook.after_iteration(self, iteration, self.stats):
                    self.stopping = True
            if self.stopping:
                break
        for hook in self._hooks:
            hook.on_training_end(self)
        if self.stopping:
            return {}
        return {metatest.name: self.metatest(metatest) for metatest in metatests}
