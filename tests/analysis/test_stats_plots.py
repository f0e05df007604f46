"""Statistics over seeds and adaptation plots, checked against hand computations on fake results."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tomllib
from matplotlib.axes import Axes
from matplotlib.image import imread
from rich.console import Console
from scipy import stats

from metabench.analysis import plots
from metabench.analysis.comparisons import (
    RAW_RETURN_LABEL,
    benchmark_scores,
    compare,
    comparison_markdown,
    improvement_interval,
    performance_profile,
    probability_of_improvement,
)
from metabench.analysis.periodic import periodic_metatests
from metabench.analysis.resultfile import read_result
from metabench.analysis.stats import (
    MIN_SEEDS_FOR_IQM,
    group_runs,
    iqm,
    seed_intervals,
    summarize,
    t_interval,
)
from metabench.analysis.tables import (
    per_task_success_markdown,
    results_markdown,
    summary_csv,
    summary_markdown,
)
from metabench.harness.report import grid_tables
from metabench.records import EvaluationRecord, RunResult
from tests.factories import make_result

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def simple_run(
    benchmark: str, algorithm: str, seed: int, test_return: float, **kw: Any
) -> RunResult:
    """One task whose single test episode returns ``test_return`` (after 2 exploration eps)."""
    return make_result(benchmark, algorithm, seed, [[0.0, 1.0, test_return]], **kw)


# -- iqm -----------------------------------------------------------------------------------------
def test_iqm_against_hand_computation() -> None:
    # 8 values: the middle 50% are the 3rd to 6th smallest.
    values = [100.0, 0.0, 6.0, 1.0, 5.0, 2.0, 4.0, 3.0]
    assert iqm(values) == pytest.approx((2 + 3 + 4 + 5) / 4)
    assert iqm([1.0, 2.0, 3.0, 4.0]) == pytest.approx(2.5)
    assert MIN_SEEDS_FOR_IQM == 4


# -- summaries -----------------------------------------------------------------------------------
def test_summarize_groups_and_takes_intervals_over_seeds() -> None:
    per_seed = {0: 10.0, 1: 14.0, 2: 9.0, 3: 20.0}
    results = [
        *(simple_run("B", "algo-a", s, v, env_steps=1000 * (s + 1)) for s, v in per_seed.items()),
        simple_run("B", "algo-b", 5, 3.0, metatrain={"metatrain/post_update_return": -1.0}),
        simple_run("B", "algo-b", 2, 4.0, metatrain={"metatrain/post_update_return": -3.0}),
        simple_run("A", "algo-a", 0, 1.0, metatrain={"metatrain/average_return": 7.0}),
    ]
    groups = group_runs(results[::-1])
    assert list(groups) == [("A", "algo-a"), ("B", "algo-a"), ("B", "algo-b")]
    assert [r.config.seed for r in groups[("B", "algo-b")]] == [2, 5]

    summaries = {(s.benchmark, s.algorithm): s for s in summarize(results)}
    a = summaries[("B", "algo-a")]
    assert a.n_seeds == 4 and a.seeds == (0, 1, 2, 3)
    assert a.env_steps == pytest.approx(2500.0)
    assert a.test_return == t_interval(list(per_seed.values()))
    assert a.test_return.mean == pytest.approx(np.mean(list(per_seed.values())))
    assert a.test_return_iqm == pytest.approx((10.0 + 14.0) / 2)  # middle two of 9, 10, 14, 20
    assert a.test_success is None and a.test_success_iqm is None
    assert a.metatrain_return is None

    b = summaries[("B", "algo-b")]
    assert b.n_seeds == 2 and b.test_return_iqm is None  # fewer than 4 seeds
    assert b.metatrain_return is not None and b.metatrain_return.mean == pytest.approx(-2.0)

    single = summaries[("A", "algo-a")]
    assert single.test_return.mean == 1.0 and math.isnan(single.test_return.low)
    assert single.metatrain_return is not None and single.metatrain_return.mean == 7.0


def test_summary_resamples_seeds_not_episodes() -> None:
    # Per-seed aggregates are 2, 5 and 8 whatever the number of tasks of seed 0.
    def runs(seed0_tasks: list[list[float]]) -> list[RunResult]:
        return [
            make_result("B", "x", 0, seed0_tasks, exploration_episodes=1),
            make_result("B", "x", 1, [[0.0, 5.0]], exploration_episodes=1),
            make_result("B", "x", 2, [[0.0, 8.0]], exploration_episodes=1),
        ]

    few = summarize(runs([[0.0, 1.0], [0.0, 3.0]]))[0]
    many = summarize(runs([[0.0, v] for v in (1.0, 3.0, 1.0, 3.0, 1.0, 3.0, 2.0, 2.0)]))[0]
    # everything over seeds is the same; only the within-run noise over test tasks differs
    assert dataclasses.replace(few, task_noise=None) == dataclasses.replace(many, task_noise=None)
    assert few.test_return == t_interval([2.0, 5.0, 8.0])
    assert few.test_return.mean == pytest.approx(5.0)  # pooling episodes would give 4.25


def test_pre_adaptation_return_gain_and_test_task_noise() -> None:
    """Pre: mean of the exploration episodes; gain: post - pre per seed; noise: half the width of
    a bootstrap interval over one run's test tasks, recomputed here with scipy."""
    tasks = {0: [[-3.0, -1.0, 2.0], [-5.0, -3.0, 4.0]], 1: [[-2.0, 0.0, 1.0], [0.0, 0.0, 3.0]]}
    runs = [make_result("B", "x", seed, t, exploration_episodes=2) for seed, t in tasks.items()]
    summary = summarize(runs)[0]
    pre = [float(np.mean([-3.0, -1.0, -5.0, -3.0])), float(np.mean([-2.0, 0.0, 0.0, 0.0]))]
    post = [3.0, 2.0]
    assert summary.pre_return == t_interval(pre)
    assert summary.adaptation_gain == t_interval([post[0] - pre[0], post[1] - pre[1]])
    widths = []
    for seed_tasks in tasks.values():
        per_task = np.array([task[2] for task in seed_tasks])
        ci = stats.bootstrap(
            (per_task,), np.mean, n_resamples=10_000, method="percentile",
            rng=np.random.default_rng(0),
        ).confidence_interval  # fmt: skip
        widths.append((ci.high - ci.low) / 2)
    assert summary.task_noise == pytest.approx(np.mean(widths))
    row = next(line for line in summary_markdown([summary]).splitlines() if line.startswith("| x"))
    assert f"| {summary.task_noise:.2f} |" in row


