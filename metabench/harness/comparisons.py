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

import numpy as np

from metabench.harness.formatting import format_interval, format_number
from metabench.harness.stats import (
    Interval,
    Result,
    ResultLike,
    check_confidence,
    checked_sample,
    episode_success_rate,
    group_runs,
    seeded_global_rng,
)

__all__ = [
    "COMPARISON_RESAMPLES",
    "NORMALIZATION_ALGORITHMS",
    "PROFILE_THRESHOLDS_RETURN",
    "PROFILE_THRESHOLDS_SUCCESS",
    "Comparison",
    "benchmark_scores",
    "compare",
    "comparison_markdown",
    "improvement_interval",
    "performance_profile",
    "probability_of_improvement",
]

PROFILE_THRESHOLDS_SUCCESS = (0.0, 0.1, 0.25, 0.5, 0.75)
"""Thresholds of the performance profile tables where the score is meta-test success."""
PROFILE_THRESHOLDS_RETURN = (0.0, 0.25, 0.5, 0.75, 1.0)
"""Thresholds of the performance profile tables where the score is the normalised return."""
NORMALIZATION_ALGORITHMS = ("nop", "oracle")
"""The algorithms whose mean post-adaptation returns are 0 and 1 of a benchmark's normalised
return (zero actions, and a policy trained on each test task), where the benchmark has both."""
COMPARISON_RESAMPLES = 2_000
"""Bootstrap resamples of the performance profiles and probabilities of improvement
(rliable's default for profiles)."""


@dataclasses.dataclass(frozen=True)
class Comparison:
    """The algorithms of one benchmark compared over seeds (:func:`compare`), on one score per
    run: meta-test success, or the normalised post-adaptation return (:func:`benchmark_scores`).
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
    bootstrap interval over seeds (NaN bounds with one seed)."""
    improvement: tuple[tuple[float | None, ...], ...]
    """``improvement[i][j]``: P(algorithm i > algorithm j); ``None`` on the diagonal and where
    either has a single seed."""

    @property
    def n_seeds(self) -> tuple[int, ...]:
        return tuple(len(scores) for scores in self.scores)


def _runs_score(runs: Sequence[Result], success: bool) -> np.ndarray:
    aggregates = [run["metatest"]["aggregate"] for run in runs]
    if success:
        return np.array([episode_success_rate(a) for a in aggregates], dtype=np.float64)
    return np.array([a["test_return"] for a in aggregates], dtype=np.float64)


def benchmark_scores(groups: Mapping[str, Sequence[Result]]) -> tuple[str, dict[str, np.ndarray]]:
    """One score per run of each algorithm of one benchmark (``groups``: by algorithm, as
    :func:`group_runs` gives them), and what the score is, in words.

    * Meta-test success (:func:`episode_success_rate`) where every run reports it.
    * Otherwise the post-adaptation return, normalised so that 0 and 1 are the mean returns of
      :data:`NORMALIZATION_ALGORITHMS` where the benchmark has both (and the second is higher),
      else the lowest and the highest run of the benchmark. Runs with a non-finite return are
      left out.
    """
    success = all(
        episode_success_rate(run["metatest"]["aggregate"]) is not None
        for runs in groups.values()
        for run in runs
    )
    raw = {algorithm: _runs_score(runs, success) for algorithm, runs in groups.items()}
    raw = {algorithm: scores[np.isfinite(scores)] for algorithm, scores in raw.items()}
    raw = {algorithm: scores for algorithm, scores in raw.items() if scores.size}
    if success:
        return "meta-test success (the fraction of test episodes that succeeded)", raw
    zero, one = NORMALIZATION_ALGORITHMS
    if zero in raw and one in raw and np.mean(raw[one]) > np.mean(raw[zero]):
        low, high = float(np.mean(raw[zero])), float(np.mean(raw[one]))
        label = f"post-adaptation return normalised so that 0 is {zero}'s mean and 1 {one}'s"
    else:
        every = np.concatenate([np.zeros(0), *raw.values()])
        low, high = (float(every.min()), float(every.max())) if every.size else (0.0, 1.0)
        label = "post-adaptation return normalised so that 0 is the lowest run and 1 the highest"
    scale = high - low if high > low else 1.0
    return label, {algorithm: (scores - low) / scale for algorithm, scores in raw.items()}


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
    each threshold, with rliable's stratified bootstrap interval over seeds
    (``library.create_performance_profile``, numpy's global RNG seeded for the call). An
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
    """:func:`probability_of_improvement` of X over Y with rliable's interval: the seeds of X and
    of Y resampled independently (``library.StratifiedIndependentBootstrap``); NaN bounds where
    either has a single seed."""
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
    profile at :data:`PROFILE_THRESHOLDS_SUCCESS` or :data:`PROFILE_THRESHOLDS_RETURN`, and the
    probability of improvement between every two algorithms with at least 2 seeds each."""
    by_benchmark: dict[str, dict[str, list[Result]]] = {}
    for (benchmark, algorithm), runs in group_runs(results).items():
        by_benchmark.setdefault(benchmark, {})[algorithm] = runs
    comparisons = []
    for benchmark, groups in sorted(by_benchmark.items()):
        label, scores = benchmark_scores(groups)
        if len(scores) < 2:
            continue
        success = label.startswith("meta-test success")
        thresholds = PROFILE_THRESHOLDS_SUCCESS if success else PROFILE_THRESHOLDS_RETURN
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
        f"Computed with rliable over seeds, one score per run. Performance profile: the fraction "
        f"of an algorithm's runs whose score is above each threshold, with a {pct} bootstrap "
        f"interval over seeds [low, high] where it has any width (none with one seed: the "
        f"fraction is then 0 or 1). "
        f"P(row > column), probability of improvement: the chance that a run of the row's "
        f"algorithm scores higher than a run of the column's, over all pairs of their seeds, "
        f"ties counting half (Mann-Whitney U / (seeds of row x seeds of column)); shown only "
        f"between algorithms with at least 2 seeds each (with 1 seed it is 0, 0.5 or 1 and not "
        f"meaningful).",
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
