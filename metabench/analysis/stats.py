"""Statistics over seeds: confidence intervals, interquartile means and the summary of each
algorithm's runs (the comparisons between algorithms are in :mod:`metabench.analysis.comparisons`,
the tables built from both in :mod:`metabench.analysis.tables`).

The unit of the statistics is the **seed** (one independent training run). Each run contributes
one number per metric, its own aggregate over the test tasks (computed from the episodes its
meta-test records: :class:`~metabench.records.MetaTestRecord`); episodes
and tasks are never treated as samples over seeds, since they are not independent of each other
within a run. The interval over seeds of every table is Student's t (:func:`t_interval`): a
percentile bootstrap over the 2 to 10 seeds metabench runs covers far less than its nominal 95%
(at 2 seeds it is the two values themselves).

Typical use::

    from metabench.analysis.resultfile import collect_results
    from metabench.analysis.tables import summary_markdown
    summaries = summarize(collect_results(Path("results")))
    print(summary_markdown(summaries))
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from metabench.analysis.formatting import format_steps
from metabench.records import MetaTestRecord, RunResult

__all__ = [
    "METATRAIN_RETURN_KEYS",
    "MIN_SEEDS_FOR_IQM",
    "RATE_BOUNDS",
    "Interval",
    "Summary",
    "check_confidence",
    "checked_sample",
    "group_runs",
    "iqm",
    "metatrain_return",
    "seed_intervals",
    "seeded_global_rng",
    "summarize",
    "t_interval",
    "task_bootstrap_ci",
]

MIN_SEEDS_FOR_IQM = 4
"""The interquartile mean is reported only with at least this many seeds (with fewer, the middle
50% is one or two runs and the number says little)."""

METATRAIN_RETURN_KEYS = ("metatrain/average_return", "metatrain/post_update_return")
"""Keys of a result's ``metatrain`` dict read as its meta-train return, first present wins
(RL2 logs the average return of a trial, MAML the return after the inner update)."""

RATE_BOUNDS = (0.0, 1.0)
"""The range of a success rate: :func:`t_interval` clips a rate's interval to it."""

Result = RunResult
"""A result file as :func:`~metabench.analysis.resultfile.read_result` reads it."""
ResultLike = Result | tuple[Path, Result]
"""A result, or a ``(path, result)`` pair as
:func:`~metabench.analysis.resultfile.collect_results` returns them."""


class Interval(NamedTuple):
    """A mean and its confidence interval (``low``/``high`` are NaN when there is none)."""

    mean: float
    low: float
    high: float


# -- statistics ----------------------------------------------------------------------------------
# rliable (Agarwal et al., "Deep RL at the edge of the statistical precipice", NeurIPS 2021)
# computes the IQM, the plots' bands over seeds (and, in comparisons.py, the performance profiles
# and the probability of improvement); scipy.stats the t intervals over seeds. rliable is
# imported inside the functions that use it: it loads arch, statsmodels and pandas, and training
# imports this module (metatrain_return) without needing any of them.
# scipy.stats likewise (about 1.5 s of every ``metabench train``'s start on 2 cores).


@contextlib.contextmanager
def seeded_global_rng(seed: int) -> Iterator[None]:
    """rliable's bootstraps draw their indices from numpy's global RNG (``np.random.choice``),
    whatever ``random_state`` they are given: seed it for one call so that the same results give
    the same bytes, then put back the state it had so that nothing else sees the change."""
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(state)


def checked_sample(values: Sequence[float] | np.ndarray, name: str) -> np.ndarray:
    """``values`` as a float64 array, or a ``ValueError`` naming ``name`` (the caller) where they
    are not a non-empty 1-D sequence of finite numbers."""
    data = np.asarray(values, dtype=np.float64)
    if data.ndim != 1 or data.size == 0:
        raise ValueError(f"{name} needs a non-empty 1-D sequence of numbers, got {values!r}")
    if not np.all(np.isfinite(data)):
        raise ValueError(f"{name} got a non-finite value in {values!r}")
    return data


