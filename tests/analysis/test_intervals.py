"""The interval over seeds covers what it says, and the comparisons' normalised scores keep one
fixed 0 and 1 per benchmark whatever rows are present; both checked against independent
computations (simulated experiments, scipy, the benchmark's spec)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from rich.console import Console
from scipy import stats

from metabench.analysis.comparisons import (
    RAW_RETURN_LABEL,
    RETURN_SCALES,
    benchmark_scores,
    compare,
    comparison_markdown,
)
from metabench.analysis.stats import RATE_BOUNDS, summarize, t_interval
from metabench.analysis.tables import summary_markdown
from metabench.harness.benchmarks import get_benchmark
from metabench.harness.report import grid_tables
from tests.factories import make_result

# -- coverage of the interval over seeds ---------------------------------------------------------
TRUE_MEAN, TRUE_STD = 3.0, 2.0
EXPERIMENTS = 4000
"""Simulated experiments per seed count: the coverage estimate's standard error is 0.0034."""
TOLERANCE = 0.02
"""How far from 95% the estimated coverage may be (about 6 standard errors)."""


def simulated_seeds(n_seeds: int) -> np.ndarray:
    """``EXPERIMENTS`` experiments of ``n_seeds`` seeds each, scores normal with a known mean."""
    return np.random.default_rng(1000 + n_seeds).normal(
        TRUE_MEAN, TRUE_STD, size=(EXPERIMENTS, n_seeds)
    )