def test_grid_tables_one_per_benchmark_best_first_with_pre_post_and_gain() -> None:
    tasks = {"slow": [[-9.0, -5.0]], "fast": [[-4.0, 0.0]]}
    runs = [
        make_result(benchmark, algorithm, seed, tasks[algorithm], exploration_episodes=1)
        for benchmark in ("Vel", "Dir")
        for algorithm in ("slow", "fast")
        for seed in (0, 1)
    ]
    tables = grid_tables(summarize(runs), "quick")
    assert [table.title for table in tables] == ["Dir: quick", "Vel: quick"]
    console = Console(width=200, record=True)
    for table in tables:
        console.print(table)
    lines = console.export_text().splitlines()
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in lines if "│" in line]
    assert [row[0] for row in rows] == ["fast", "slow", "fast", "slow"]
    # pre -4, post 0, gain +4, the same on both seeds: an interval without width
    assert rows[0][4:] == ["-4.0", "0.0", "[0.0, 0.0]", "+4.0", "[4.0, 4.0]"]
    assert rows[1][4:] == ["-9.0", "-5.0", "[-5.0, -5.0]", "+4.0", "[4.0, 4.0]"]
    assert "success" not in console.export_text()  # no benchmark here reports success
    assert tables[-1].caption is not None and "multitask" in str(tables[-1].caption)


def test_success_is_the_fraction_of_test_episodes_as_metaworld_counts_it() -> None:
    """One success in three test episodes is a rate of 1/3 (Meta-World's evaluation), not a
    solved task; the table and the per-env table both say 1/3."""
    task = mw_task("reach-v3")
    result = make_result(
        "ML1", "x", 0, [[0.0, 0.0, 1.0, 1.0, 1.0]], exploration_episodes=2,
        successes=[[False, False, True, False, False]], tasks=[task],
    )  # fmt: skip
    summary = summarize([result])[0]
    assert summary.test_success is not None
    assert summary.test_success.mean == pytest.approx(1 / 3)
    assert "| 0.333 |" in per_task_success_markdown([result])


def test_duplicate_seeds_are_rejected_naming_their_folders() -> None:
    with pytest.raises(ValueError, match=r"B / x has several runs of seed\(s\) \[0\]; seeds"):
        group_runs([simple_run("B", "x", 0, 1.0), simple_run("B", "x", 0, 2.0)])
    read = [(Path(f"res/B/x-{i}/result.json"), simple_run("B", "x", 0, 1.0 + i)) for i in (1, 2)]
    with pytest.raises(ValueError, match=r"seed\(s\) \[0\] \(res/B/x-1, res/B/x-2\); seeds"):
        group_runs(read)


