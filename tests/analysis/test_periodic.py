"""Each run's best meta-test during training, checked against the maxima of hand-made periodic
meta-tests."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from metabench.analysis.periodic import (
    best_during_training,
    best_during_training_markdown,
    periodic_metatests,
)
from metabench.analysis.tables import results_markdown
from metabench.records import EvaluationRecord, RunResult
from tests.factories import make_result

EPISODES = 4
"""Per task: 2 exploration episodes, then 2 test episodes."""


def successes(rate: float, n_tasks: int = 5) -> list[list[bool]]:
    """Per task, exploration episodes that fail and test episodes of which ``rate`` succeed
    overall (``rate`` a multiple of 1 / (2 * n_tasks))."""
    n_success = round(rate * 2 * n_tasks)
    flags = [i < n_success for i in range(2 * n_tasks)]
    return [[False, False, *flags[2 * t : 2 * t + 2]] for t in range(n_tasks)]


def write_run(
    root: Path,
    name: str,
    seed: int,
    rates: list[float] | None,
    final: float = 0.0,
    counted: list[bool] | None = None,
    benchmark: str = "ML10",
) -> tuple[Path, RunResult]:
    """A run folder with a meta-test every 100 steps at the success ``rates`` (those
    ``counted`` also record Meta-World's count, with one sub-env per class: each task its own
    round, so the count is the fraction of test episodes that succeed); ``None``: meta-tests
    without success."""
    folder = root / name
    (folder / "evaluations").mkdir(parents=True)
    returns = [[0.0] * EPISODES] * 5
    for k, rate in enumerate(rates or [], start=1):
        envs = 1 if counted is not None and counted[k - 1] else None
        periodic = make_result(
            benchmark,
            "rl2",
            seed,
            returns,
            successes=successes(rate),
            metaworld_envs_per_class=envs,
        )
        record = EvaluationRecord(periodic.metatest, iteration=k, env_steps=100 * k).to_json()
        (folder / "evaluations" / f"iteration-{k:06d}.json").write_text(json.dumps(record))
    result = make_result(benchmark, "rl2", seed, returns, successes=successes(final))
    (folder / "result.json").write_text(json.dumps(result.to_json()))
    return folder / "result.json", result


def test_each_seed_keeps_its_highest_periodic_success_and_where_it_was_reached(
    tmp_path: Path,
) -> None:
    rates = {0: [0.1, 0.4, 0.2, 0.4], 1: [0.3, 0.0, 0.1]}
    runs = [
        write_run(tmp_path, "s0", 0, rates[0], final=0.2, counted=[True] * 4),
        write_run(tmp_path, "s1", 1, rates[1], final=0.1, counted=[True] * 3),
    ]
    # a meta-test's success is the fraction of its test episodes that succeeded
    success = periodic_metatests(runs[0][0])[1].metatest.success
    assert success is not None and success.episode_rate == pytest.approx(0.4)

    [best] = best_during_training(runs)
    assert (best.benchmark, best.algorithm, best.seeds) == ("ML10", "rl2", (0, 1))
    assert best.best_success == pytest.approx((max(rates[0]), max(rates[1])))
    assert best.best_at == (200, 100)  # the first meta-test that reached the maximum
    assert best.n_metatests == (4, 3) and best.n_tasks == (5,)
    assert best.best_metaworld_success == pytest.approx((0.4, 0.3))  # its own maximum
    assert best.final_success == pytest.approx((0.2, 0.1))
    assert best.best().mean == pytest.approx(np.mean([0.4, 0.3]))
    assert best.best().low <= 0.3 + 1e-9 and best.best().high >= 0.4 - 1e-9


def test_runs_without_periodic_success_are_left_out_and_a_missing_count_shows_none(
    tmp_path: Path,
) -> None:
    runs = [
        write_run(tmp_path, "a", 0, [0.2, 0.3], counted=[True, False]),
        write_run(tmp_path, "b", 0, None, benchmark="ML1-push"),  # no periodic meta-test
    ]
    [best] = best_during_training(runs)
    assert best.benchmark == "ML10" and best.best_success == pytest.approx((0.3,))
    assert best.best_metaworld_success is None and best.best_metaworld() is None
    assert best_during_training([runs[1]]) == []
    assert best_during_training_markdown([]) == ""


def test_the_table_sets_the_mean_of_the_bests_beside_the_published_figures(
    tmp_path: Path,
) -> None:
    runs = [
        write_run(tmp_path, "s0", 0, [0.1, 0.5], final=0.3),
        write_run(tmp_path, "s1", 1, [0.3, 0.2], final=0.2),
    ]
    text = best_during_training_markdown(best_during_training(runs))
    [row] = [line for line in text.splitlines() if line.startswith("| rl2 |")]
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[:3] == ["rl2", "2", "2, 2 (5)"]
    assert cells[3] == "0.50 (200); 0.30 (100)"
    assert cells[4].startswith(f"{np.mean([0.5, 0.3]):.3f} [")
    assert cells[5] == "0.30; 0.20"
    assert "Published: rl2-ppo 0.358" in text and "maml-trpo 0.316" in text

    page = results_markdown(tmp_path, runs, [])
    assert "## Best meta-test during training" in page and row in page
    bare = [write_run(tmp_path / "bare", "s0", 0, None)]
    assert "Best meta-test during training" not in results_markdown(tmp_path, bare, [])
