"""The meta-tests a run made during training (``--eval-every``), read back from its
``evaluations/`` folder, and each run's best of them.

The Meta-World paper reports, per algorithm, the mean over seeds of each run's *best* meta-test
success during training (its "average maximum success rate"), not the success at the end. A
final meta-test is therefore not comparable with it; the best periodic meta-test is, with the
same upward bias: the maximum of several noisy estimates (each on a subset of the test tasks)
tends to lie above the policy's success at any one of them.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Sequence
from pathlib import Path

from metabench.analysis.formatting import format_interval, format_number, format_steps
from metabench.analysis.references import load_references
from metabench.analysis.stats import (
    RATE_BOUNDS,
    Interval,
    Result,
    episode_success_rate,
    group_runs,
    metaworld_success_rate,
    t_interval,
)
from metabench.records import EvaluationRecord, RecordVersionError

PUBLISHED_SUCCESS_METRIC = "meta-test success rate"
"""The metric of the published numbers that a run's meta-test success is set beside."""


def periodic_metatests(result_path: Path) -> list[EvaluationRecord]:
    """The meta-tests a run made during training (``--eval-every``), from the
    ``evaluations/iteration-*.json`` beside its ``result.json``, in order of iteration, of any
    version (:meth:`~metabench.records.EvaluationRecord.from_json`).

    :raises RecordVersionError: naming the file, for one of a version this metabench cannot
        read (a newer one).
    """
    files = sorted((result_path.parent / "evaluations").glob("iteration-*.json"))
    found = []
    for path in files:
        try:
            found.append(EvaluationRecord.from_json(json.loads(path.read_text())))
        except RecordVersionError as error:
            raise RecordVersionError(f"{path}: {error}") from None
    return found


@dataclasses.dataclass(frozen=True)
class BestDuringTraining:
    """One ``(benchmark, algorithm)``'s best periodic meta-test per seed (the seeds whose runs
    made periodic meta-tests with a success rate), beside their final meta-tests."""

    benchmark: str
    algorithm: str
    """Named as in the summary tables (:func:`~metabench.analysis.stats.group_runs`)."""
    seeds: tuple[int, ...]
    n_metatests: tuple[int, ...]
    """Per seed, how many periodic meta-tests the best is taken over."""
    n_tasks: tuple[int, ...]
    """The numbers of test tasks the periodic meta-tests ran on (one value, unless runs differ)."""
    best_success: tuple[float, ...]
    """Per seed, the highest fraction of test episodes that succeeded in a periodic meta-test."""
    best_at: tuple[int, ...]
    """Per seed, the env steps of meta-training at the first meta-test that reached the best."""
    best_metaworld_success: tuple[float, ...] | None
    """Per seed, the highest Meta-World's count (``None`` unless every seed records it)."""
    final_success: tuple[float | None, ...]
    """Per seed, the final meta-test's success (on all the test tasks)."""

    def best(self) -> Interval:
        """The mean over seeds of the best success, with a Student's t interval over seeds."""
        return t_interval(self.best_success, bounds=RATE_BOUNDS)

    def best_metaworld(self) -> Interval | None:
        """The same for Meta-World's count."""
        counts = self.best_metaworld_success
        return None if counts is None else t_interval(counts, bounds=RATE_BOUNDS)


def best_during_training(runs: Iterable[tuple[Path, Result]]) -> list[BestDuringTraining]:
    """Per ``(benchmark, algorithm)``, each run's best periodic meta-test success, for the runs
    with periodic meta-tests that report success (groups with none are left out), sorted as the
    summary tables."""
    runs = list(runs)
    paths = {id(result): path for path, result in runs}
    found = []
    for (benchmark, algorithm), group in group_runs(runs).items():
        per_seed = []
        for result in group:
            evals = [
                e
                for e in periodic_metatests(paths[id(result)])
                if episode_success_rate(e.metatest) is not None
            ]
            if evals:
                per_seed.append((result, evals))
        if not per_seed:
            continue
        bests: list[float] = []
        best_at: list[int] = []
        counts: list[float] | None = []
        for _, evals in per_seed:
            rates = [episode_success_rate(e.metatest) or 0.0 for e in evals]
            bests.append(max(rates))
            best_at.append(evals[rates.index(max(rates))].env_steps or 0)
            counted = [metaworld_success_rate(e.metatest) for e in evals]
            if counts is not None and None not in counted:
                counts.append(max(float(c) for c in counted if c is not None))
            else:  # a seed without Meta-World's count: no mean of the counts
                counts = None
        found.append(
            BestDuringTraining(
                benchmark=benchmark,
                algorithm=algorithm,
                seeds=tuple(r.config.seed for r, _ in per_seed),
                n_metatests=tuple(len(evals) for _, evals in per_seed),
                n_tasks=tuple(sorted({e.metatest.n_tasks for _, evals in per_seed for e in evals})),
                best_success=tuple(bests),
                best_at=tuple(best_at),
                best_metaworld_success=None if counts is None else tuple(counts),
                final_success=tuple(episode_success_rate(r.metatest) for r, _ in per_seed),
            )
        )
    return found


def _per_seed(values: Sequence[float | None], steps: Sequence[int] | None = None) -> str:
    shown = [format_number(v, 2) for v in values]
    if steps is not None:
        shown = [f"{v} ({format_steps(s)})" for v, s in zip(shown, steps, strict=True)]
    return "; ".join(shown)


def best_during_training_markdown(bests: Sequence[BestDuringTraining]) -> str:
    """Markdown: per benchmark, a table of :func:`best_during_training` beside the benchmark's
    published meta-test success rates (empty without any periodic meta-test)."""
    if not bests:
        return ""
    lines = [
        "The best meta-test of each run during training (`--eval-every`: a meta-test on a "
        "subset of the test tasks every few iterations), then the mean of those bests over "
        "seeds with a 95% Student's t interval over seeds: the statistic the Meta-World paper "
        "reports (the average maximum success rate over training). Like the published figure "
        "it is biased upward: the maximum of noisy meta-tests tends to lie above the policy's "
        "success at any one of them. The final meta-test, on every test task, is beside it.",
    ]
    published = load_references()
    for benchmark in sorted({b.benchmark for b in bests}):
        rows = [b for b in bests if b.benchmark == benchmark]
        counted = any(b.best_metaworld_success is not None for b in rows)
        lines += [
            "",
            f"### {benchmark}",
            "",
            "| algorithm | seeds | periodic meta-tests per seed (test tasks) | best success per "
            "seed (at env steps) | best success, mean over seeds |"
            + (" best Meta-World's count, mean over seeds |" if counted else "")
            + " final meta-test success per seed |",
            "| --- | --- | --- | --- | --- |" + (" --- |" if counted else "") + " --- |",
        ]
        for b in rows:
            count = b.best_metaworld()
            lines.append(
                f"| {b.algorithm} | {len(b.seeds)} | "
                f"{', '.join(map(str, b.n_metatests))} ({'/'.join(map(str, b.n_tasks))}) | "
                f"{_per_seed(b.best_success, b.best_at)} | {format_interval(b.best(), 3)} |"
                + (f" {format_interval(count, 3)} |" if counted else "")
                + f" {_per_seed(b.final_success)} |"
            )
        refs = [
            f"{ref.algorithm} {format_number(ref.value, 3)} ({ref.setting}; {ref.source})"
            for ref in published
            if ref.applies_to(benchmark)
            and ref.metric == PUBLISHED_SUCCESS_METRIC
            and ref.value is not None
        ]
        if refs:
            lines += ["", f"Published: {'; '.join(refs)}."]
    return "\n".join(lines) + "\n"