def with_setting(result: RunResult, budget: int, **hyperparameters: Any) -> RunResult:
    config = dataclasses.replace(
        result.config, env_steps_budget=budget, hyperparameters=hyperparameters
    )
    return dataclasses.replace(result, config=config)


def test_runs_of_different_settings_are_not_pooled_and_their_labels_name_the_difference() -> None:
    runs = [
        with_setting(simple_run("B", "x", 0, 1.0), 5_000_000, lr=0.1, clip=True),
        with_setting(simple_run("B", "x", 1, 2.0), 5_000_000, lr=0.1, clip=True),
        with_setting(simple_run("B", "x", 0, 10.0), 20_000_000, lr=0.1, clip=False, new=3),
        with_setting(simple_run("B", "y", 0, 5.0), 1_000, lr=0.5),
    ]
    groups = group_runs(runs)
    # an option the 5e6 runs did not record (left at its default) is not named in their label
    assert list(groups) == [
        ("B", "x (2e7 steps, clip=false, new=3)"),
        ("B", "x (5e6 steps, clip=true)"),
        ("B", "y"),
    ]
    short_run = ("B", "x (5e6 steps, clip=true)")
    assert [r.config.seed for r in groups[short_run]] == [0, 1]
    means = {s.algorithm: s.test_return.mean for s in summarize(runs)}
    assert means["x (5e6 steps, clip=true)"] == pytest.approx(1.5)
    assert means["x (2e7 steps, clip=false, new=3)"] == pytest.approx(10.0)


def test_a_setting_that_left_an_option_at_its_default_does_not_name_it() -> None:
    recorded = with_setting(simple_run("B", "x", 0, 1.0), 100, lr=0.1)
    unrecorded = with_setting(simple_run("B", "x", 0, 2.0), 100)
    assert set(group_runs([recorded, unrecorded])) == {("B", "x (lr=0.1)"), ("B", "x (defaults)")}
    both = with_setting(simple_run("B", "x", 0, 3.0), 100, lr=0.1, clip=True)
    clip_only = with_setting(simple_run("B", "x", 0, 4.0), 100, clip=True)
    assert set(group_runs([both, clip_only, recorded])) == {
        ("B", "x (clip=true, lr=0.1)"),
        ("B", "x (clip=true)"),
        ("B", "x (lr=0.1)"),
    }


def test_a_setting_label_names_a_different_meta_test_protocol() -> None:
    one = with_setting(simple_run("B", "x", 0, 1.0), 100)
    three = with_setting(make_result("B", "x", 0, [[0.0, 1.0, 2.0, 3.0, 4.0]]), 100)
    assert set(group_runs([one, three])) == {("B", "x (2+1 episodes)"), ("B", "x (2+3 episodes)")}


def success_runs(algorithm: str, rates: list[float], metaworld: bool = True) -> list[RunResult]:
    """Seeds with 4 tasks each; ``rates[s]`` of them succeed in their test episode; of ML1
    (``metaworld``) or of PointGoal."""
    out = []
    for seed, rate in enumerate(rates):
        n_ok = round(rate * 4)
        successes = [[False, i < n_ok] for i in range(4)]
        run = make_result(
            "ML1" if metaworld else "PointGoal",
            algorithm,
            seed,
            [[0.0, float(seed)] for _ in range(4)],
            exploration_episodes=1,
            successes=successes,
        )
        out.append(run)
    return out


def test_markdown_and_csv_report_the_numbers() -> None:
    results = [
        *success_runs("rl2", [0.25, 0.5, 0.75, 1.0]),
        simple_run("Cheetah", "maml", 0, -80.0, wall_time_s=6000.0),
        simple_run("Cheetah", "maml", 1, -70.0, wall_time_s=9000.0),
    ]
    summaries = summarize(results)
    rl2 = next(s for s in summaries if s.algorithm == "rl2")
    maml = next(s for s in summaries if s.algorithm == "maml")
    assert rl2.test_success is not None
    assert rl2.test_success.mean == pytest.approx(0.625)
    assert rl2.test_success_iqm == pytest.approx(0.625)  # middle two of .25 .5 .75 1
    assert rl2.test_return.mean == pytest.approx(1.5)

    markdown = summary_markdown(summaries)
    assert "### Cheetah" in markdown and "### ML1" in markdown
    maml_row = next(line for line in markdown.splitlines() if line.startswith("| maml |"))
    low, high = maml.test_return.low, maml.test_return.high
    assert f"-75.00 [{low:.2f}, {high:.2f}]" in maml_row
    assert "| 2.08 h |" in maml_row  # 7,500 s on average: hours past one
    assert maml_row.count("n/a") >= 2  # no success, no meta-train return
    assert "—" in maml_row  # IQM with 2 seeds
    rl2_row = next(line for line in markdown.splitlines() if line.startswith("| rl2 |"))
    assert "0.625 [" in rl2_row and "| 0.625 |" in rl2_row and "| 1.50 |" in rl2_row

    rows = list(csv.DictReader(io.StringIO(summary_csv(summaries))))
    assert [(r["benchmark"], r["algorithm"]) for r in rows] == [("Cheetah", "maml"), ("ML1", "rl2")]
    maml_csv, rl2_csv = rows
    assert maml_csv["seeds"] == "0 1" and int(maml_csv["n_seeds"]) == 2
    assert float(maml_csv["test_return_mean"]) == maml.test_return.mean
    assert float(maml_csv["test_return_low"]) == low
    assert float(maml_csv["test_return_high"]) == high
    assert float(maml_csv["wall_time_s"]) == pytest.approx(7500.0)
    assert maml_csv["test_return_iqm"] == "" and maml_csv["test_success_mean"] == ""
    assert float(rl2_csv["test_success_mean"]) == pytest.approx(0.625)
    assert float(rl2_csv["test_success_iqm"]) == pytest.approx(0.625)
    assert float(rl2_csv["test_return_iqm"]) == pytest.approx(1.5)


