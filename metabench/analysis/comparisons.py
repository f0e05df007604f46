"""Comparisons between the algorithms of a benchmark, over seeds: performance profiles and the
probability of improvement (rliable; Agarwal et al., "Deep RL at the edge of the statistical
precipice", NeurIPS 2021), and their Markdown tables.

rliable is imported inside the functions that use it: it loads arch, statsmodels and pandas.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType

import numpy as np

from metabench.analysis.formatting import format_interval, format_number
from metabench.analysis.stats import (
    Interval,
    Result,
    ResultLike,
    check_confidence,
    checked_sample,
    episode_success_rate,
    group_runs,
    seeded_global_rng,
)
from metabench.tasks.family import declaration_of

__all__ = [
    "COMPARISON_RESAMPLES",
    "NORMALISED_LABEL",
    "PROFILE_THRESHOLDS_RETURN",
    "PROFILE_THRESHOLDS_SUCCESS",
    "RAW_RETURN_LABEL",
    "RAW_RETURN_THRESHOLDS",
    "RETURN_SCALES",
    "SUCCESS_LABEL",
    "Comparison",
    "ReturnScale",
    "benchmark_scores",
    "compare",
    "comparison_markdown",
    "improvement_interval",
    "performance_profile",
    "probability_of_improvement",
    "profile_thresholds",
]

PROFILE_THRESHOLDS_SUCCESS = (0.0, 0.1, 0.25, 0.5, 0.75)
"""Thresholds of the performance profile tables where the score is meta-test success."""
PROFILE_THRESHOLDS_RETURN = (0.0, 0.25, 0.5, 0.75, 1.0)
"""Thresholds of the performance profile tables where the score is the normalised return."""
RAW_RETURN_THRESHOLDS = 5
"""How many thresholds, evenly spaced from the lowest run to the highest, a performance profile
table has where the score is a return without a fixed scale."""
SUCCESS_LABEL = (
    "meta-test success (the fraction of test episodes that succeeded: 0 is none, 1 every one)"
)
"""What the score is on a benchmark whose runs all report success."""
RAW_RETURN_LABEL = (
    "post-adaptation return as it is, not normalised (this benchmark has no fixed 0 and 1 in "
    "metabench.analysis.comparisons.RETURN_SCALES)"
)
"""What the score is on a benchmark without success and without a :data:`RETURN_SCALES` entry."""
NORMALISED_LABEL = "post-adaptation return normalised so that"
"""How the label of a score on a :class:`ReturnScale` begins."""


@dataclasses.dataclass(frozen=True)
class ReturnScale:
    """A benchmark's fixed 0 and 1 of the normalised return, each with what it is.

    Fixed per benchmark, so that a run's normalised score does not move when other rows are
    added or removed. A row of the table (an oracle, say) is never used as 1: the oracle is a
    ceiling only at a budget long enough for it, and at ``--profile quick`` it scores below
    MAML-TRPO on HalfCheetahVel.
    """

    zero: float
    zero_is: str
    one: float
    one_is: str
    """What 1 is: a ceiling at every budget (the reward's upper bound), never a run's return."""

    def __post_init__(self) -> None:
        if not self.one > self.zero:
            raise ValueError(f"a ReturnScale's one must be above its zero, got {self!r}")

    def normalise(self, returns: np.ndarray) -> np.ndarray:
        """``returns`` on this scale: 0 at :attr:`zero`, 1 at :attr:`one`."""
        return (returns - self.zero) / (self.one - self.zero)

    def describe(self) -> str:
        """The score in words, as the tables and plots state it once per benchmark."""
        return (
            f"{NORMALISED_LABEL} 0 is {self.zero:g} ({self.zero_is}) and 1 is {self.one:g} "
            f"({self.one_is})"
        )


RETURN_SCALES: Mapping[str, ReturnScale] = MappingProxyType(
    {
        "HalfCheetahVel": ReturnScale(
            zero=-100.0,
            zero_is="standing still, in expectation over the target velocities",
            one=0.0,
            one_is="the reward's maximum: a ceiling at any budget",
        ),
    }
)
"""The fixed 0 and 1 of the normalised return of the benchmarks that have them, by benchmark.
HalfCheetahVel: 0 is standing still, the reward ``-|v - target|`` at ``v = 0`` over the 100-step
episode in expectation over the target velocities U[0, 2) (-100; NOP, zero actions, scores about
-99); 1 is the reward's maximum, the target velocity at every step without control cost (0).
HalfCheetahDir has none: its reward, the velocity in the task's direction, has no upper bound,
and no return is published for it; its comparisons use the return itself
(:data:`RAW_RETURN_LABEL`), as does any benchmark not listed here."""
COMPARISON_RESAMPLES = 2_000
"""Bootstrap resamples of the performance profiles and probabilities of improvement
(rliable's default for profiles)."""


@dataclasses.dataclass(frozen=True)
class Comparison:
    """The algorithms of one benchmark compared over seeds (:func:`compare`), on one score per
    run: meta-test success, or the post-adaptation return on the benchmark's fixed scale
    (:func:`benchmark_scores`).
    """

    benchmark: str
    score: str
    """What the scores are, in words."""
    algorithms: tuple[str, ...]
    scores: tuple[tuple[float, ...], ...]
    """Per algorithm, its score on each seed."""
    thresholds: tuple[float, ...]
    profiles: tuple[tuple[Interval, ...], ...]
    """Per algorithm, at each threshold: the fraction of its runs scoring above it, with a
    percentile bootstrap interval over its seeds (NaN bounds with one seed)."""
    improvement: tuple[tuple[float | None, ...], ...]
    """``improvement[i][j]``: P(algorithm i > algorithm j); ``None`` on the diagonal and where
    either has a single seed."""

    @property
    def n_seeds(self) -> tuple[int, ...]:
        return tuple(len(scores) for scores in self.scores)


def _runs_score(runs: Sequence[Result], success: bool) -> np.ndarray:
    if success:
        return np.array([episode_success_rate(run.metatest) for run in runs], dtype=np.float64)
    return np.array([run.metatest.test_return for run in runs], dtype=np.float64)


def _scored_by_success(env_id: str) -> bool:
    declared = declaration_of(env_id)
    return declared is not None and declared.score == "success"


def _benchmark_of(groups: Mapping[str, Sequence[Result]]) -> str | None:
    """The one benchmark the runs of ``groups`` belong to (``None`` without runs)."""
    names = {run.config.benchmark for runs in groups.values() for run in runs}
    if len(names) > 1:
        raise ValueError(f"benchmark_scores compares one benchmark at a time, got {sorted(names)}")
    return next(iter(names), None)


def benchmark_scores(groups: Mapping[str, Sequence[Result]]) -> tuple[str, dict[str, np.ndarray]]:
    """One score per run of each algorithm of one benchmark (``groups``: by algorithm, as
    :func:`group_runs` gives them), and what the score is, in words (its 0 and 1 included).

    * Meta-test success (:func:`episode_success_rate`) where every run reports it and its task
      family scores by success (Meta-World's: ``TaskEnvDeclaration.score``;
      :data:`SUCCESS_LABEL`). Elsewhere success is a side measure and the return is the score.
    * Otherwise the post-adaptation return, on the benchmark's fixed scale where
      :data:`RETURN_SCALES` has one, else as it is (:data:`RAW_RETURN_LABEL`). Either way a
      run's score depends on that run alone, never on the other rows present. A scale whose 1
      a run exceeds is no ceiling for these runs (a plug-in benchmark under a built-in's name,
      say): the return is then compared as it is, and the label says why. Runs with a
      non-finite return are left out.

    :raises ValueError: if the runs belong to several benchmarks.
    """
    benchmark = _benchmark_of(groups)
    success = all(
        episode_success_rate(run.metatest) is not None and _scored_by_success(run.config.env_id)
        for runs in groups.values()
        for run in runs
    )
    raw = {algorithm: _runs_score(runs, success) for algorithm, runs in groups.items()}
    raw = {algorithm: scores[np.isfinite(scores)] for algorithm, scores in raw.items()}
    raw = {algorithm: scores for algorithm, scores in raw.items() if scores.size}
    if success:
        return SUCCESS_LABEL, raw
    scale = None if benchmark is None else RETURN_SCALES.get(benchmark)
    if scale is None:
        return RAW_RETURN_LABEL, raw
    above = [algorithm for algorithm, s in raw.items() if np.any(s > scale.one)]
    if above:
        label = (
            f"post-adaptation return as it is, not normalised: {', '.join(above)} scored above "
            f"{scale.one:g}, the 1 of {benchmark}'s fixed scale, which is then no ceiling"
        )
        return label, raw
    return scale.describe(), {algorithm: scale.normalise(s) for algorithm, s in raw.items()}


def profile_thresholds(label: str, scores: Mapping[str, np.ndarray]) -> tuple[float, ...]:
    """The thresholds of a performance profile table for scores that :func:`benchmark_scores`
    labelled ``label``: fixed ones for success and for a normalised return; for a return without
    a fixed scale, :data:`RAW_RETURN_THRESHOLDS` evenly spaced from the lowest run to the highest
    (3 significant digits), since no other range means anything there."""
    if label == SUCCESS_LABEL:
        return PROFILE_THRESHOLDS_SUCCESS
    if label.startswith(NORMALISED_LABEL):
        return PROFILE_THRESHOLDS_RETURN
    every = np.concatenate([np.zeros(0), *scores.values()])
    if every.size == 0:
        return ()
    points = np.linspace(float(every.min()), float(every.max()), RAW_RETURN_THRESHOLDS)
    return tuple(dict.fromkeys(float(f"{p:.3g}") for p in points))


def _fraction_above(scores: np.ndarray, thresholds: Sequence[float] | np.ndarray) -> np.ndarray:
    """The fraction of ``scores`` above each threshold: rliable's ``score_distributions``
    (``library.run_score_deviation`` at each threshold), vectorised over the thresholds."""
    return np.mean(np.reshape(scores, (-1, 1)) > np.asarray(thresholds)[None, :], axis=0)


def performance_profile(
    scores: Mapping[str, np.ndarray],
    thresholds: Sequence[float] | np.ndarray,
    confidence: float = 0.95,
    n_resamples: int = COMPARISON_RESAMPLES,
    seed: int = 0,
) -> dict[str, list[Interval]]:
    """Per algorithm (``scores``: one number per seed), the fraction of its runs scoring above
    each threshold, with rliable's stratified percentile bootstrap interval over seeds
    (``library.create_performance_profile``: each algorithm's runs resampled apart, numpy's
    global RNG seeded for the call; below its nominal coverage with a handful of seeds). An
    algorithm with a single seed gets its fraction (0 or 1) without an interval."""
    from rliable import library

    check_confidence(confidence)
    matrices = {
        name: np.reshape(np.asarray(s, dtype=np.float64), (-1, 1)) for name, s in scores.items()
    }
    with seeded_global_rng(seed):
        points, intervals = library.create_performance_profile(
            matrices,
            list(thresholds),
            custom_profile_func=_fraction_above,
            reps=n_resamples,
            confidence_interval_size=confidence,
        )
    profiles = {}
    for name, matrix in matrices.items():
        low, high = np.asarray(intervals[name], dtype=np.float64).reshape(2, -1)
        if matrix.shape[0] == 1:
            low = high = np.full(len(thresholds), math.nan)
        profiles[name] = [
            Interval(float(p), float(lo), float(hi))
            for p, lo, hi in zip(points[name], low, high, strict=True)
        ]
    return profiles


def probability_of_improvement(
    x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray
) -> float:
    """P(X > Y): the probability that a run of X scores higher than a run of Y, over all pairs
    of their seeds, ties counting half (the Mann-Whitney U statistic over ``len(x) * len(y)``;
    rliable's ``metrics.probability_of_improvement`` with one task)."""
    from rliable import metrics

    x_scores, y_scores = (
        checked_sample(x, "probability_of_improvement"),
        checked_sample(y, "probability_of_improvement"),
    )
    return float(metrics.probability_of_improvement(x_scores[:, None], y_scores[:, None]))


def improvement_interval(
    x: Sequence[float] | np.ndarray,
    y: Sequence[float] | np.ndarray,
    confidence: float = 0.95,
    n_resamples: int = COMPARISON_RESAMPLES,
    seed: int = 0,
) -> Interval:
    """:func:`probability_of_improvement` of X over Y with rliable's percentile bootstrap
    interval: the seeds of X and of Y resampled independently
    (``library.StratifiedIndependentBootstrap``); NaN bounds where either has a single seed."""
    from rliable import library, metrics

    x_scores = checked_sample(x, "improvement_interval")[:, None]
    y_scores = checked_sample(y, "improvement_interval")[:, None]
    point = probability_of_improvement(x_scores[:, 0], y_scores[:, 0])
    if min(len(x_scores), len(y_scores)) < 2:
        return Interval(point, math.nan, math.nan)
    check_confidence(confidence)
    with seeded_global_rng(seed), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # scipy's p-value of all-tied resamples
        _, intervals = library.get_interval_estimates(
            {"pair": [x_scores, y_scores]},
            lambda a, b: np.array([metrics.probability_of_improvement(a, b)]),
            reps=n_resamples,
            confidence_interval_size=confidence,
        )
    low, high = np.asarray(intervals["pair"], dtype=np.float64).reshape(2)
    return Interval(point, float(low), float(high))


def compare(
    results: Iterable[ResultLike], confidence: float = 0.95, seed: int = 0
) -> list[Comparison]:
    """One :class:`Comparison` per benchmark with at least two algorithms (settings of one
    algorithm count apart, as in :func:`group_runs`), sorted by benchmark: the performance
    profile at :func:`profile_thresholds`, and the probability of improvement between every two
    algorithms with at least 2 seeds each."""
    by_benchmark: dict[str, dict[str, list[Result]]] = {}
    for (benchmark, algorithm), runs in group_runs(results).items():
        by_benchmark.setdefault(benchmark, {})[algorithm] = runs
    comparisons = []
    for benchmark, groups in sorted(by_benchmark.items()):
        label, scores = benchmark_scores(groups)
        if len(scores) < 2:
            continue
        thresholds = profile_thresholds(label, scores)
        profiles = performance_profile(scores, thresholds, confidence, seed=seed)
        names = list(scores)
        improvement = tuple(
            tuple(
                None
                if x == y or min(scores[x].size, scores[y].size) < 2
                else probability_of_improvement(scores[x], scores[y])
                for y in names
            )
            for x in names
        )
        comparisons.append(
            Comparison(
                benchmark=benchmark,
                score=label,
                algorithms=tuple(names),
                scores=tuple(tuple(float(v) for v in scores[name]) for name in names),
                thresholds=tuple(thresholds),
                profiles=tuple(tuple(profiles[name]) for name in names),
                improvement=improvement,
            )
        )
    return comparisons


def comparison_markdown(comparisons: Sequence[Comparison], confidence: float = 0.95) -> str:
    """Markdown: per compared benchmark, its performance profile (algorithms by thresholds) and
    the probability of improvement between its algorithms with at least 2 seeds (row over
    column); ``""`` without comparisons. ``confidence`` is only the label (the one given to
    :func:`compare`)."""
    if not comparisons:
        return ""
    pct = f"{confidence:.0%}"
    lines = [
        f"Computed with rliable over seeds, one score per run, stated under each benchmark: "
        f"success, or the return on a scale fixed per benchmark (as it is where the benchmark "
        f"has none); a run's score does not depend on which algorithms are present. "
        f"Performance profile: the fraction of an algorithm's runs whose score is above each "
        f"threshold, with a {pct} percentile bootstrap interval [low, high] that resamples the "
        f"algorithm's runs (rliable's stratified bootstrap, the runs of each algorithm apart), "
        f"where it has any width (none with one seed: the fraction is then 0 or 1); with a "
        f"handful of seeds such an interval covers less than {pct}. "
        f"P(row > column), probability of improvement: the chance that a run of the row's "
        f"algorithm scores higher than a run of the column's, over all pairs of their seeds, "
        f"ties counting half (Mann-Whitney U / (seeds of row x seeds of column)), the estimate "
        f"alone; shown only between algorithms with at least 2 seeds each (with 1 seed it is 0, "
        f"0.5 or 1 and not meaningful).",
    ]
    for c in comparisons:
        named = [
            f"{name} ({n} seed{'s' if n > 1 else ''})"
            for name, n in zip(c.algorithms, c.n_seeds, strict=True)
        ]
        lines += [
            "",
            f"### {c.benchmark}",
            "",
            f"Score: {c.score}.",
            "",
            "| algorithm (seeds) | " + " | ".join(f"> {t:g}" for t in c.thresholds) + " |",
            "| --- |" + " --- |" * len(c.thresholds),
        ]
        for name, profile in zip(named, c.profiles, strict=True):
            cells = [
                format_number(i.mean, 2) if i.low == i.high == i.mean else format_interval(i, 2)
                for i in profile
            ]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        several = [i for i, n in enumerate(c.n_seeds) if n >= 2]
        single = [c.algorithms[i] for i, n in enumerate(c.n_seeds) if n < 2]
        lines.append("")
        if len(several) < 2:
            lines.append(
                "Probability of improvement: not meaningful here, fewer than two algorithms have "
                "at least 2 seeds."
            )
            continue
        lines += [
            "| P(row > column) | " + " | ".join(named[j] for j in several) + " |",
            "| --- |" + " --- |" * len(several),
        ]
        for i in several:
            cells = ["—" if i == j else format_number(c.improvement[i][j], 2) for j in several]
            lines.append(f"| {named[i]} | " + " | ".join(cells) + " |")
        if single:
            lines += ["", "Left out of P(row > column), one seed each: " + ", ".join(single) + "."]
    return "\n".join(lines) + "\n"
