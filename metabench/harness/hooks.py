"""The hooks of ``metabench train`` (see :class:`~metabench.harness.trainer.Hook`), one concern
each; :func:`~metabench.harness.training.train` gives them to the trainer in this order:
:class:`NonFiniteWarning`, :class:`TensorBoard`, :class:`PeriodicMetaTest`,
:class:`StopOnInterrupt`, :class:`Checkpoints`, :class:`ProgressBar`. The order matters: a Ctrl-C
during a periodic meta-test stops at that iteration, and its checkpoint is written after the
iteration's evaluation file, so that resuming from it never skips one.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from torch.utils.tensorboard import SummaryWriter

from metabench.analysis.formatting import format_duration
from metabench.analysis.stats import metatrain_return
from metabench.atomic import atomic_write_json
from metabench.evaluation import MetaTestResult
from metabench.harness.algorithms import get_algorithm
from metabench.harness.interrupt import interrupts_at_once, stop_at_iteration_end
from metabench.harness.provenance import provenance
from metabench.harness.run import RunDirectory, RunPlan, metatest_protocol
from metabench.harness.schedule import MetaTestSchedule
from metabench.harness.trainer import Hook, MetaTest, MetaTrainer
from metabench.records import EvaluationRecord, MetaTestRecord
from metabench.rng import EVALUATION


def evaluation_seed(seed: int, iteration: int) -> int:
    """The seed of the meta-test at ``iteration`` of the run seeded ``seed``.

    A meta-test during training (``--eval-every``) and ``metabench evaluate`` draw their
    randomness from streams of their own, derived from the run's seed and the iteration, and
    leave training's untouched: evaluating cannot change training or the final result, and
    evaluating the same checkpoint twice gives the same numbers.
    """
    return EVALUATION.seed(seed, iteration)


class NonFiniteWarning(Hook):
    """Warns once per statistic, the first iteration ``train()`` returns it NaN or infinite:
    ``result.json`` stores such a value as null."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.warned: set[str] = set()

    def after_iteration(
        self, trainer: MetaTrainer, iteration: int, stats: dict[str, float]
    ) -> bool:
        for key in sorted(k for k, v in stats.items() if not math.isfinite(v)):
            if key not in self.warned:
                self.warned.add(key)
                self.console.print(
                    f"metabench: warning: {type(trainer.algorithm).__name__}.train() returned "
                    f"{key} = {stats[key]} at iteration {iteration}; result.json stores it as null",
                    markup=False, highlight=False, soft_wrap=True,
                )  # fmt: skip
        return False


class TensorBoard(Hook):
    """Each iteration's statistics, and the meta-tests that name a prefix
    (:attr:`~metabench.harness.trainer.MetaTest.tensorboard`), against environment steps."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self._stack = ExitStack()

    def on_start(self, trainer: MetaTrainer) -> None:
        self.writer = self._stack.enter_context(SummaryWriter(str(self.log_dir)))

    def after_iteration(
        self, trainer: MetaTrainer, iteration: int, stats: dict[str, float]
    ) -> bool:
        for key, value in stats.items():
            self.writer.add_scalar(key, value, trainer.env_steps)
        return False

    def after_metatest(
        self, trainer: MetaTrainer, metatest: MetaTest, result: MetaTestResult
    ) -> None:
        """Under ``metatest`` for meta-tests on all the run's test tasks and
        ``periodic_metatest`` for those on a subset, so that the two never share a curve; the
        number of test tasks included."""
        prefix, step = metatest.tensorboard, trainer.env_steps
        if prefix is None:
            return
        self.writer.add_scalar(f"{prefix}/n_test_tasks", result.n_tasks, step)
        self.writer.add_scalar(f"{prefix}/test_return", result.test_return, step)
        if result.test_episode_success_rate is not None:
            rate = result.test_episode_success_rate
            self.writer.add_scalar(f"{prefix}/test_success_rate", rate, step)
        for k, value in enumerate(result.return_per_episode):
            self.writer.add_scalar(f"{prefix}/return_episode_{k + 1}", value, step)

    def on_end(self, trainer: MetaTrainer) -> None:
        self._stack.close()


class PeriodicMetaTest(Hook):
    """At each point of ``schedule``, meta-tests the run (on ``[evaluation] periodic_test_tasks``
    when the benchmark sets them) in evaluation streams of its own, and writes
    ``evaluations/iteration-NNNNNN.json``, with the provenance of the process that ran it (a
    run resumed elsewhere has files from each)."""

    def __init__(self, plan: RunPlan, schedule: MetaTestSchedule) -> None:
        self.plan, self.schedule = plan, schedule
        self.provenance = provenance(plan.config.device, get_algorithm(plan.config.algorithm))
        self.subset = plan.config.periodic_test_tasks
        self.metatest = MetaTest(
            "periodic_metatest",
            plan.periodic_evaluator(),
            plan.metatest_processes,
            tensorboard="metatest" if self.subset is None else "periodic_metatest",
        )

    def after_iteration(
        self, trainer: MetaTrainer, iteration: int, stats: dict[str, float]
    ) -> bool:
        if not self.schedule.due(iteration, trainer.steps_per_iteration):
            return False
        algo = trainer.algorithm
        with algo.evaluation_streams(evaluation_seed(self.plan.config.seed, iteration)):
            result = trainer.metatest(self.metatest)
        n_test_tasks = len(self.plan.test_tasks)
        protocol = metatest_protocol(self.plan.spec, algo, self.metatest.evaluator, n_test_tasks)
        record = EvaluationRecord(
            MetaTestRecord.of(result),
            iteration=iteration,
            env_steps=trainer.env_steps,
            test_task_indices=self.subset,  # the subset's indices in config.json's test_tasks
            metatest_protocol=protocol,
            provenance=self.provenance,
        )
        atomic_write_json(
            self.plan.run.evaluations / f"iteration-{iteration:06d}.json", record.to_json()
        )
        return False


class StopOnInterrupt(Hook):
    """The first Ctrl-C stops training after the iteration it came in (see
    :mod:`metabench.harness.interrupt`), then raises ``KeyboardInterrupt`` before the final
    meta-test; hooks after this one see ``trainer.stopping`` (the checkpoint is written).

    Once training is over, Ctrl-C interrupts at once: the last checkpoint is written and the
    final meta-test writes nothing until it ends, so there is nothing to wait for, and running
    the command again runs the meta-test again."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._stack = ExitStack()
        self._requested: Callable[[], bool] = lambda: False

    def on_start(self, trainer: MetaTrainer) -> None:
        self._requested = self._stack.enter_context(stop_at_iteration_end(self.console))

    def after_iteration(
        self, trainer: MetaTrainer, iteration: int, stats: dict[str, float]
    ) -> bool:
        return self._requested()

    def on_training_end(self, trainer: MetaTrainer) -> None:
        if self._requested():
            raise KeyboardInterrupt
        self._stack.close()
        self._stack.enter_context(interrupts_at_once())  # the usual Ctrl-C again

    def on_end(self, trainer: MetaTrainer) -> None:
        self._stack.close()


