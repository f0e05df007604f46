"""A trained run read back from its directory: the algorithm at its latest checkpoint and the
meta-test its run recorded, for ``metabench evaluate`` and for your own analysis::

    from metabench.harness.loading import load_run

    run = load_run("runs/HalfCheetahVel-maml-trpo-seed0")
    result = run.evaluator().evaluate(run.algorithm)  # the run's own final meta-test again
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from metabench.algos.base import MetaRLAlgorithm
from metabench.devices import DeviceError, resolve_device
from metabench.errors import RunError
from metabench.evaluation import MetaEvaluator, task_from_json
from metabench.harness.benchmarks import BenchmarkSpec, first_of_each_class
from metabench.harness.run import (
    RunDirectory,
    RunPlan,
    benchmark_for,
    build_algorithm,
    check_algorithm_known,
    metatest_processes,
)
from metabench.records import RunConfig
from metabench.tasks.base import Task

PERIODIC = "periodic"
"""``test_tasks`` of :meth:`LoadedRun.evaluator`: the test tasks of the run's meta-tests during
training (``config.json``'s ``periodic_test_tasks``), to set a checkpoint beside their curve."""


@dataclass(frozen=True)
class LoadedRun:
    """A run directory's algorithm, restored from its latest checkpoint (a finished run: its
    trained agent, ``agent.pt``), and its record.

    :param plan: the run as ``config.json`` records it (benchmark, test tasks, protocol), of
        any version (:meth:`~metabench.harness.run.RunDirectory.read_config`: a run written by
        an earlier version evaluates as the same run).
    :param algorithm: built from the recorded configuration, at the checkpoint's state, every
        random stream included: meta-testing it draws what the run's final meta-test drew.
    :param iteration: the checkpoint's training iteration (0: no checkpoint, e.g. NOP).
    :param device: where the algorithm was built (``cpu``, ``cuda``, ...): the run's own device
        unless :func:`load_run` was asked for another.
    """

    plan: RunPlan
    algorithm: MetaRLAlgorithm
    iteration: int
    device: str

    @property
    def path(self) -> Path:
        return self.plan.run.path

    @property
    def config(self) -> RunConfig:
        return self.plan.config

    @property
    def spec(self) -> BenchmarkSpec:
        return self.plan.spec

    @property
    def processes(self) -> int | None:
        """The processes of the run's own meta-test (they never change the numbers)."""
        return metatest_processes(self.config)

    def evaluator(
        self,
        test_tasks: int | Literal["periodic"] | None = None,
        exploration_episodes: int | None = None,
        test_episodes: int | None = None,
    ) -> MetaEvaluator:
        """The run's final meta-test: its recorded test tasks and protocol, or ``test_tasks`` of
        those tasks (the first of each class, as many of each: :func:`first_of_each_class`; or
        ``"periodic"``: those of its meta-tests during training) and other episode counts.

        :raises RunError: if ``test_tasks`` does not fit the run's recorded test tasks.
        """
        tasks: Sequence[Task] | None = None  # the run's own
        if test_tasks == PERIODIC:
            tasks = self.plan.periodic_test_tasks
            if tasks is None:
                raise RunError(
                    f"{self.path}: its meta-tests during training used all its test tasks: "
                    f"leave out --test-tasks periodic"
                )
        elif isinstance(test_tasks, int):
            try:
                tasks = first_of_each_class(self.plan.test_tasks, test_tasks)
            except ValueError as error:
                raise RunError(f"{self.path}: {error} (--test-tasks)") from None
        return self.plan.evaluator(tasks, exploration_episodes, test_episodes)


def load_run(path: str | Path, device: str | None = None) -> LoadedRun:
    """The run in ``path`` at its latest checkpoint, or its trained agent once it has finished.

    :param device: where its networks act (``cpu``, ``cuda``, ``auto``); ``None``: where the run
        trained. Checkpoints hold CPU tensors, so a run trained on a GPU loads on a machine
        without one; its numbers then differ from the run's by the GPU's rounding.
    :raises RunError: if ``path`` is not a run directory, or has neither a checkpoint nor a
        trained agent although its algorithm trains.
    :raises DeviceError: if the device (by default the run's) does not exist here.
    """
    run = RunDirectory(path)
    config = run.read_config()
    if config is None:
        raise RunError(f"{run.path} is not a metabench run directory (no config.json)")
    check_algorithm_known(config)
    spec = benchmark_for(config.benchmark, config.algorithm)
    tasks = tuple(task_from_json(task) for task in config.test_tasks)
    try:
        used = str(resolve_device(config.device if device is None else device))
    except DeviceError as error:
        if device is not None:
            raise
        raise DeviceError(
            f"{run.path} trained on {config.device!r}, which this machine lacks: load it "
            f"with device='cpu' (metabench evaluate --device cpu)"
        ) from error
    algorithm = build_algorithm(spec, dataclasses.replace(config, device=used), None)
    state = run.load_checkpoint()
    if state is not None:  # a run in progress, or one finished by an earlier version
        algorithm.load_state_dict(state["algorithm"])
    else:
        state = run.load_agent()
        if state is not None:
            algorithm.load_agent_state(state["algorithm"])
        elif algorithm.steps_per_iteration:
            raise RunError(
                f"{run.path} has no checkpoint or trained agent yet: train first "
                f"(metabench train ...)"
            )
    iteration = 0 if state is None else int(state["iteration"])
    return LoadedRun(RunPlan(spec, config, tasks, run), algorithm, iteration, used)


def set_test_actions(algorithm: MetaRLAlgorithm, test_actions: Literal["mode", "sample"]) -> None:
    """Make the test episodes of ``algorithm`` act with the mode of its action distribution or
    sample from it, whatever its run recorded: the same agent under Meta-World+'s protocol
    (the mode) or garage's (sampled). It sets the ``deterministic_test`` option of the
    algorithm's config, which every meta-test result records.

    :raises RunError: if the algorithm has no such option (its test episodes act as its own
        settings say: PEARL's and the references' ``deterministic_eval`` covers every episode).
    """
    config = getattr(algorithm, "config", None)
    fields = dataclasses.fields(config) if dataclasses.is_dataclass(config) else ()
    if config is None or "deterministic_test" not in {field.name for field in fields}:
        raise RunError(
            f"{type(algorithm).__name__} has no deterministic_test option, so its test episodes "
            f"act as its own settings say: leave out --test-actions"
        )
    replaced = dataclasses.replace(config, deterministic_test=test_actions == "mode")
    algorithm.config = replaced  # type: ignore[attr-defined]