def percentile_bootstrap(values: np.ndarray, rng: np.random.Generator) -> tuple[float, float]:
    """The interval the tables printed before: the percentile bootstrap of the mean over seeds
    (rliable's, one stratum), written here with numpy: 2,000 resamples, 2.5th and 97.5th
    percentiles."""
    means = values[rng.integers(0, values.size, size=(2_000, values.size))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(low), float(high)


@pytest.mark.parametrize("n_seeds", [2, 3, 5, 10])
def test_the_t_interval_over_seeds_covers_the_true_mean_95_percent_of_the_time(
    n_seeds: int,
) -> None:
    covered = [
        interval.low <= TRUE_MEAN <= interval.high
        for interval in (t_interval(seeds) for seeds in simulated_seeds(n_seeds))
    ]
    assert abs(np.mean(covered) - 0.95) < TOLERANCE


@pytest.mark.parametrize(("n_seeds", "expected"), [(2, 0.50), (3, 0.75)])
def test_the_percentile_bootstrap_over_few_seeds_falls_far_short_of_95_percent(
    n_seeds: int, expected: float
) -> None:
    """At 2 seeds the percentile bootstrap is the two values (they hold the mean half the time),
    at 3 the lowest and highest (1 - 2 / 2**3 = 75%): what the tables printed as 95%."""
    rng = np.random.default_rng(7)
    bootstrap_covered, t_covered = [], []
    for seeds in simulated_seeds(n_seeds)[:2000]:
        low, high = percentile_bootstrap(seeds, rng)
        bootstrap_covered.append(low <= TRUE_MEAN <= high)
        interval = t_interval(seeds)
        t_covered.append(interval.low <= TRUE_MEAN <= interval.high)
    assert np.mean(bootstrap_covered) == pytest.approx(expected, abs=0.03)
    assert abs(np.mean(bootstrap_covered) - 0.95) > 0.15
    assert abs(np.mean(t_covered) - 0.95) < TOLERANCE


def test_the_t_interval_is_scipys_and_keeps_to_the_metrics_range() -> None:
    values = [2.0, 5.0, 9.0]
    low, high = stats.t.interval(0.95, df=2, loc=np.mean(values), scale=stats.sem(values))
    assert t_interval(values) == pytest.approx((np.mean(values), low, high))
    # two seeds: 12.7 standard errors each side, shown
    assert t_interval([1.0, 3.0]) == pytest.approx((2.0, 2.0 - 12.7062047, 2.0 + 12.7062047))
    rates = [0.0, 0.05, 0.1]
    clipped = t_interval(rates, bounds=RATE_BOUNDS)
    unclipped = stats.t.interval(0.95, df=2, loc=0.05, scale=stats.sem(rates))
    assert unclipped[0] < 0.0 and clipped.low == 0.0
    assert clipped.high == pytest.approx(unclipped[1])
    one = t_interval([4.0])
    assert one.mean == 4.0 and math.isnan(one.low) and math.isnan(one.high)
    assert t_interval([2.0, 2.0, 2.0]) == (2.0, 2.0, 2.0)


@pytest.mark.parametrize(
    ("values", "kwargs", "match"),
    [
        ([], {}, "non-empty"),
        ([1.0, math.nan], {}, "non-finite"),
        ([1.0, 2.0], {"confidence": 1.0}, "confidence"),
        ([1.0, 2.0], {"bounds": (1.0, 0.0)}, "bounds"),
    ],
)
def test_the_t_interval_names_what_is_wrong_with_its_input(
    values: list[float], kwargs: dict[str, Any], match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        t_interval(values, **kwargs)


def test_summaries_and_their_tables_carry_the_t_interval_and_say_so() -> None:
    returns = [-70.0, -62.0, -66.0]
    runs = [
        make_result("B", "x", seed, [[-80.0, r]], exploration_episodes=1)
        for seed, r in enumerate(returns)
    ]
    summary = summarize(runs)[0]
    low, high = stats.t.interval(0.95, df=2, loc=np.mean(returns), scale=stats.sem(returns))
    assert summary.test_return == pytest.approx((np.mean(returns), low, high))
    gains = [r + 80.0 for r in returns]
    assert summary.adaptation_gain == pytest.approx(
        (np.mean(gains), *stats.t.interval(0.95, df=2, loc=np.mean(gains), scale=stats.sem(gains)))
    )

    markdown = summary_markdown([summary])
    assert "95% Student's t confidence interval over seeds" in markdown
    assert "±12.7 standard errors at 2 seeds, ±4.3 at 3" in markdown
    assert "bootstrap confidence interval over seeds" not in markdown
    row = next(line for line in markdown.splitlines() if line.startswith("| x |"))
    assert f"-66.00 [{low:.2f}, {high:.2f}]" in row

    (table,) = grid_tables([summary], "quick")
    console = Console(width=200, record=True)
    console.print(table)
    text = console.export_text()
    header = next(line for line in text.splitlines() if "algorithm" in line)
    assert header.count("t 95% CI") == 2
    assert f"[{low:.1f}, {high:.1f}]" in text
    assert "Student's t 95% confidence interval over seeds" in str(table.caption)


def test_success_rates_keep_their_interval_within_0_and_1() -> None:
    runs = [
        make_result(
            "ML1", "x", seed, [[0.0, 1.0]] * 4, exploration_episodes=1,
            successes=[[False, i < ok] for i in range(4)],
        )
        for seed, ok in enumerate([0, 0, 1])
    ]  # fmt: skip
    success = summarize(runs)[0].test_success
    assert success is not None and success.mean == pytest.approx(1 / 12)
    assert success.low == 0.0  # t alone would reach below 0
    rates = [0.0, 0.0, 0.25]
    assert success.high == pytest.approx(
        stats.t.interval(0.95, df=2, loc=np.mean(rates), scale=stats.sem(rates))[1]
    )


# -- normalised scores: one fixed 0 and 1 per benchmark ------------------------------------------
def runs_of(benchmark: str, algorithm: str, returns: list[float]) -> list[dict[str, Any]]:
    return [
        make_result(benchmark, algorithm, seed, [[0.0, r]], exploration_episodes=1)
        for seed, r in enumerate(returns)
    ]


def quick_profile_groups(benchmark: str) -> dict[str, list[dict[str, Any]]]:
    """The quick profile's picture: the oracle (-82) below MAML-TRPO (-66), above NOP."""
    return {
        "maml-trpo": runs_of(benchmark, "maml-trpo", [-70.0, -62.0, -66.0]),
        "nop": runs_of(benchmark, "nop", [-98.5, -98.7, -98.6]),
        "oracle": runs_of(benchmark, "oracle", [-80.0, -84.0, -82.0]),
    }


def test_halfcheetahvels_scale_comes_from_its_spec_and_its_reward_bound() -> None:
    """0: standing still, -|0 - target| per step over the horizon, in expectation over the
    uniform target velocities; 1: the reward -|v - target| - control cost is at most 0."""
    spec = get_benchmark("HalfCheetahVel").env_kwargs
    scale = RETURN_SCALES["HalfCheetahVel"]
    assert scale.zero == pytest.approx(-spec["horizon"] * np.mean(spec["velocity_range"]))
    assert scale.one == 0.0


def test_a_rows_normalised_score_does_not_move_when_an_oracle_row_comes_or_goes() -> None:
    groups = quick_profile_groups("HalfCheetahVel")
    with_oracle = benchmark_scores(groups)
    without = benchmark_scores({k: v for k, v in groups.items() if k != "oracle"})
    assert with_oracle[0] == without[0]  # one statement of the scale
    for name in ("maml-trpo", "nop"):
        assert with_oracle[1][name].tolist() == without[1][name].tolist()
    # (return + 100) / 100, computed by hand: the oracle below MAML-TRPO, no score above 1
    assert with_oracle[1]["maml-trpo"] == pytest.approx([0.30, 0.38, 0.34])
    assert with_oracle[1]["oracle"] == pytest.approx([0.20, 0.16, 0.18])
    assert all(np.all(s <= 1.0) for s in with_oracle[1].values())


def test_a_benchmark_without_a_fixed_scale_compares_the_return_itself() -> None:
    groups = quick_profile_groups("HalfCheetahDir")
    label, scores = benchmark_scores(groups)
    alone, alone_scores = benchmark_scores({"maml-trpo": groups["maml-trpo"]})
    assert label == alone == RAW_RETURN_LABEL
    assert scores["maml-trpo"].tolist() == alone_scores["maml-trpo"].tolist() == [-70, -62, -66]


def test_benchmark_scores_refuse_runs_of_two_benchmarks() -> None:
    with pytest.raises(ValueError, match="one benchmark at a time"):
        benchmark_scores(
            {"a": runs_of("HalfCheetahVel", "a", [1.0]), "b": runs_of("B", "b", [1.0])}
        )


def test_the_comparison_table_states_the_scale_once_per_benchmark() -> None:
    groups = quick_profile_groups("HalfCheetahVel")
    every = [run for runs in groups.values() for run in runs]
    no_oracle = [run for name, runs in groups.items() if name != "oracle" for run in runs]
    pages = [comparison_markdown(compare(results)) for results in (every, no_oracle)]
    stated = (
        "Score: post-adaptation return normalised so that 0 is -100 (standing still, in "
        "expectation over the target velocities) and 1 is 0 (the reward's maximum: a ceiling at "
        "any budget)."
    )
    for page in pages:
        assert page.count("Score: ") == 1 and stated in page
        assert "percentile bootstrap interval [low, high] that resamples the algorithm's runs" in (
            page
        )
    # the profile's row of MAML-TRPO is the same with and without the oracle: its 3 runs (0.30,
    # 0.38, 0.34) above 0 and 0.25, none above 0.5
    for page in pages:
        assert "| maml-trpo (3 seeds) | 1.00 | 1.00 | 0.00 | 0.00 | 0.00 |" in page


def test_a_scale_whose_1_a_run_exceeds_is_not_used_as_a_ceiling() -> None:
    """A run above the reward's maximum (a benchmark of another reward under the name): the
    returns are compared as they are, and the label says why."""
    groups = {
        "x": runs_of("HalfCheetahVel", "x", [-50.0, 5.0]),
        "nop": runs_of("HalfCheetahVel", "nop", [-99.0, -98.0]),
    }
    label, scores = benchmark_scores(groups)
    assert "x scored above 0, the 1 of HalfCheetahVel's fixed scale" in label
    assert scores["x"].tolist() == [-50.0, 5.0] and scores["nop"].tolist() == [-99.0, -98.0]
    page = comparison_markdown(compare([run for runs in groups.values() for run in runs]))
    assert "| > -99 | > -73 | > -47 | > -21 | > 5 |" in page  # the runs' own range
