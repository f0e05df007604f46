"""Plots from result files (PNG, drawn with matplotlib's Agg canvas): adaptation curves,
return by task, learning curves from the periodic meta-tests, and rliable's performance profiles
and probability of improvement.

No ``pyplot`` figures: figures are plain :class:`matplotlib.figure.Figure` objects rendered by
:class:`~matplotlib.backends.backend_agg.FigureCanvasAgg`, so plotting never opens a window.
rliable's plot functions draw on the axes they are given (its module imports ``pyplot``, which
opens nothing).
"""

from __future__ import annotations

import io
import itertools
import re
import textwrap
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from metabench.analysis.comparisons import (
    COMPARISON_RESAMPLES,
    benchmark_scores,
    improvement_interval,
    performance_profile,
)
from metabench.analysis.periodic import PUBLISHED_SUCCESS_METRIC, periodic_metatests
from metabench.analysis.references import load_references
from metabench.analysis.stats import (
    Result,
    ResultLike,
    episode_success_rate,
    group_runs,
    seed_intervals,
)
from metabench.records import EvaluationRecord, MetaTestRecord

__all__ = [
    "DPI",
    "PANEL_SIZE",
    "adaptation_plots",
    "improvement_plots",
    "learning_curve_plots",
    "plot_filename",
    "profile_plots",
    "render_plots",
    "return_by_task_plots",
    "task_points",
]

PANEL_SIZE = (6.0, 4.5)
"""Width and height in inches of one panel; a figure with a success panel is twice as wide."""
DPI = 100
"""Resolution of the PNG files: a one-panel figure is 600 x 450 pixels."""
CONFIDENCE = 0.95
MIN_TASK_VALUES = 5
"""A benchmark gets a return-by-task plot when its tasks are one number taking this many values
or more (HalfCheetahVel's target velocity; not HalfCheetahDir's two directions)."""


def plot_filename(benchmark: str) -> str:
    """The PNG file name for ``benchmark`` (characters unsafe in file names become ``_``)."""
    return "adaptation_" + re.sub(r"[^A-Za-z0-9._-]+", "_", benchmark) + ".png"


def _curves(runs: Sequence[Result], key: str) -> np.ndarray | None:
    """Per seed (rows), the meta-test's curve ``key`` (``return_per_episode`` or
    ``success_rate_per_episode``) at each episode index (columns); ``None`` if no seed reports
    it. The seeds share one meta-test protocol (:func:`group_runs` never pools different ones),
    so their rows have one length."""
    rows = [_curve(run.metatest, key) for run in runs]
    rows = [row for row in rows if row is not None]
    return np.asarray(rows, dtype=np.float64) if rows else None


def _draw(ax: Axes, curves: np.ndarray, label: str, color: Any) -> None:
    """Mean over seeds with a percentile bootstrap band over seeds at each episode index
    (rliable's stratified bootstrap, the episode indices as strata: :func:`seed_intervals`; with
    a handful of seeds it covers less than its nominal level, and the title says so)."""
    episodes = np.arange(1, curves.shape[1] + 1)
    mean = np.mean(curves, axis=0)
    ax.plot(episodes, mean, marker="o", markersize=4, color=color, label=label)
    if curves.shape[0] > 1:
        _, low, high = seed_intervals(curves, confidence=CONFIDENCE)
        ax.fill_between(episodes, low, high, color=color, alpha=0.2, linewidth=0)