def mw_task(env_name: str) -> dict[str, str]:
    return {"env_name": env_name, "data": "AAAA"}


def test_per_task_success_aggregates_by_env_name() -> None:
    names = ["reach-v3", "reach-v3", "push-v3"]
    tasks = [mw_task(n) for n in names]

    def run(algorithm: str, seed: int, test_ok: list[bool], run_tasks: list[Any]) -> dict:
        # Exploration episodes always succeed: only the test episode may count.
        return make_result(
            "ML-fake",
            algorithm,
            seed,
            [[0.0, 0.0] for _ in run_tasks],
            exploration_episodes=1,
            successes=[[True, ok] for ok in test_ok],
            tasks=run_tasks,
        )

    results = [
        run("rl2", 0, [True, False, True], tasks),  # reach 0.5, push 1
        run("rl2", 1, [True, True, False], tasks),  # reach 1.0, push 0
        run("maml", 0, [False, False], tasks[:2]),  # reach only
    ]
    table = per_task_success_markdown(results)
    lines = table.splitlines()
    assert "| env | maml | rl2 |" in lines
    rows = [line for line in lines if line.startswith("| ") and "-v3" in line]
    assert rows == ["| push-v3 | n/a | 0.500 |", "| reach-v3 | 0.000 | 0.750 |"]
    # each seed's mean over its envs (rl2: 0.75 and 0.5), then over seeds
    assert "| **all envs** | 0.000 | 0.625 |" in lines


def test_per_task_success_empty_without_success() -> None:
    assert per_task_success_markdown([simple_run("B", "x", 0, 1.0)]) == ""
    no_success = make_result(
        "B", "x", 0, [[0.0, 1.0]], exploration_episodes=1, tasks=[mw_task("a")]
    )
    assert per_task_success_markdown([no_success]) == ""