class Checkpoints(Hook):
    """Writes the checkpoint every ``every`` iterations, at the last iteration, and at the one
    training stops at (``trainer.stopping``, set by the hooks before this one), with the plain
    values of ``record`` beside the trainer's state (the command that resumes the run, which
    ``metabench status`` shows, and the CPUs that trained it)."""

    def __init__(
        self, run: RunDirectory, every: int, record: Mapping[str, Any] | None = None
    ) -> None:
        self.run, self.every, self.record = run, every, dict(record or {})

    def after_iteration(
        self, trainer: MetaTrainer, iteration: int, stats: dict[str, float]
    ) -> bool:
        if iteration % self.every == 0 or iteration == trainer.n_iterations or trainer.stopping:
            state = {**trainer.checkpoint(), **self.record}
            self.run.save_checkpoint(state, type(trainer.algorithm).__name__)
        return False


class ProgressBar(Hook):
    """Iterations done, time left and the latest meta-train return; a line for each periodic
    meta-test; then which final meta-test runs.

    In a terminal this is a live bar. Elsewhere (a run under ``nohup`` or a batch scheduler,
    whose log a bar never reaches) it prints the same as a line at most every ``line_every_s``
    seconds, and after the last iteration, so that a log of a run of hours shows how far it is.
    """

    def __init__(self, console: Console, description: str, line_every_s: float = 300.0) -> None:
        self.console, self.description = console, description
        self.line_every_s = line_every_s
        self._stack = ExitStack()

    def on_start(self, trainer: MetaTrainer) -> None:
        self.live = self.console.is_terminal
        self.start_iteration, self.start_time = trainer.iteration, time.monotonic()
        self.last_line = -math.inf
        if not self.live:
            return
        self.progress = self._stack.enter_context(
            Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeRemainingColumn(),
                TextColumn("{task.fields[info]}"),
                console=self.console,
            )
        )
        self.bar = self.progress.add_task(
            self.description,
            total=max(trainer.n_iterations, 1),
            completed=trainer.iteration,
            info="",
        )

    def after_iteration(
        self, trainer: MetaTrainer, iteration: int, stats: dict[str, float]
    ) -> bool:
        average = metatrain_return(stats)
        info = "" if average is None else f"meta-train return {average:.2f}"
        if self.live:
            self.progress.update(self.bar, completed=iteration, info=info)
            return False
        now = time.monotonic()
        if now - self.last_line >= self.line_every_s or iteration == trainer.n_iterations:
            self.last_line = now
            per_iteration = (now - self.start_time) / max(iteration - self.start_iteration, 1)
            left = per_iteration * (trainer.n_iterations - iteration)
            self._print(
                f"iteration {iteration}/{trainer.n_iterations}, {trainer.env_steps:,} env steps, "
                f"{per_iteration:.1f} s per iteration, {format_duration(left)} left"
                + (f", {info}" if info else "")
            )
        return False

    def before_metatest(self, trainer: MetaTrainer, metatest: MetaTest) -> None:
        if metatest.description is None:
            return
        if self.live:
            completed = max(trainer.n_iterations, 1)
            self.progress.update(self.bar, description=metatest.description, completed=completed)
        else:
            self._print(metatest.description)

    def after_metatest(
        self, trainer: MetaTrainer, metatest: MetaTest, result: MetaTestResult
    ) -> None:
        """One line per meta-test during training (the final ones print their tables)."""
        if metatest.description is not None:
            return
        success = result.test_episode_success_rate
        count = result.metaworld
        self._print(
            f"meta-test at iteration {trainer.iteration} ({trainer.env_steps:,} env steps, "
            f"{result.n_tasks} test tasks): test return {result.test_return:.2f}"
            + ("" if success is None else f", success {success:.2f}")
            + ("" if count is None else f", Meta-World's count {count.success_rate:.2f}")
        )

    def _print(self, text: str) -> None:
        self.console.print(
            f"{self.description}: {text}", markup=False, highlight=False, soft_wrap=True
        )

    def on_end(self, trainer: MetaTrainer) -> None:
        self._stack.close()