def check_confidence(confidence: float) -> None:
    """A ``ValueError`` unless ``confidence`` (an interval's coverage) lies in (0, 1)."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")


def seed_intervals(
    scores: np.ndarray,
    statistic: Callable[[np.ndarray], np.ndarray] | None = None,
    confidence: float = 0.95,
    n_resamples: int = 10_000,
    seed: int = 0,
    method: str = "percentile",
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A statistic of a ``(seeds, columns)`` score matrix and rliable's stratified bootstrap
    interval for it: ``rliable.library.get_interval_estimates`` resamples the seeds of each
    column independently (the columns are its strata: tasks, metrics or episode indices),
    ``n_resamples`` times, with numpy's global RNG seeded with ``seed`` for the call.

    A percentile bootstrap over seeds: with a handful of seeds it covers well below
    ``confidence`` (:func:`t_interval`), so only the plots' bands use it, labelled as such.

    :param statistic: maps a resampled matrix to one number per output; the mean of each column
        when ``None``.
    :param method: rliable's: ``"percentile"``, ``"basic"``, ``"bc"`` or ``"bca"``.
    :returns: the statistic, the lower and the upper bounds, each a 1-D array.
    """
    from rliable import library

    check_confidence(confidence)
    function = statistic or (lambda matrix: np.mean(matrix, axis=0))
    with seeded_global_rng(seed):
        points, intervals = library.get_interval_estimates(
            {"scores": np.asarray(scores, dtype=np.float64)},
            function,
            method=method.lower(),
            reps=n_resamples,
            confidence_interval_size=confidence,
        )
    low, high = np.asarray(intervals["scores"], dtype=np.float64).reshape(2, -1)
    return np.atleast_1d(np.asarray(points["scores"], dtype=np.float64)), low, high


def _without_spread(data: np.ndarray) -> Interval:
    """The interval of one value (none: NaN bounds) or of equal values (the value itself)."""
    mean = float(np.mean(data))
    if data.size == 1:
        return Interval(mean, math.nan, math.nan)
    return Interval(mean, mean, mean)


def t_interval(
    values: Sequence[float] | np.ndarray,
    confidence: float = 0.95,
    bounds: tuple[float, float] | None = None,
) -> Interval:
    """The mean of ``values`` (one number per seed) and Student's t confidence interval for it:
    ``mean ± t(n - 1) * s / sqrt(n)``, with ``s`` the seeds' standard deviation (``ddof=1``) and
    ``t(n - 1)`` the ``(1 + confidence) / 2`` quantile of Student's t with ``n - 1`` degrees of
    freedom (``scipy.stats.t``).

    Why t and not a bootstrap: a percentile bootstrap resamples the seeds it has, so with few of
    them it cannot reach past them. At 2 seeds it is the two values, which hold the true mean
    half the time; at 3 it covers at most 75%. The t interval has its stated coverage at any
    number of seeds when the seeds' scores are normal, and close to it for moderately skewed
    ones (a strongly skewed one, such as a success rate near 0 or 1, can fall short with few
    seeds).

    * One value: no interval, ``(value, nan, nan)``.
    * 2 seeds: the interval is shown, though wide (at 95%, 12.7 standard errors each side with
      2 seeds, 4.3 with 3, 2.3 with 10): it keeps its coverage, and its width is what two seeds
      say. Hiding it would show a 2-seed mean beside a 10-seed one as if both were as sure.
    * Equal values: no spread to scale, ``(value, value, value)`` (the formula's zero width).

    :param bounds: the range the metric cannot leave (:data:`RATE_BOUNDS` for a success rate):
        the interval is clipped to it, which keeps its coverage (the true mean lies inside).
    :raises ValueError: if ``values`` is empty or holds a non-finite number, or ``bounds`` is
        not an increasing pair.
    """
    data = checked_sample(values, "t_interval")
    check_confidence(confidence)
    if bounds is not None and not bounds[0] < bounds[1]:
        raise ValueError(f"t_interval's bounds must be (low, high) with low < high, got {bounds!r}")
    if data.size == 1 or np.all(data == data[0]):
        return _without_spread(data)
    from scipy import stats

    mean = float(np.mean(data))
    quantile = float(stats.t.ppf((1.0 + confidence) / 2.0, df=data.size - 1))
    half = quantile * float(np.std(data, ddof=1)) / math.sqrt(data.size)
    low, high = mean - half, mean + half
    if bounds is not None:
        low, high = max(low, bounds[0]), min(high, bounds[1])
    return Interval(mean, low, high)