# -- plots ---------------------------------------------------------------------------------------
def test_plot_adaptation_curves_one_valid_png_per_benchmark(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    results = [
        make_result(
            "Cheetah/Vel",
            algorithm,
            seed,
            [list(rng.normal(size=4)) for _ in range(3)],
            exploration_episodes=3,
        )
        for algorithm in ("maml", "rl2")
        for seed in range(3)
    ]
    results += success_runs("rl2", [0.25, 0.5, 0.75])
    results.append(simple_run("Single", "nop", 0, 1.0))  # one seed: no band
    pngs = plots.adaptation_plots([(Path("x"), r) for r in results])

    assert list(pngs) == [
        "adaptation_Cheetah_Vel.png",
        "adaptation_ML1.png",
        "adaptation_Single.png",
    ]
    width, height = (int(plots.PANEL_SIZE[0] * plots.DPI), int(plots.PANEL_SIZE[1] * plots.DPI))
    expected_width = {"Cheetah_Vel": width, "ML1": 2 * width, "Single": width}  # ML1: success
    # the legend sits below the panels in 2 columns, each row adding 0.22 inch: Cheetah_Vel's
    # 3 labels (maml, rl2, end of exploration) take 2 rows, the others' 2 labels one
    row = round(0.22 * plots.DPI)
    expected_height = {"Cheetah_Vel": height + 2 * row, "ML1": height + row, "Single": height + row}
    for name, png in pngs.items():
        assert png[:8] == PNG_SIGNATURE
        image = imread(io.BytesIO(png), format="png")
        benchmark = name.removesuffix(".png").removeprefix("adaptation_")
        assert image.shape[:2] == (expected_height[benchmark], expected_width[benchmark])


def test_mixed_protocols_plot_as_separate_lines(monkeypatch) -> None:
    results = [
        make_result("B", "x", 0, [[0.0, 1.0, 2.0]], exploration_episodes=2),
        make_result("B", "x", 1, [[0.0, 1.0]], exploration_episodes=1),
    ]
    drawn: list[tuple[str, int]] = []
    monkeypatch.setattr(
        plots, "_draw", lambda ax, curves, label, color: drawn.append((label, curves.shape[1]))
    )
    plots.adaptation_plots(results)
    assert sorted(drawn) == [("x (1+1 episodes) (1 seed)", 2), ("x (2+1 episodes) (1 seed)", 3)]


def test_task_points_pair_each_test_task_with_its_post_adaptation_return() -> None:
    runs = [
        make_result(
            "Vel", "x", 0, [[-9.0, -1.0, -3.0], [-9.0, -5.0, -7.0]],
            exploration_episodes=1, tasks=[{"velocity": 1.5}, {"velocity": 0.5}],
        ),
        make_result(
            "Vel", "x", 1, [[0.0, -4.0, -4.0]], exploration_episodes=1, tasks=[{"velocity": 1.0}]
        ),
    ]  # fmt: skip
    points = plots.task_points(runs)
    assert points is not None
    name, values, returns = points
    assert name == "velocity"
    assert values.tolist() == [0.5, 1.0, 1.5]
    assert returns.tolist() == [-6.0, -4.0, -2.0]  # the mean of each task's test episodes
    two_numbers = make_result("G", "x", 0, [[0.0, 1.0]], tasks=[{"x": 0.1, "y": 0.2}])
    assert plots.task_points([two_numbers]) is None


def test_return_by_task_plot_only_where_the_task_is_one_number_with_many_values(
    tmp_path: Path,
) -> None:
    def runs(benchmark: str, tasks: list[Any]) -> list[dict]:
        returns = [[0.0, -abs(1.0 - float(i))] for i in range(len(tasks))]
        return [
            make_result(benchmark, algorithm, 0, returns, exploration_episodes=1, tasks=tasks)
            for algorithm in ("maml", "nop")
        ]

    velocities = [{"velocity": 0.25 * i} for i in range(plots.MIN_TASK_VALUES)]
    directions = [{"direction": d} for d in (-1.0, 1.0, -1.0, 1.0, 1.0, -1.0)]
    goals = [{"goal": [0.1 * i, 0.0]} for i in range(6)]
    results = runs("Vel", velocities) + runs("Dir", directions) + runs("Goal", goals)
    pngs = plots.render_plots(results)
    assert list(pngs) == [
        "adaptation_Dir.png",
        "adaptation_Goal.png",
        "adaptation_Vel.png",
        "return_by_task_Vel.png",
        "profile_Dir.png",  # two algorithms each, one seed: no probability of improvement
        "profile_Goal.png",
        "profile_Vel.png",
    ]
    image = imread(io.BytesIO(pngs["return_by_task_Vel.png"]), format="png")
    legend_row = round(0.22 * plots.DPI)  # maml and nop: one row of the legend below the panel
    assert image.shape[:2] == (
        int(plots.PANEL_SIZE[1] * plots.DPI) + legend_row,
        int(plots.PANEL_SIZE[0] * plots.DPI),
    )


def test_learning_curves_come_from_the_periodic_metatests_beside_each_result(
    tmp_path: Path,
) -> None:
    def run(name: str, benchmark: str, seed: int, n_evaluations: int, success: bool) -> tuple:
        folder = tmp_path / name
        (folder / "evaluations").mkdir(parents=True)
        successes = [[False, True]] if success else None
        result = make_result(benchmark, "rl2", seed, [[0.0, 1.0]], successes=successes)
        for k in range(1, n_evaluations + 1):
            periodic = make_result(benchmark, "rl2", seed, [[k, 2.0 * k]], successes=successes)
            record = EvaluationRecord(periodic.metatest, iteration=k, env_steps=100 * k).to_json()
            (folder / "evaluations" / f"iteration-{k:06d}.json").write_text(json.dumps(record))
        return folder / "result.json", result

    runs = [
        run("a", "ML1", 0, 3, success=True),
        run("b", "ML1", 1, 2, success=True),
        run("c", "Vel", 0, 2, success=False),
        run("d", "Bare", 0, 0, success=False),  # no periodic meta-test: no plot
    ]
    pngs = plots.learning_curve_plots(runs)
    assert list(pngs) == ["learning_ML1.png", "learning_Vel.png"]
    width, height = (int(plots.PANEL_SIZE[0] * plots.DPI), int(plots.PANEL_SIZE[1] * plots.DPI))
    ml1 = imread(io.BytesIO(pngs["learning_ML1.png"]), format="png")
    vel = imread(io.BytesIO(pngs["learning_Vel.png"]), format="png")
    # the legend below the panels holds a test and a first-episode line per run, in 2 columns
    row = round(0.22 * plots.DPI)
    assert ml1.shape[:2] == (height + 2 * row, 2 * width)  # success and return; 2 runs
    assert vel.shape[:2] == (height + row, width)  # return only; 1 run
    assert [e.env_steps for e in periodic_metatests(runs[0][0])] == [100, 200, 300]
    # given with their paths, results get their learning curves in every plot set
    assert "learning_ML1.png" in plots.render_plots(runs)
    assert "learning_ML1.png" not in plots.render_plots([result for _, result in runs])


def test_learning_curves_name_runs_by_setting_and_draw_the_published_success(
    tmp_path: Path, monkeypatch
) -> None:
    def run(name: str, seed: int, budget: int, clip: bool) -> tuple:
        folder = tmp_path / name
        (folder / "evaluations").mkdir(parents=True)
        result = with_setting(
            make_result("ML10", "rl2", seed, [[0.0, 1.0]], successes=[[False, True]]),
            budget, clip_actions=clip,
        )  # fmt: skip
        periodic = make_result("ML10", "rl2", seed, [[0.0, 1.0]], successes=[[False, True]])
        record = EvaluationRecord(periodic.metatest, iteration=1, env_steps=100).to_json()
        (folder / "evaluations" / "iteration-000001.json").write_text(json.dumps(record))
        return folder / "result.json", result

    lines: list[tuple[float, str]] = []
    labels: list[str] = []
    real_axhline, real_plot = Axes.axhline, Axes.plot
    monkeypatch.setattr(
        Axes, "axhline", lambda ax, y, **kw: lines.append((y, kw["label"])) or real_axhline(ax, y)
    )
    monkeypatch.setattr(
        Axes, "plot", lambda ax, *a, **kw: labels.append(kw.get("label", "")) or real_plot(ax, *a)
    )
    plots.learning_curve_plots([run("a", 0, 500, True), run("b", 0, 2000, False)])
    with open(Path(plots.__file__).parents[1] / "references.toml", "rb") as f:
        published = {
            (ref["algorithm"], ref["value"])
            for ref in tomllib.load(f)["reference"]
            if ref["benchmark"] == "ML10" and ref.get("metric") == "meta-test success rate"
        }
    assert published  # the Meta-World paper's RL2 and MAML numbers
    assert {(label.split()[1].rstrip(":"), y) for y, label in lines} == published
    assert "rl2 (500 steps, clip_actions=true) seed 0: test" in labels
    assert "rl2 (2,000 steps, clip_actions=false) seed 0: test" in labels


def test_learning_curves_compute_the_success_from_the_episodes_not_the_stored_aggregate(
    tmp_path: Path, monkeypatch
) -> None:
    # a file's aggregate is for its readers: the plot counts the episodes (1 of 4 test
    # episodes succeed during training, 3 of 4 at the end), whatever the aggregate says
    def stale(record: dict) -> dict:
        return {**record, "aggregate": {**record["aggregate"], "test_episode_success_rate": 0.5}}

    folder = tmp_path / "run"
    (folder / "evaluations").mkdir(parents=True)
    returns, at_end = [[0.0, 1.0]] * 4, [[False, True]] * 3 + [[False, False]]
    result = make_result("ML10", "rl2", 0, returns, exploration_episodes=1, successes=at_end)
    during = [[False, True]] + [[False, False]] * 3
    periodic = make_result("ML10", "rl2", 0, returns, exploration_episodes=1, successes=during)
    record = stale(EvaluationRecord(periodic.metatest, iteration=1, env_steps=100).to_json())
    (folder / "evaluations" / "iteration-000001.json").write_text(json.dumps(record))
    stored = result.to_json()
    stored["metatest"] = stale(stored["metatest"])
    (folder / "result.json").write_text(json.dumps(stored))
    result = read_result(folder / "result.json")

    drawn: dict[str, list[float]] = {}
    real_plot = Axes.plot

    def plot(ax: Axes, x: list, y: list, *args: Any, **kw: Any) -> Any:
        drawn.setdefault(kw.get("label", "star"), []).extend(y)
        return real_plot(ax, x, y, *args, **kw)

    monkeypatch.setattr(Axes, "plot", plot)
    pngs = plots.learning_curve_plots([(folder / "result.json", result)])
    ml10 = imread(io.BytesIO(pngs["learning_ML10.png"]), format="png")
    assert ml10.shape[1] == 2 * int(plots.PANEL_SIZE[0] * plots.DPI)  # success and return
    assert drawn["rl2 seed 0: test"][0] == 0.25  # the success panel comes first
    assert 0.75 in drawn["star"]  # the final meta-test's


# -- rliable: intervals, IQM, performance profiles, probability of improvement -----------------
def test_iqm_is_the_mean_of_the_middle_half_computed_by_hand() -> None:
    values = np.random.default_rng(5).normal(size=12)
    middle = np.sort(values)[3:9]  # 12 values: drop the 3 lowest and the 3 highest
    assert iqm(values) == pytest.approx(float(np.mean(middle)), abs=1e-12)


def test_seed_intervals_contain_the_estimate_and_shrink_with_more_seeds() -> None:
    rng = np.random.default_rng(6)
    widths = []
    for n_seeds in (5, 80):
        scores = rng.normal(0.0, 1.0, size=(n_seeds, 3))
        points, low, high = seed_intervals(scores, n_resamples=2_000)
        assert points == pytest.approx(scores.mean(axis=0))
        assert np.all(low <= points) and np.all(points <= high)
        widths.append(np.mean(high - low))
    assert widths[1] < widths[0] / 2  # about sqrt(16) = 4 times narrower


def test_intervals_are_seeded_and_leave_numpys_global_rng_alone() -> None:
    sample = np.random.default_rng(7).exponential(size=(6, 2))
    np.random.seed(11)
    before = np.random.get_state()[1].copy()
    first = seed_intervals(sample, n_resamples=2_000)
    assert np.array_equal(np.random.get_state()[1], before)
    again = seed_intervals(sample, n_resamples=2_000)
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))


