"""``metabench train`` and ``metabench evaluate``: meta-train, meta-test, record."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from rich.console import Console

from metabench.algos.base import MetaRLAlgorithm
from metabench.analysis.resultfile import write_result
from metabench.atomic import (
    atomic_write_json,
    claim_new_file,
    json_text,
    make_writable_folder,
    remove_temporaries,
)
from metabench.errors import RunError
from metabench.evaluation import MetaTestResult
from metabench.harness.algorithms import get_algorithm
from metabench.harness.hooks import (
    Checkpoints,
    NonFiniteWarning,
    PeriodicMetaTest,
    ProgressBar,
    StopOnInterrupt,
    TensorBoard,
)
from metabench.harness.loading import PERIODIC, load_run, set_test_actions
from metabench.harness.provenance import (
    code_differences,
    command_environment,
    cpu_history,
    provenance,
    provenance_differences,
)
from metabench.harness.report import make_console, metatest_table
from metabench.harness.run import RunPlan, RunSettings, build_algorithm, metatest_protocol, plan_run
from metabench.harness.trainer import Hook, MetaTest, MetaTrainer
from metabench.records import EvaluationRecord, MetaTestRecord, RunResult


def train(
    settings: RunSettings,
    console: Console | None = None,
    before_training: Callable[[], None] | None = None,
) -> RunResult:
    """Meta-train, meta-test and write ``result.json``; resumes from a checkpoint if present.

    :param before_training: called once the run directory is claimed and the run will train
        (not for a finished run, nor before a refusal): ``metabench train`` says the run's
        predicted time there, so that no prediction precedes an error.

    :raises RunError: (or ``KeyError``/``ValueError`` for bad names and hyperparameters) before
        any file is written when the settings cannot work.
    """
    console = console or make_console(stderr=True)
    plan = plan_run(settings)
    untuned = get_algorithm(settings.algorithm).untuned_note(plan.spec.name)
    if untuned is not None:
        console.print(f"note: {untuned}", soft_wrap=True, highlight=False, markup=False)
    spec, config, run = plan.spec, plan.config, plan.run
    algo = build_algorithm(spec, config, str(run.tensorboard))
    per_iteration = algo.steps_per_iteration
    if per_iteration and settings.env_steps < per_iteration:
        raise RunError(
            f"--steps {settings.env_steps} is less than one iteration of {settings.algorithm} on "
            f"{spec.name} ({per_iteration} environment steps): raise --steps"
        )
    n_iterations = settings.env_steps // per_iteration if per_iteration else 0
    run.create()
    with run.locked():
        return _train_locked(settings, plan, algo, n_iterations, console, before_training)


def _train_locked(
    settings: RunSettings,
    plan: RunPlan,
    algo: MetaRLAlgorithm,
    n_iterations: int,
    console: Console,
    before_training: Callable[[], None] | None,
) -> RunResult:
    """:func:`train` once its run directory is locked."""
    spec, config, run = plan.spec, plan.config, plan.run
    extended = run.claim(config)
    if extended is not None:
        console.print(extended)
    finished = run.completed_result()
    if finished is not None:
        console.print(f"{run.path} is already complete; its result is {run.result_path}")
        if run.keep_agent(algo):  # finished by a process killed before it could do this
            console.print(f"Kept its trained agent in {run.agent_path}")
        return finished
    if run.set_aside:
        console.print(f"{run.result_path} was corrupt (moved to {run.corrupt_path}): re-running")
    if before_training is not None:
        before_training()
    trainer = MetaTrainer(algo, n_iterations)
    state = run.load_checkpoint()
    if state is not None:
        remove_temporaries(run.path)  # writes cut off when the last process was killed
        trainer.resume(state)
        console.print(f"Resuming {run.path} at iteration {trainer.iteration} of {n_iterations}")
    trained_on = cpu_history(None if state is None else state.get("trained_on"), trainer.iteration)
    evaluator = plan.evaluator()
    metatests = [
        MetaTest("metatest", evaluator, plan.metatest_processes, "meta-testing", "metatest")
    ]
    train_evaluator = plan.train_evaluator()
    if train_evaluator is not None:  # Meta-World's meta-train success: training tasks
        metatests.append(
            MetaTest(
                "train_evaluation",
                train_evaluator,
                plan.metatest_processes,
                "meta-testing on training tasks",
            )
        )
    hooks: list[Hook] = [NonFiniteWarning(console), TensorBoard(run.tensorboard / "metabench")]
    if settings.eval_schedule:
        hooks.append(PeriodicMetaTest(plan, settings.eval_schedule))
    hooks += [
        StopOnInterrupt(console),
        Checkpoints(
            run, settings.checkpoint_every, {"command": settings.command, "trained_on": trained_on}
        ),
        ProgressBar(console, f"{spec.name} {settings.algorithm} seed {settings.seed}"),
    ]
    results = trainer.run(hooks, metatests)
    final, on_train = results["metatest"], results.get("train_evaluation")
    record = provenance(config.device, get_algorithm(settings.algorithm))
    if len(trained_on) > 1:  # resumed on another kind of CPU, which can move the last bits
        record["trained_on"] = trained_on
    result = RunResult(
        config=config,
        command=settings.command,
        provenance=record,
        iterations=n_iterations,
        env_steps=trainer.initial_steps + n_iterations * trainer.steps_per_iteration,
        env_steps_taken=algo.env_steps_taken,
        wall_time_s=trainer.wall_time,
        metatrain=dict(trainer.stats),
        metatest=MetaTestRecord.of(final),
        metatest_protocol=metatest_protocol(spec, algo, evaluator, len(plan.test_tasks)),
        train_evaluation=None if on_train is None else MetaTestRecord.of(on_train),
    )
    write_result(run.result_path, result)
    run.keep_agent(algo)
    console.print(metatest_table(final, title=f"{spec.name} / {settings.algorithm}: meta-test"))
    return result


def holds(new: Any, recorded: Any) -> bool:
    """Whether ``new`` holds every value of ``recorded`` (both as JSON reads them): a record
    written before a field was added (``null`` where it was read) is reproduced by a result that
    has it."""
    if recorded is None:
        return True
    if isinstance(recorded, dict):
        return isinstance(new, dict) and all(
            key in new and holds(new[key], value) for key, value in recorded.items()
        )
    if isinstance(recorded, list):
        return (
            isinstance(new, list)
            and len(new) == len(recorded)
            and all(holds(a, b) for a, b in zip(new, recorded, strict=True))
        )
    return bool(new == recorded)


def evaluate(
    run_dir: str | Path,
    test_tasks: int | Literal["periodic"] | None = None,
    exploration_episodes: int | None = None,
    test_episodes: int | None = None,
    console: Console | None = None,
    device: str | None = None,
    test_actions: Literal["mode", "sample"] | None = None,
    out: str | Path | None = None,
    command: str | None = None,
) -> MetaTestResult:
    """Meta-test the latest checkpoint of a run (a finished run: its trained agent); writes a new
    ``evaluate-<time>.json`` into the run's ``evaluations/``, or into ``out`` (a run that cannot
    be written to, such as a read-only copy, is evaluated so). The file records the protocol,
    the ``command`` that made it and the :func:`~metabench.harness.provenance.provenance` of the
    code and machine, as a result does.

    By default this is the run's own final meta-test again: its recorded test tasks and protocol,
    and the random streams of its checkpoint, so a finished run gives its ``result.json``
    numbers exactly (checked, and said). ``test_tasks`` (so many of the run's, the first of each
    class; ``"periodic"``: those of its meta-tests during training) and the episode counts change
    the protocol, and so does ``test_actions`` (``"mode"`` or ``"sample"``:
    :func:`~metabench.harness.loading.set_test_actions`); ``device`` (default: the run's) where
    the networks act, e.g. the CPU for a run trained on a GPU, which the evaluation file
    records.
    """
    console = console or make_console(stderr=True)
    run = load_run(run_dir, device)
    if test_actions is not None:
        set_test_actions(run.algorithm, test_actions)
    recorded_device = run.config.device
    # checked before the meta-test, not after it: a run directory copied without its
    # evaluations/ folder, or a read-only one, fails at once instead of losing the meta-test
    folder = run.plan.run.evaluations if out is None else Path(out)
    make_writable_folder(folder, "run directory" if out is None else "--out")
    evaluator = run.evaluator(test_tasks, exploration_episodes, test_episodes)
    result = evaluator.evaluate(run.algorithm, run.processes)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    protocol = metatest_protocol(run.spec, run.algorithm, evaluator, len(run.plan.test_tasks))
    entry = get_algorithm(run.config.algorithm)
    here = provenance(run.device, entry)
    if command is not None:  # with the variables a plain shell needs for a plug-in's run
        command = " ".join([*command_environment(run.spec.path, entry), command])
    record = EvaluationRecord(
        MetaTestRecord.of(result),
        iteration=run.iteration,
        # as in the periodic meta-tests' files: the subset's indices in config.json's test_tasks
        test_task_indices=run.config.periodic_test_tasks if test_tasks == PERIODIC else None,
        metatest_protocol=protocol,
        provenance=here,
        command=command,
        run=None if out is None else str(run.path.absolute()),
        # recorded where it is not the run's own, whose config.json says where it trained
        device=run.device if run.device != recorded_device else None,
    )
    atomic_write_json(claim_new_file(folder, f"evaluate-{stamp}", ".json"), record.to_json())
    console.print(metatest_table(result, title=f"{run.path}: meta-test"))
    own = (test_tasks, exploration_episodes, test_episodes, test_actions) == (None,) * 4
    if own and run.device != recorded_device:
        console.print(
            f"The run trained on {recorded_device}, this meta-test ran on {run.device}: its "
            f"numbers differ from the run's own by the devices' rounding."
        )
        return result
    recorded = run.plan.run.completed_result()
    if own and recorded is not None and recorded.iterations == run.iteration:
        result_path = run.plan.run.result_path
        new, old = (
            json.loads(json_text(m.to_json())) for m in (record.metatest, recorded.metatest)
        )
        if holds(new, old):
            console.print(f"The same numbers as the run's final meta-test ({result_path}).")
        else:
            console.print(
                f"[bold yellow]warning:[/] these numbers differ from the final meta-test in "
                f"{result_path}, measured on the same agent: {differ_because(recorded, here)}"
            )
    return result


def differ_because(recorded: RunResult, here: dict[str, Any]) -> str:
    """Why a meta-test of a run's own agent may not give its recorded numbers, as far as the
    records show: the code first (metabench's, or a third-party algorithm's module files), then
    the machine and its packages."""
    recorded_provenance = recorded.provenance
    code = code_differences(recorded_provenance, here)
    machine = provenance_differences(recorded_provenance, here)
    if code:
        also = f"; the machine also differs in {'; '.join(machine)}" if machine else ""
        return f"the code differs ({'; '.join(code)}){also}"
    # an algorithm's own state (agent_state) may also leave out what its actions depend on, such
    # as a random generator, which no record shows: said last, as the one cause left
    unsaved = (
        "the algorithm's saved state (agent_state) may lack something its actions draw on, "
        "such as a random generator's state"
    )
    if machine:
        return (
            f"this machine or its packages compute differently ({'; '.join(machine)}), or {unsaved}"
        )
    return f"its provenance records no difference in the code or the machine: {unsaved}"