def _bootstrap_rng_kwargs(rng: np.random.Generator) -> dict[str, Any]:
    """scipy >= 1.15 takes ``rng``; older versions only ``random_state``."""
    from scipy import stats

    params = inspect.signature(stats.bootstrap).parameters
    return {"rng": rng} if "rng" in params else {"random_state": rng}


def task_bootstrap_ci(
    values: Sequence[float] | np.ndarray,
    confidence: float = 0.95,
    n_resamples: int = 10_000,
    seed: int = 0,
) -> Interval:
    """The mean of one run's per-task numbers and a percentile bootstrap interval over its test
    tasks (``scipy.stats.bootstrap``, seeded with ``numpy.random.default_rng(seed)``).

    Kept here rather than taken from rliable: rliable resamples the runs of a (runs x tasks)
    matrix, and resamples tasks only together with runs (``task_bootstrap``); this interval
    resamples the tasks of a single run, which scipy does in one vectorised call. With the 20
    to 200 test tasks of a benchmark a percentile bootstrap is close to its coverage (unlike one
    over seeds: :func:`t_interval`). Same edge cases as :func:`t_interval`.
    """
    data = checked_sample(values, "task_bootstrap_ci")
    check_confidence(confidence)
    mean = float(np.mean(data))
    if data.size == 1 or np.all(data == data[0]):
        return _without_spread(data)
    from scipy import stats

    result = stats.bootstrap(
        (data,),
        np.mean,
        n_resamples=n_resamples,
        confidence_level=confidence,
        method="percentile",
        vectorized=True,
        **_bootstrap_rng_kwargs(np.random.default_rng(seed)),
    )
    low, high = result.confidence_interval
    return Interval(mean, float(low), float(high))


def iqm(values: Sequence[float] | np.ndarray) -> float:
    """Interquartile mean: the mean of the middle 50% of ``values`` (25% trimmed from each end),
    rliable's ``metrics.aggregate_iqm`` of one number per seed."""
    from rliable import metrics

    data = np.asarray(values, dtype=np.float64)
    if data.size == 0:
        raise ValueError("iqm of an empty sequence")
    return float(metrics.aggregate_iqm(data.reshape(-1, 1)))


# -- grouping and summaries ----------------------------------------------------------------------
def _as_result(item: ResultLike) -> Result:
    if isinstance(item, tuple):
        return item[1]
    return item


def _setting(result: Result) -> tuple[Any, str, str]:
    """What separates runs that must not be pooled: the env-step budget, the meta-test's
    episodes and every recorded hyperparameter (an unrecorded one counts as its own value)."""
    config, metatest = result.config, result.metatest
    hyperparameters = config.hyperparameters
    explore, test = metatest.exploration_episodes, metatest.test_episodes
    return (
        config.env_steps_budget,
        f"{explore}+{test} episodes",
        json.dumps(hyperparameters, sort_keys=True, default=str),
    )


def _budget_label(steps: Any) -> str:
    if not isinstance(steps, int | float):
        return "budget unrecorded"
    return f"{format_steps(steps)} steps"


def _setting_labels(settings: Sequence[tuple[Any, str, str]]) -> list[str]:
    """For settings of one ``(benchmark, algorithm)`` (from :func:`_setting`), a short label for
    each naming what differs between them: budget, the meta-test's episodes, then each
    hyperparameter taking more than one value, as ``name=value`` where the run recorded a value.
    A run that did not record one (an option left at its default, or added after the run at a
    default that keeps the old behaviour) does not name it: the labels stay apart, since
    another setting names what it recorded ("defaults" where nothing is left to name)."""
    budgets = {budget for budget, _, _ in settings}
    protocols = {protocol for _, protocol, _ in settings}
    parsed = [json.loads(hyperparameters) for _, _, hyperparameters in settings]
    names = sorted({name for hyperparameters in parsed for name in hyperparameters})
    varying = [
        name
        for name in names
        if len({json.dumps(h[name]) if name in h else None for h in parsed}) > 1
    ]
    labels = []
    for (budget, protocol, _), hyperparameters in zip(settings, parsed, strict=True):
        parts = [_budget_label(budget)] if len(budgets) > 1 else []
        if len(protocols) > 1:
            parts.append(protocol)
        parts += [
            f"{name}={json.dumps(hyperparameters[name])}"
            for name in varying
            if name in hyperparameters
        ]
        labels.append(", ".join(parts) or "defaults")
    return labels


