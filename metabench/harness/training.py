"""``metabench train`` and ``metabench evaluate``: meta-train, meta-test, record."""

from __future__ import annotations

import json
import math
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from torch.utils.tensorboard import SummaryWriter

from metabench.algos.base import MetaRLAlgorithm
from metabench.evaluation import MetaTestResult
from metabench.harness.atomic import (
    atomic_write_json,
    claim_new_file,
    json_text,
    remove_temporaries,
)
from metabench.harness.interrupt import stop_at_iteration_end
from metabench.harness.loading import load_run
from metabench.harness.provenance import provenance
from metabench.harness.report import make_console, metatest_table
from metabench.harness.resultfile import make_result, write_result
from metabench.harness.run import (
    RunError,
    RunPlan,
    RunSettings,
    build_algorithm,
    metatest_protocol,
    plan_run,
)
from metabench.rng import derived_seed


def _log_metatest(
    writer: SummaryWriter, result: MetaTestResult, env_steps: int, prefix: str = "metatest"
) -> None:
    """TensorBoard scalars of a meta-test under ``prefix``, its number of test tasks included.

    :param prefix: ``"metatest"`` for meta-tests on all the run's test tasks,
        ``"periodic_metatest"`` for those on a subset, so that the two never share a curve.
    """
    writer.add_scalar(f"{prefix}/n_test_tasks", result.n_tasks, env_steps)
    writer.add_scalar(f"{prefix}/test_return", result.test_return, env_steps)
    if result.test_episode_success_rate is not None:
        rate = result.test_episode_success_rate
        writer.add_scalar(f"{prefix}/test_success_rate", rate, env_steps)
    for k, value in enumerate(result.return_per_episode):
        writer.add_scalar(f"{prefix}/return_episode_{k + 1}", value, env_steps)


EVALUATION_STREAM = 1
"""The key of meta-test streams under a run's seed (see :func:`evaluation_seed`)."""


def evaluation_seed(seed: int, iteration: int) -> int:
    """The seed of the meta-test at ``iteration`` of the run seeded ``seed``.

    A meta-test during training (``--eval-every``) and ``metabench evaluate`` draw their
    randomness from streams of their own, derived from the run's seed and the iteration, and
    leave training's untouched: evaluating cannot change training or the final result, and
    evaluating the same checkpoint twice gives the same numbers.
    """
    return derived_seed(seed, (EVALUATION_STREAM, iteration))


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


def train(settings: RunSettings, console: Console | None = None) -> dict[str, Any]:
    """Meta-train, meta-test and write ``result.json``; resumes from a checkpoint if present.

    :raises RunError: (or ``KeyError``/``ValueError`` for bad names and hyperparameters) before
        any file is written when the settings cannot work.
    """
    console = console or make_console(stderr=True)
    plan = plan_run(settings)
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
        return _train_locked(settings, plan, algo, n_iterations, console)