def test_probability_of_improvement_is_the_mann_whitney_u_by_hand() -> None:
    x, y = [1.0, 4.0, 6.0, 6.0], [2.0, 4.0, 5.0]
    wins = sum(1.0 if a > b else 0.5 if a == b else 0.0 for a in x for b in y)
    assert wins == 7.5  # 1: none; 4: beats 2, ties 4; 6 and 6: beat all three
    expected = wins / (len(x) * len(y))
    assert probability_of_improvement(x, y) == pytest.approx(expected)
    u = stats.mannwhitneyu(x, y, alternative="greater").statistic
    assert u / (len(x) * len(y)) == pytest.approx(expected)
    assert probability_of_improvement(y, x) == pytest.approx(1 - expected)
    assert probability_of_improvement(x, x) == 0.5


def test_improvement_interval_brackets_the_estimate_and_needs_two_seeds_a_side() -> None:
    x, y = [3.0, 5.0, 4.0, 6.0], [1.0, 4.5, 2.0]
    interval = improvement_interval(x, y, n_resamples=500)
    assert interval.mean == probability_of_improvement(x, y)
    assert 0.0 <= interval.low <= interval.mean <= interval.high <= 1.0
    one = improvement_interval(x, [2.0])
    assert one.mean == 1.0 and math.isnan(one.low) and math.isnan(one.high)