def _plot_benchmark(benchmark: str, groups: dict[str, list[Result]]) -> bytes:
    with_success = any(
        _curves(runs, "success_rate_per_episode") is not None for runs in groups.values()
    )
    n_panels = 2 if with_success else 1
    fig = Figure(figsize=(PANEL_SIZE[0] * n_panels, PANEL_SIZE[1]), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, n_panels, squeeze=False)[0]
    panels = [("return_per_episode", "mean return")]
    if with_success:
        panels.append(("success_rate_per_episode", "success rate"))
    colors = [f"C{i}" for i in range(len(groups))]
    n_exploration = sorted({r.metatest.exploration_episodes for g in groups.values() for r in g})
    n_episodes = 1
    for ax, (key, ylabel) in zip(axes, panels, strict=True):
        for (algorithm, runs), color in zip(groups.items(), colors, strict=True):
            curves = _curves(runs, key)
            if curves is None:
                continue
            n_episodes = max(n_episodes, curves.shape[1])
            seeds = "seed" if len(runs) == 1 else "seeds"
            _draw(ax, curves, f"{algorithm} ({len(runs)} {seeds})", color)
        for i, n in enumerate(n_exploration):
            ax.axvline(
                n + 0.5,
                color="0.3",
                linestyle="--",
                linewidth=1,
                label="end of exploration" if i == 0 else None,
            )
        ax.set_xlabel("episode in the meta-test trial")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        if key == "success_rate_per_episode":
            ax.set_ylim(-0.05, 1.05)
    for ax in axes:
        # every episode up to 20; beyond, a tick every few, so that 40 labels do not overlap
        ax.set_xticks(np.arange(1, n_episodes + 1, max(1, -(-n_episodes // 20))))
    _legend_below(fig, axes[0])
    bands = (
        f"{CONFIDENCE:.0%} percentile bootstrap band over seeds, narrower than a "
        f"{CONFIDENCE:.0%} interval with few seeds"
        if any(len(runs) > 1 for runs in groups.values())
        else "one seed per algorithm: no band"
    )
    fig.suptitle(
        f"{benchmark}: meta-test adaptation curve\n(mean over seeds; {bands})",
        fontsize="medium",
    )
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    return buffer.getvalue()


def adaptation_plots(results: Iterable[ResultLike]) -> dict[str, bytes]:
    """One PNG per benchmark, by its :func:`plot_filename`, sorted by benchmark.

    Each shows the mean return (and, in a second panel when any run reports success, the success
    rate) at each episode of the meta-test trial, one line per algorithm: the mean over seeds of
    each seed's aggregate over its test tasks, with a 95% percentile bootstrap band over seeds (no
    band for a single seed; with a handful of seeds it covers less than 95%, unlike the tables'
    t intervals). A dashed vertical line marks the end of the exploration episodes.
    """
    by_benchmark: dict[str, dict[str, list[Result]]] = {}
    for (benchmark, algorithm), runs in group_runs(results).items():
        by_benchmark.setdefault(benchmark, {})[algorithm] = runs
    return {
        plot_filename(benchmark): _plot_benchmark(benchmark, groups)
        for benchmark, groups in sorted(by_benchmark.items())
    }


def _task_value(task: Any) -> tuple[str, float] | None:
    """``(name, value)`` of a task that is one number (``{"velocity": 1.3}``), else ``None``."""
    if isinstance(task, dict) and len(task) == 1:
        ((name, value),) = task.items()
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return name, float(value)
    return None


def task_points(runs: Sequence[Result]) -> tuple[str, np.ndarray, np.ndarray] | None:
    """The task parameter's name, and per test task of every seed its value and post-adaptation
    return, sorted by value; ``None`` unless every task is one number with the same name."""
    names, values, returns = set(), [], []
    for run in runs:
        for task in run.metatest.tasks:
            found = _task_value(task.task)
            if found is None or not np.isfinite(task.test_return):
                return None
            names.add(found[0])
            values.append(found[1])
            returns.append(task.test_return)
    if len(names) != 1:
        return None
    order = np.argsort(values, kind="stable")
    return names.pop(), np.asarray(values)[order], np.asarray(returns)[order]


def _plot_tasks(benchmark: str, groups: dict[str, tuple[str, np.ndarray, np.ndarray]]) -> bytes:
    fig = Figure(figsize=PANEL_SIZE, dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    for i, (algorithm, (_, values, returns)) in enumerate(groups.items()):
        color = f"C{i}"
        ax.scatter(values, returns, s=8, alpha=0.35, color=color, linewidths=0)
        # the mean of each eighth of the tasks, by value: the trend under the per-task noise
        chunks = np.array_split(np.arange(len(values)), min(8, len(values)))
        ax.plot(
            [values[c].mean() for c in chunks],
            [returns[c].mean() for c in chunks],
            color=color,
            marker="o",
            markersize=4,
            label=algorithm,
        )
    name = next(iter(groups.values()))[0]
    ax.set_xlabel(f"task: {name}")
    ax.set_ylabel("post-adaptation return")
    ax.grid(alpha=0.3)
    _legend_below(fig, ax)
    fig.suptitle(
        f"{benchmark}: post-adaptation return per test task\n"
        "(dots: the tasks of all seeds; lines: means over eighths of the tasks)",
        fontsize="medium",
    )
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    return buffer.getvalue()


def return_by_task_plots(results: Iterable[ResultLike]) -> dict[str, bytes]:
    """For each benchmark whose tasks are one number (e.g. a target velocity) taking at least
    :data:`MIN_TASK_VALUES` values, a PNG ``return_by_task_<benchmark>.png`` of each algorithm's
    post-adaptation return per test task against that number. A policy that does not adapt
    traces one peak (it suits the tasks near what it does); one that adapts follows the oracle.
    Sorted by benchmark.
    """
    by_benchmark: dict[str, dict[str, tuple[str, np.ndarray, np.ndarray]]] = {}
    for (benchmark, algorithm), runs in group_runs(results).items():
        points = task_points(runs)
        if points is not None and len(np.unique(points[1])) >= MIN_TASK_VALUES:
            by_benchmark.setdefault(benchmark, {})[algorithm] = points
    return {
        plot_filename(benchmark).replace("adaptation_", "return_by_task_", 1): _plot_tasks(
            benchmark, groups
        )
        for benchmark, groups in sorted(by_benchmark.items())
        if len({name for name, _, _ in groups.values()}) == 1
    }


def _plot_learning(benchmark: str, runs: list[tuple[str, Result, list[EvaluationRecord]]]) -> bytes:
    with_success = any(
        episode_success_rate(e.metatest) is not None for _, _, evals in runs for e in evals
    )
    panels: list[tuple[Callable[[MetaTestRecord], float | None], str, str]] = [
        (lambda metatest: metatest.test_return, "return_per_episode", "return")
    ]
    if with_success:  # the success the tables report
        panels.insert(0, (episode_success_rate, "success_rate_per_episode", "success"))
    fig = Figure(
        figsize=(PANEL_SIZE[0] * len(panels), PANEL_SIZE[1]), dpi=DPI, layout="constrained"
    )
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (post_of, curve_key, name) in zip(axes, panels, strict=True):
        for i, (name_of_run, result, evals) in enumerate(runs):
            color = f"C{i}"
            steps = [e.env_steps for e in evals]
            post = [_or_nan(post_of(e.metatest)) for e in evals]
            pre = [(_curve(e.metatest, curve_key) or [np.nan])[0] for e in evals]
            label = f"{name_of_run} seed {result.config.seed}"
            ax.plot(steps, post, color=color, marker="o", markersize=3, label=f"{label}: test")
            ax.plot(steps, pre, color=color, linestyle=":", label=f"{label}: first episode")
            final = post_of(result.metatest)
            if final is not None:  # the final meta-test, on every test task
                ax.plot([result.env_steps], [final], color=color, marker="*",
                        markersize=12, linestyle="none")  # fmt: skip
        ax.set_xlabel("environment steps of meta-training")
        ax.set_ylabel(f"meta-test {name}")
        ax.grid(alpha=0.3)
        if name == "success":
            ax.set_ylim(-0.05, 1.05)
            _draw_published(ax, benchmark)
    _legend_below(fig, axes[0])
    n_tasks = sorted({e.metatest.n_tasks for _, _, evals in runs for e in evals})
    fig.suptitle(
        f"{benchmark}: meta-test during training on {'/'.join(map(str, n_tasks))} test tasks "
        f"(dots: after adapting; dotted: first exploration episode; star: final meta-test on all "
        f"test tasks)",
        fontsize="small",
    )
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    return buffer.getvalue()


def _curve(metatest: MetaTestRecord, key: str) -> list[float] | None:
    """A meta-test's ``return_per_episode`` or ``success_rate_per_episode``."""
    if key == "return_per_episode":
        return metatest.return_per_episode
    return metatest.success_rate_per_episode


def _or_nan(value: float | None) -> float:
    return np.nan if value is None else float(value)


def _draw_published(ax: Axes, benchmark: str) -> None:
    """The published meta-test success rates of ``benchmark`` as dashed horizontal lines."""
    published = [
        ref
        for ref in load_references()
        if ref.applies_to(benchmark)
        and ref.metric == PUBLISHED_SUCCESS_METRIC
        and ref.value is not None
    ]
    for ref, style in zip(published, itertools.cycle(["--", "-.", ":"]), strict=False):
        assert ref.value is not None
        ax.axhline(
            ref.value, color="0.4", linestyle=style, linewidth=1,
            label=f"published {ref.algorithm}: {ref.value:.3f}, {ref.setting}\n"
            f"({ref.source.split(',')[0]})",
        )  # fmt: skip


def learning_curve_plots(runs: Iterable[tuple[Path, Result]]) -> dict[str, bytes]:
    """Per benchmark with periodic meta-tests, a PNG ``learning_<benchmark>.png``: each run's
    success rate (where reported) and return after adapting, and in its first exploration
    episode, against the environment steps of meta-training, ending in its final meta-test.
    The gap between the two lines is what adapting buys. Runs are named as in the tables (with
    their setting where one algorithm ran with several), and the success panel draws the
    benchmark's published meta-test success rates. Sorted by benchmark."""
    runs = list(runs)
    names = {id(run): name for (_, name), group in group_runs(runs).items() for run in group}
    by_benchmark: dict[str, list[tuple[str, Result, list[EvaluationRecord]]]] = {}
    for path, result in runs:
        evals = periodic_metatests(path)
        if evals:
            by_benchmark.setdefault(result.config.benchmark, []).append(
                (names[id(result)], result, evals)
            )
    return {
        plot_filename(benchmark).replace("adaptation_", "learning_", 1): _plot_learning(
            benchmark, sorted(group, key=lambda r: (r[0], r[1].config.seed))
        )
        for benchmark, group in sorted(by_benchmark.items())
    }


def _by_benchmark(results: Iterable[ResultLike]) -> dict[str, dict[str, list[Result]]]:
    by_benchmark: dict[str, dict[str, list[Result]]] = {}
    for (benchmark, algorithm), runs in group_runs(results).items():
        by_benchmark.setdefault(benchmark, {})[algorithm] = runs
    return dict(sorted(by_benchmark.items()))


def _seeds(name: str, scores: np.ndarray) -> str:
    return f"{name} ({scores.size} seed{'s' if scores.size > 1 else ''})"


def _png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    return buffer.getvalue()


PROFILE_POINTS = 201
"""Thresholds at which a performance profile plot evaluates each algorithm's profile."""


def _legend_below(fig: Figure, ax: Axes) -> None:
    """Put ``ax``'s legend under the panels, the figure made taller by its rows.

    Inside a panel a legend hides the curves once the labels name a run's settings (a variant's
    label runs to a hundred characters); below them it hides nothing.
    """
    handles, labels = ax.get_legend_handles_labels()
    if not labels:
        return
    columns = 1 if max(map(len, labels)) > 40 else 2
    rows = -(-len(labels) // columns)
    width, height = fig.get_size_inches()
    fig.set_size_inches(width, height + 0.22 * rows)
    fig.legend(handles, labels, loc="outside lower center", ncols=columns, fontsize="small")


def _plot_profile(benchmark: str, label: str, scores: dict[str, np.ndarray]) -> bytes:
    from rliable import plot_utils

    every = np.concatenate(list(scores.values()))
    low, high = min(0.0, float(every.min())), max(1.0, float(every.max()))
    thresholds = np.linspace(low, high, PROFILE_POINTS)
    profiles = performance_profile(scores, thresholds, CONFIDENCE)
    named = {_seeds(name, s): profiles[name] for name, s in scores.items()}
    fig = Figure(figsize=(PANEL_SIZE[0] * 1.5, PANEL_SIZE[1]), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    plot_utils.plot_performance_profiles(
        {name: np.array([i.mean for i in profile]) for name, profile in named.items()},
        thresholds,
        performance_profile_cis={
            name: np.array([[i.low for i in profile], [i.high for i in profile]])
            for (name, profile), s in zip(named.items(), scores.values(), strict=True)
            if s.size > 1
        },
        ax=ax,
        colors={name: f"C{i}" for i, name in enumerate(named)},
        xlabel=r"threshold $\tau$ of the score",
        ylabel=r"fraction of runs with score $> \tau$",
        labelsize="medium",
        ticklabelsize="small",
        wrect=5,
        hrect=5,
    )
    ax.set_ylim(-0.05, 1.05)
    _legend_below(fig, ax)
    _suptitle_within(
        fig,
        f"{benchmark}: performance profile over seeds (rliable)\nscore: {label}; "
        f"bands: {CONFIDENCE:.0%} percentile bootstrap resampling each algorithm's runs "
        f"(none with one seed)",
        fontsize="small",
    )
    return _png(fig)


def _suptitle_within(fig: Figure, text: str, **kwargs: Any) -> None:
    """``fig``'s title, its lines wrapped at spaces to fit the figure's width: constrained
    layout makes room for a title's height but not its width, and cuts a longer line (the
    profile's score label runs to a paragraph)."""
    title = fig.suptitle(text, **kwargs)
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]  # Agg's canvas
    limit = 0.96 * fig.bbox.width
    width = max(map(len, text.splitlines()))
    while width > 20 and (extent := title.get_window_extent(renderer).width) > limit:
        width = min(width - 1, int(width * limit / extent))
        title.set_text("\n".join(textwrap.fill(line, width) for line in text.splitlines()))


def profile_plots(results: Iterable[ResultLike]) -> dict[str, bytes]:
    """Per benchmark with at least two algorithms, a PNG ``profile_<benchmark>.png``: rliable's
    performance profile of each algorithm (the fraction of its runs whose score is above a
    threshold, against the threshold) with a 95% percentile bootstrap band resampling each
    algorithm's runs (rliable's stratified bootstrap). The score is
    :func:`~metabench.analysis.comparisons.benchmark_scores`' (success, or the return on the
    benchmark's fixed scale), named in the title. Sorted by benchmark."""
    plots = {}
    for benchmark, groups in _by_benchmark(results).items():
        label, scores = benchmark_scores(groups)
        if len(scores) >= 2:
            name = plot_filename(benchmark).replace("adaptation_", "profile_", 1)
            plots[name] = _plot_profile(benchmark, label, scores)
    return plots


PAIR_SEPARATOR = "\t"
"""Joins the two algorithms of a pair for rliable's plot (a tab: no algorithm's name has one)."""


def _plot_improvement(benchmark: str, label: str, scores: dict[str, np.ndarray]) -> bytes:
    from rliable import plot_utils

    ranked = sorted(scores, key=lambda name: -float(np.mean(scores[name])))
    pairs = list(itertools.pairwise(ranked))[::-1]  # rliable draws the first pair lowest
    intervals = {
        PAIR_SEPARATOR.join((_seeds(x, scores[x]), _seeds(y, scores[y]))): improvement_interval(
            scores[x], scores[y], CONFIDENCE, COMPARISON_RESAMPLES
        )
        for x, y in pairs
    }
    height = max(PANEL_SIZE[1] / 2, 0.5 * len(pairs) + 2.0)
    fig = Figure(figsize=(PANEL_SIZE[0] * 1.5, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    plot_utils.plot_probability_of_improvement(
        {pair: interval.mean for pair, interval in intervals.items()},
        {pair: np.array([i.low, i.high]) for pair, i in intervals.items()},
        pair_separator=PAIR_SEPARATOR,
        ax=ax,
        colors=[f"C{i}" for i in range(len(pairs))],
        xticks=[0.0, 0.25, 0.5, 0.75, 1.0],
        xlabel="P(X > Y)",
        left_ylabel="X",
        right_ylabel="Y",
        labelsize="medium",
        ticklabelsize="small",
    )
    ax.set_xlim(0.0, 1.0)
    fig.suptitle(
        f"{benchmark}: probability of improvement over seeds (rliable) of each algorithm X "
        f"over the algorithm Y ranked next below it by mean score\nscore: {label}\nbar: "
        f"{CONFIDENCE:.0%} percentile bootstrap resampling the seeds of X and of Y apart; "
        f"line: the estimate",
        fontsize="small",
    )
    return _png(fig)


def improvement_plots(results: Iterable[ResultLike]) -> dict[str, bytes]:
    """Per benchmark with at least two algorithms of at least 2 seeds each, a PNG
    ``improvement_<benchmark>.png``: rliable's probability of improvement P(X > Y) with its
    percentile bootstrap interval (the seeds of X and of Y resampled apart), for each such
    algorithm X and the one ranked next below it by mean score. Algorithms with one seed are
    left out (with one seed on a side the probability is 0, 0.5 or 1). Sorted by benchmark."""
    plots = {}
    for benchmark, groups in _by_benchmark(results).items():
        label, scores = benchmark_scores(groups)
        several = {name: s for name, s in scores.items() if s.size >= 2}
        if len(several) >= 2:
            name = plot_filename(benchmark).replace("adaptation_", "improvement_", 1)
            plots[name] = _plot_improvement(benchmark, label, several)
    return plots


def render_plots(results: Iterable[ResultLike]) -> dict[str, bytes]:
    """Every plot of ``results`` by file name: the adaptation curves, the return-by-task plots,
    the performance profiles, the probabilities of improvement, then the learning curves of
    results given with their paths (write them with
    :func:`metabench.analysis.generated.write_generated`)."""
    results = list(results)
    with_paths = [item for item in results if isinstance(item, tuple)]
    return {
        **adaptation_plots(results),
        **return_by_task_plots(results),
        **profile_plots(results),
        **improvement_plots(results),
        **learning_curve_plots(with_paths),
    }