def _train_locked(
    settings: RunSettings,
    plan: RunPlan,
    algo: MetaRLAlgorithm,
    n_iterations: int,
    console: Console,
) -> dict[str, Any]:
    """:func:`train` once its run directory is locked."""
    spec, config, run = plan.spec, plan.config, plan.run
    per_iteration = algo.steps_per_iteration
    run.claim(config)
    finished = run.completed_result()
    if finished is not None:
        console.print(f"{run.path} is already complete; its result is {run.result_path}")
        return finished
    if run.set_aside:
        console.print(f"{run.result_path} was corrupt (moved to {run.corrupt_path}): re-running")

    start, wall_before, last_stats = 0, 0.0, {}
    not_finite: set[str] = set()  # statistics already warned about
    state = run.load_checkpoint()
    if state is not None:
        remove_temporaries(run.path)  # writes cut off when the last process was killed
        algo.load_state_dict(state["algorithm"])
        start, wall_before, last_stats = state["iteration"], state["wall_time"], state["metatrain"]
        console.print(f"Resuming {run.path} at iteration {start} of {n_iterations}")
    evaluator = plan.evaluator()
    periodic_evaluator = plan.periodic_evaluator()
    subset = config.get("periodic_test_tasks")
    n_test_tasks = len(plan.test_tasks)
    began = time.perf_counter()
    with (
        stop_at_iteration_end(console) as stop_requested,
        SummaryWriter(str(run.tensorboard / "metabench")) as writer,
        Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            TextColumn("{task.fields[info]}"),
            console=console,
        ) as progress,
    ):
        bar = progress.add_task(
            f"{spec.name} {settings.algorithm} seed {settings.seed}",
            total=max(n_iterations, 1),
            completed=start,
            info="",
        )
        for iteration in range(start + 1, n_iterations + 1):
            last_stats = iteration_stats(algo.train(1), type(algo).__name__)
            for key in sorted(k for k, v in last_stats.items() if not math.isfinite(v)):
                if key not in not_finite:  # once per statistic: the first iteration it happens
                    not_finite.add(key)
                    console.print(
                        f"metabench: warning: {type(algo).__name__}.train() returned {key} = "
                        f"{last_stats[key]} at iteration {iteration}; result.json stores it "
                        f"as null",
                        markup=False, highlight=False, soft_wrap=True,
                    )  # fmt: skip
            env_steps = iteration * per_iteration
            for key, value in last_stats.items():
                writer.add_scalar(key, value, env_steps)
            if settings.eval_every and iteration % settings.eval_every == 0:
                with algo.evaluation_streams(evaluation_seed(settings.seed, iteration)):
                    periodic = periodic_evaluator.evaluate(algo, plan.metatest_workers)
                prefix = "metatest" if subset is None else "periodic_metatest"
                _log_metatest(writer, periodic, env_steps, prefix)
                protocol = metatest_protocol(spec, algo, periodic_evaluator, n_test_tasks)
                atomic_write_json(
                    run.evaluations / f"iteration-{iteration:06d}.json",
                    {
                        "iteration": iteration,
                        "env_steps": env_steps,
                        "metatest_protocol": protocol,
                        # the subset's indices in config.json's test_tasks
                        **({} if subset is None else {"test_task_indices": subset}),
                        **periodic.to_dict(),
                    },
                )
            stopping = stop_requested()
            if iteration % settings.checkpoint_every == 0 or iteration == n_iterations or stopping:
                run.save_checkpoint(
                    {
                        "iteration": iteration,
                        "algorithm": algo.state_dict(),
                        "wall_time": wall_before + time.perf_counter() - began,
                        "metatrain": last_stats,
                    },
                    type(algo).__name__,
                )
            average = last_stats.get(
                "metatrain/average_return", last_stats.get("metatrain/post_update_return")
            )
            info = "" if average is None else f"meta-train return {average:.2f}"
            progress.update(bar, completed=iteration, info=info)
            if stopping:
                raise KeyboardInterrupt
        if stop_requested():
            raise KeyboardInterrupt
        progress.update(bar, description="meta-testing", completed=max(n_iterations, 1))
        final = evaluator.evaluate(algo, plan.metatest_workers)
        _log_metatest(writer, final, n_iterations * per_iteration)
        train_evaluator = plan.train_evaluator()
        on_train = None
        if train_evaluator is not None:  # Meta-World's meta-train success: training tasks
            progress.update(bar, description="meta-testing on training tasks")
            on_train = train_evaluator.evaluate(algo, plan.metatest_workers)
    result = make_result(
        config=config,
        command=settings.command,
        provenance=provenance(),
        iterations=n_iterations,
        env_steps=n_iterations * per_iteration,
        wall_time_s=wall_before + time.perf_counter() - began,
        metatrain=last_stats,
        metatest=final.to_dict(),
        metatest_protocol=metatest_protocol(spec, algo, evaluator, n_test_tasks),
        train_evaluation=None if on_train is None else on_train.to_dict(),
    )
    write_result(run.result_path, result)
    console.print(metatest_table(final, title=f"{spec.name} / {settings.algorithm}: meta-test"))
    return result


def holds(new: Any, recorded: Any) -> bool:
    """Whether ``new`` holds every value of ``recorded`` (both as JSON reads them): a record
    written before a field was added is reproduced by a result that has it."""
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
    test_tasks: int | None = None,
    exploration_episodes: int | None = None,
    test_episodes: int | None = None,
    console: Console | None = None,
) -> MetaTestResult:
    """Meta-test the latest checkpoint of a run; writes a new ``evaluations/evaluate-<time>.json``.

    By default this is the run's own final meta-test again: its recorded test tasks and protocol,
    and the random streams of its checkpoint, so a finished run gives its ``result.json``
    numbers exactly (checked, and said). ``test_tasks`` (the first so many of the run's) and the
    episode counts change the protocol.
    """
    console = console or make_console(stderr=True)
    run = load_run(run_dir)
    evaluator = run.evaluator(test_tasks, exploration_episodes, test_episodes)
    result = evaluator.evaluate(run.algorithm, run.workers)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    protocol = metatest_protocol(run.spec, run.algorithm, evaluator, len(run.plan.test_tasks))
    atomic_write_json(
        claim_new_file(run.plan.run.evaluations, f"evaluate-{stamp}", ".json"),
        {"iteration": run.iteration, "metatest_protocol": protocol, **result.to_dict()},
    )
    console.print(metatest_table(result, title=f"{run.path}: meta-test"))
    own = (test_tasks, exploration_episodes, test_episodes) == (None, None, None)
    recorded = run.plan.run.completed_result()
    if own and recorded is not None and recorded["iterations"] == run.iteration:
        result_path = run.plan.run.result_path
        if holds(json.loads(json_text(result.to_dict())), recorded["metatest"]):
            console.print(f"The same numbers as the run's final meta-test ({result_path}).")
        else:
            console.print(
                f"[bold yellow]warning:[/] these numbers differ from the final meta-test in "
                f"{result_path}, measured on the same checkpoint: this machine or its packages "
                f"compute differently (compare its provenance)"
            )
    return result
