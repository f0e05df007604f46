"""``metabench train`` and ``metabench evaluate``: meta-train, meta-test, record."""

from __future__ import annotations

import dataclasses
import math
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from torch.utils.tensorboard import SummaryWriter

from metabench.evaluation import MetaTestResult
from metabench.harness.atomic import atomic_write_json, remove_temporaries
from metabench.harness.interrupt import stop_at_iteration_end
from metabench.harness.provenance import provenance
from metabench.harness.report import make_console, metatest_table
from metabench.harness.resultfile import make_result, write_result
from metabench.harness.run import (
    RunDirectory,
    RunError,
    RunSettings,
    benchmark_for,
    build_algorithm,
    check_algorithm_known,
    make_evaluator,
    metatest_protocol,
    metatest_workers,
    plan_run,
)
from metabench.rng import derived_seed
from metabench.validation import renamed_keyword


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


def evaluate(
    run_dir: str | Path,
    n_test_tasks: int | None = None,
    exploration_episodes: int | None = None,
    test_episodes: int | None = None,
    console: Console | None = None,
    *,
    n_exploration_eps: int | None = None,
    n_test_episodes: int | None = None,
) -> MetaTestResult:
    """Meta-test the latest checkpoint of a run; writes ``evaluations/evaluate-<time>.json``.

    ``exploration_episodes`` and ``test_episodes`` change the benchmark's protocol
    (``n_exploration_eps`` and ``n_test_episodes``: their old names)."""
    exploration_episodes = renamed_keyword(
        "exploration_episodes", exploration_episodes, "n_exploration_eps", n_exploration_eps
    )
    test_episodes = renamed_keyword(
        "test_episodes", test_episodes, "n_test_episodes", n_test_episodes
    )
    console = console or make_console(stderr=True)
    run = RunDirectory(run_dir)
    config = run.read_config()
    if config is None:
        raise RunError(f"{run.path} is not a metabench run directory (no config.json)")
    check_algorithm_known(config)
    spec = benchmark_for(config["benchmark"], config["algorithm"])
    if n_test_tasks is not None:
        spec = dataclasses.replace(spec, n_test_tasks=n_test_tasks)
    algo = build_algorithm(spec, config, None)
    state = run.load_checkpoint()
    if state is None and algo.steps_per_iteration:
        raise RunError(f"{run.path} has no checkpoint yet: train first (metabench train ...)")
    if state is not None:
        algo.load_state_dict(state["algorithm"])
    iteration = 0 if state is None else int(state["iteration"])
    with algo.evaluation_streams(evaluation_seed(config["seed"], iteration)):
        evaluator = make_evaluator(
            spec,
            config["seed"],
            exploration_episodes=exploration_episodes,
            test_episodes=test_episodes,
        )
        result = evaluator.evaluate(algo, metatest_workers(config))
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    protocol = metatest_protocol(spec, algo, evaluator, len(config["test_tasks"]))
    atomic_write_json(
        run.evaluations / f"evaluate-{stamp}.json",
        {
            "iteration": None if state is None else state["iteration"],
            "metatest_protocol": protocol,
            **result.to_dict(),
        },
    )
    console.print(metatest_table(result, title=f"{run.path}: meta-test"))
    return result