def group_runs(results: Iterable[ResultLike]) -> dict[tuple[str, str], list[Result]]:
    """Results keyed by ``(benchmark, algorithm)``, keys sorted, each list sorted by seed.

    Runs of one algorithm made with different settings (budget, meta-test episodes or any
    recorded hyperparameter) are never pooled: each setting gets its own key, the algorithm's
    name followed by :func:`_setting_labels` in brackets, e.g. ``rl2 (5e6 steps, lr=0.001)``.

    :raises ValueError: if one group holds two runs with the same seed (they would be counted as
        independent samples); keep one of them, or move the other out of the results folder.
    """
    by_algorithm: dict[tuple[str, str], dict[tuple[Any, str, str], list[Result]]] = {}
    paths: dict[int, Path] = {}  # where each result was read from, where known
    for item in results:
        result = _as_result(item)
        if isinstance(item, tuple):
            paths[id(result)] = item[0]
        key = (result.config.benchmark, result.config.algorithm)
        by_algorithm.setdefault(key, {}).setdefault(_setting(result), []).append(result)
    groups: dict[tuple[str, str], list[Result]] = {}
    for (benchmark, algorithm), by_setting in by_algorithm.items():
        if len(by_setting) == 1:
            groups[(benchmark, algorithm)] = next(iter(by_setting.values()))
            continue
        for label, runs in zip(_setting_labels(list(by_setting)), by_setting.values(), strict=True):
            groups[(benchmark, f"{algorithm} ({label})")] = runs
    for key, runs in groups.items():
        runs.sort(key=lambda r: r.config.seed)
        seeds = [r.config.seed for r in runs]
        duplicates = sorted({s for s in seeds if seeds.count(s) > 1})
        if duplicates:
            where = [
                str(paths[id(run)].parent)
                for run in runs
                if run.config.seed in duplicates and id(run) in paths
            ]
            found = f" ({', '.join(where)})" if where else ""
            raise ValueError(
                f"{key[0]} / {key[1]} has several runs of seed(s) {duplicates}{found}; seeds "
                f"are the independent samples of the statistics, keep one run per seed"
            )
    return dict(sorted(groups.items()))


@dataclasses.dataclass(frozen=True)
class Summary:
    """One ``(benchmark, algorithm)`` over its seeds (``algorithm`` carries a setting label where
    one algorithm ran with several settings: :func:`group_runs`).

    Each metric is an :class:`Interval` (mean and Student's t interval over seeds,
    :func:`t_interval`; no interval with one seed) or ``None`` if no seed reports it. The
    ``*_iqm`` fields are ``None`` with fewer than :data:`MIN_SEEDS_FOR_IQM` seeds.
    """

    benchmark: str
    algorithm: str
    n_seeds: int
    seeds: tuple[int, ...]
    env_steps: float
    """Mean over seeds of the meta-training env steps."""
    wall_time_s: float
    """Mean over seeds of the wall time, in seconds."""
    metatrain_return: Interval | None
    test_return: Interval
    test_success: Interval | None
    test_return_iqm: float | None = None
    test_success_iqm: float | None = None
    pre_return: Interval | None = None
    """Mean return of the exploration episodes (before ``adapt_policy``), over seeds."""
    adaptation_gain: Interval | None = None
    """Post-adaptation minus pre-adaptation return, per seed, over seeds."""
    task_noise: float | None = None
    """The meta-test's own noise: half the width of a bootstrap interval over the test tasks of
    one run (its post-adaptation return), averaged over seeds."""
    metaworld_success: Interval | None = None
    """Meta-World's own count of the test episodes (``metaworld_success_rate``, the number
    Meta-World+ reports; :mod:`metabench.tasks.metaworld.count`), over the seeds that
    record it."""