def test_performance_profile_counts_the_runs_above_each_threshold() -> None:
    scores = {"a": np.array([0.1, 0.4, 0.4, 0.9]), "b": np.array([0.5]), "c": np.ones(3)}
    thresholds = [0.0, 0.4, 0.5, 0.95]
    profiles = performance_profile(scores, thresholds, n_resamples=500)
    for name, values in scores.items():
        counted = [sum(v > t for v in values) / len(values) for t in thresholds]
        assert [i.mean for i in profiles[name]] == pytest.approx(counted)
    assert [i.mean for i in profiles["a"]] == [1.0, 0.25, 0.25, 0.0]
    # rliable's own (non-vectorised) score distribution gives the same fractions
    from rliable import library

    assert library.score_distributions(scores["a"][:, None], thresholds) == pytest.approx(
        [1.0, 0.25, 0.25, 0.0]
    )
    assert all(i.low <= i.mean <= i.high for i in profiles["a"])
    assert all(math.isnan(i.low) for i in profiles["b"])  # one seed: no interval
    assert profiles["c"][0] == (1.0, 1.0, 1.0)  # every resample has every run above 0


def with_returns(benchmark: str, algorithm: str, returns: list[float]) -> list[RunResult]:
    return [simple_run(benchmark, algorithm, seed, r) for seed, r in enumerate(returns)]


def test_benchmark_scores_use_success_where_every_run_reports_it() -> None:
    label, scores = benchmark_scores({"rl2": success_runs("rl2", [0.25, 0.75])})
    assert label.startswith("meta-test success") and scores["rl2"].tolist() == [0.25, 0.75]