def metatrain_return(stats: Mapping[str, Any]) -> float | None:
    """The meta-train return among one iteration's statistics (a result's ``metatrain``): the
    first of :data:`METATRAIN_RETURN_KEYS` present, ``None`` if none is."""
    for key in METATRAIN_RETURN_KEYS:
        value = stats.get(key)
        if value is not None:
            return float(value)
    return None


def episode_success_rate(metatest: MetaTestRecord) -> float | None:
    """The success rate a table reports: the fraction of test episodes that succeeded (garage's
    count); ``None`` where the env reports no success."""
    success = metatest.success
    return None if success is None else success.episode_rate


def metaworld_success_rate(metatest: MetaTestRecord) -> float | None:
    """Meta-World's own count of the test episodes, where the meta-test records it."""
    success = metatest.success
    return None if success is None or success.metaworld is None else success.metaworld.success_rate


def pre_adaptation_return(result: Result) -> float | None:
    """Mean return of a run's exploration episodes: the policy before ``adapt_policy`` (MAML's
    pre-update policy; RL2 while it explores)."""
    metatest = result.metatest
    explored = metatest.return_per_episode[: metatest.exploration_episodes]
    return float(np.mean(explored)) if explored else None


def test_task_interval(result: Result, confidence: float = 0.95) -> Interval:
    """The post-adaptation return of one run with a bootstrap interval over its test tasks: how
    much the meta-test alone, with other test tasks, could move the number."""
    n_explore = result.metatest.exploration_episodes
    per_task = [float(np.mean(task.episode_returns[n_explore:])) for task in result.metatest.tasks]
    return task_bootstrap_ci(per_task, confidence)


def _finite(values: Iterable[float | None]) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(float(v))]


def summarize(results: Iterable[ResultLike], confidence: float = 0.95) -> list[Summary]:
    """One :class:`Summary` per ``(benchmark, algorithm)``, sorted by benchmark and algorithm.

    Per seed, the meta-test numbers are that run's test return and :func:`episode_success_rate`,
    computed from its meta-test's episodes; the meta-train return is the first of
    :data:`METATRAIN_RETURN_KEYS` in its ``metatrain`` dict. Seeds missing a number are left
    out of that metric. The intervals over seeds are :func:`t_interval`'s, those of success
    rates clipped to :data:`RATE_BOUNDS`.
    """
    summaries = []
    for (benchmark, algorithm), runs in group_runs(results).items():
        metatests = [run.metatest for run in runs]
        returns = _finite(m.test_return for m in metatests)
        successes = _finite(episode_success_rate(m) for m in metatests)
        train = _finite(metatrain_return(run.metatrain) for run in runs)
        pre = [pre_adaptation_return(run) for run in runs]
        gains = _finite(
            None if p is None else m.test_return - p for p, m in zip(pre, metatests, strict=True)
        )
        counted = _finite(metaworld_success_rate(m) for m in metatests)
        widths = _finite(
            (i.high - i.low) / 2 for i in (test_task_interval(run, confidence) for run in runs)
        )
        samples = {
            "train": train,
            "returns": returns,
            "successes": successes,
            "pre": _finite(pre),
            "gains": gains,
            "counted": counted,
        }
        rates = {"successes", "counted"}
        found = {
            name: t_interval(v, confidence, RATE_BOUNDS if name in rates else None)
            for name, v in samples.items()
            if v
        }
        summaries.append(
            Summary(
                benchmark=benchmark,
                algorithm=algorithm,
                n_seeds=len(runs),
                seeds=tuple(run.config.seed for run in runs),
                env_steps=float(np.mean([run.env_steps for run in runs])),
                wall_time_s=float(np.mean([run.wall_time_s for run in runs])),
                metatrain_return=found.get("train"),
                test_return=found.get("returns", Interval(math.nan, math.nan, math.nan)),
                test_success=found.get("successes"),
                test_return_iqm=iqm(returns) if len(returns) >= MIN_SEEDS_FOR_IQM else None,
                test_success_iqm=iqm(successes) if len(successes) >= MIN_SEEDS_FOR_IQM else None,
                pre_return=found.get("pre"),
                adaptation_gain=found.get("gains"),
                task_noise=float(np.mean(widths)) if widths else None,
                metaworld_success=found.get("counted"),
            )
        )
    return summaries