def test_success_is_the_score_only_where_the_benchmark_publishes_it() -> None:
    """PointGoal's success (within one step of the goal) rewards wandering: its runs are scored
    by their return even though every one reports success."""
    runs = success_runs("wanderer", [0.75, 1.0], metaworld=False)
    label, scores = benchmark_scores({"wanderer": runs})
    assert label == RAW_RETURN_LABEL
    assert scores["wanderer"].tolist() == [float(r.config.seed) for r in runs]  # its test return


def test_compare_tables_label_seeds_and_leave_out_single_seeds() -> None:
    results = [
        *with_returns("B", "a", [1.0, 3.0, 5.0]),
        *with_returns("B", "b", [2.0, 4.0]),
        *with_returns("B", "c", [9.0]),
        *with_returns("Solo", "a", [1.0, 2.0]),  # one algorithm: nothing to compare
        *with_returns("Ones", "a", [1.0]),
        *with_returns("Ones", "b", [2.0]),
    ]
    comparisons = compare(results)
    assert [c.benchmark for c in comparisons] == ["B", "Ones"]
    b = comparisons[0]
    assert b.algorithms == ("a", "b", "c") and b.n_seeds == (3, 2, 1)
    assert b.improvement[0][1] == pytest.approx(3 / 6)  # 3 > 2; 5 > 2, 4: 3 wins of 6
    assert b.improvement[0][2] is None and b.improvement[0][0] is None
    page = comparison_markdown(comparisons)
    section_b, section_ones = page.split("### B")[1].split("### Ones")
    assert "| a (3 seeds) | — | 0.50 |" in section_b
    assert "| c (1 seed) |" in section_b  # in the profile, not in P(row > column)
    assert "one seed each: c." in section_b
    assert "not meaningful here" in section_ones and "P(row > column) |" not in section_ones
    assert comparison_markdown([]) == ""


def test_comparison_plots_one_profile_per_compared_benchmark(tmp_path: Path) -> None:
    results = [
        *with_returns("B", "a", [1.0, 3.0, 5.0]),
        *with_returns("B", "b", [2.0, 4.0]),
        *with_returns("Ones", "a", [1.0]),
        *with_returns("Ones", "b", [2.0]),
    ]
    profiles = plots.profile_plots(results)
    improvements = plots.improvement_plots(results)
    assert list(profiles) == ["profile_B.png", "profile_Ones.png"]
    assert list(improvements) == ["improvement_B.png"]  # Ones: one seed each
    for png in (*profiles.values(), *improvements.values()):
        assert png[:8] == PNG_SIGNATURE
    assert plots.profile_plots(results) == profiles  # the same bytes again


def test_tables_are_the_same_bytes_on_every_run(tmp_path: Path, monkeypatch) -> None:
    from metabench.cli import write_tables

    monkeypatch.setattr(plots, "render_plots", lambda runs: {})  # the plots are checked above

    root = tmp_path / "results"
    for result in [*with_returns("B", "a", [1.0, 3.0, 5.0]), *with_returns("B", "b", [2.0, 4.0])]:
        folder = root / "B" / f"{result.config.algorithm}-seed{result.config.seed}"
        folder.mkdir(parents=True)
        (folder / "result.json").write_text(json.dumps(result.to_json()))
    pages = []
    for out in ("one", "two"):
        write_tables(root, tmp_path / out, "--out")
        pages.append(
            [(tmp_path / out / name).read_bytes() for name in ("README.md", "summary.csv")]
        )
    assert pages[0] == pages[1]
    assert "## Comparisons between algorithms" in pages[0][0].decode()


def test_the_runs_table_gives_the_steps_taken_where_they_differ_from_the_budget(
    tmp_path: Path,
) -> None:
    """A run whose episodes ended before the horizon shows both counts; one that took what its
    budget counts, or did not count them, shows the budget's."""
    taken = {"fell": 1234, "full": 4800, "uncounted": None}
    runs = [
        (
            tmp_path / name / "result.json",
            dataclasses.replace(
                make_result(
                    "WalkerRandParams-oyster", "maml-trpo", seed, [[1.0, 3.0]], env_steps=4800
                ),
                env_steps_taken=steps,
            ),
        )
        for seed, (name, steps) in enumerate(taken.items())
    ]
    page = results_markdown(tmp_path, runs, [])
    rows = {line.split(" | ")[-2]: line.split(" | ")[3] for line in page.splitlines()
            if line.startswith("| WalkerRandParams-oyster | maml-trpo |")}  # fmt: skip
    assert rows == {"`fell`": "4,800 (1,234 taken)", "`full`": "4,800", "`uncounted`": "4,800"}
