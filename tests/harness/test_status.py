"""``metabench status``: a run's state, progress and latest meta-test, read from its files."""

import json
import os
import shutil
import signal
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from metabench.analysis.formatting import format_steps
from metabench.cli import main
from metabench.errors import RunError
from metabench.harness.hooks import StopOnInterrupt
from metabench.harness.report import status_table
from metabench.harness.run import RunDirectory, RunSettings
from metabench.harness.schedule import MetaTestSchedule
from metabench.harness.status import find_runs, run_status
from metabench.harness.training import train

# Bandit with RL2-PPO's preset: 64 trials of 3 one-pull episodes per iteration.
STEPS_PER_ITERATION = 64 * 3


def settings(out: Path) -> RunSettings:
    """Four iterations, checkpointed and meta-tested after each."""
    return RunSettings(
        "Bandit", "rl2-ppo", seed=0, env_steps=4 * STEPS_PER_ITERATION, out=out,
        eval_schedule=MetaTestSchedule(1), checkpoint_every=1,
    )  # fmt: skip


@pytest.fixture
def stopped_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A run stopped by Ctrl-C after its second iteration of four."""
    after_iteration = StopOnInterrupt.after_iteration

    def ctrl_c_at_2(self: StopOnInterrupt, trainer: Any, iteration: int, stats: Any) -> bool:
        if iteration == 2:
            signal.raise_signal(signal.SIGINT)  # the first Ctrl-C asks to stop after it
        return after_iteration(self, trainer, iteration, stats)

    monkeypatch.setattr(StopOnInterrupt, "after_iteration", ctrl_c_at_2)
    out = tmp_path / "runs" / "bandit"
    with pytest.raises(KeyboardInterrupt):
        train(settings(out))
    monkeypatch.undo()
    return out


def periodic_return(out: Path, iteration: int) -> float:
    record = json.loads((out / "evaluations" / f"iteration-{iteration:06d}.json").read_text())
    return record["aggregate"]["test_return"]


def test_a_stopped_run_says_how_far_it_is_and_its_latest_meta_test(stopped_run):
    checkpoint = torch.load(stopped_run / "checkpoint.pt", weights_only=True)
    assert (checkpoint["n_iterations"], checkpoint["env_steps"]) == (4, 2 * STEPS_PER_ITERATION)
    status = run_status(stopped_run)
    assert (status.benchmark, status.algorithm, status.seed) == ("Bandit", "rl2-ppo", 0)
    assert status.state == "stopped" and status.holder is None
    assert (status.iteration, status.n_iterations) == (2, 4)
    assert status.env_steps == 2 * STEPS_PER_ITERATION
    assert status.env_steps_budget == status.planned_env_steps == 4 * STEPS_PER_ITERATION
    assert status.wall_time_s == checkpoint["wall_time"]
    assert status.time_left_s == pytest.approx(checkpoint["wall_time"] / 2 * 2)
    assert status.metatest is not None and not status.final
    assert status.metatest.env_steps == 2 * STEPS_PER_ITERATION
    assert status.metatest.test_return == periodic_return(stopped_run, 2)


def test_a_run_whose_lock_is_held_is_running_and_the_probe_leaves_it_free(stopped_run):
    with RunDirectory(stopped_run).locked():  # as the process training it holds it
        status = run_status(stopped_run)
        assert status.state == "running" and status.holder == f"pid {os.getpid()}"
        assert status.time_left_s is not None
    assert run_status(stopped_run).state == "stopped"
    result = train(settings(stopped_run))  # the probe left no lock behind: the run resumes
    finished = run_status(stopped_run)
    assert finished.state == "finished" and finished.final and finished.time_left_s is None
    assert (finished.iteration, finished.n_iterations) == (4, 4)
    assert finished.metatest is not None
    assert finished.metatest.test_return == result.metatest.test_return
    assert finished.wall_time_s == result.wall_time_s


def test_a_checkpoint_without_the_run_length_takes_it_from_the_meta_tests(stopped_run):
    """A checkpoint written before checkpoints recorded ``n_iterations`` and ``env_steps`` (the
    runs going when they were added): the periodic meta-tests give the steps per iteration."""
    path = stopped_run / "checkpoint.pt"
    checkpoint = torch.load(path, weights_only=True)
    older = {k: v for k, v in checkpoint.items() if k not in ("n_iterations", "env_steps")}
    torch.save(older, path)
    status = run_status(stopped_run)
    assert (status.iteration, status.n_iterations) == (2, 4)
    assert status.env_steps == 2 * STEPS_PER_ITERATION
    for evaluation in (stopped_run / "evaluations").iterdir():
        evaluation.unlink()
    unknown = run_status(stopped_run)
    assert (unknown.iteration, unknown.n_iterations, unknown.env_steps) == (2, None, None)
    assert unknown.metatest is None and unknown.time_left_s is None


def with_test_successes(record: dict[str, Any], succeeds: list[bool]) -> dict[str, Any]:
    """``record`` whose task ``i``'s one test episode succeeds (at its step 1) where
    ``succeeds[i]``, its exploration episodes failing; its aggregate left as it was."""
    for task, ok in zip(record["tasks"], succeeds, strict=True):
        explore = [False] * task["exploration_episodes"]
        task["episode_successes"] = [*explore, ok]
        task["episode_success_steps"] = [None] * len(explore) + [1 if ok else None]
        task["episode_returns_to_success"] = task["episode_returns"]
    return record


def test_the_success_shown_is_the_one_the_tables_report(stopped_run):
    """The fraction of the test episodes that succeeded, counted from the episodes the record
    holds (as ``metabench table`` counts it), whatever its stored aggregate says."""
    path = stopped_run / "evaluations" / "iteration-000002.json"
    record = json.loads(path.read_text())
    succeeds = [index % 4 == 0 for index in range(len(record["tasks"]))]
    record = with_test_successes(record, succeeds)
    record["aggregate"]["test_episode_success_rate"] = 0.9
    path.write_text(json.dumps(record))
    assert run_status(stopped_run).metatest.success == pytest.approx(np.mean(succeeds))


def test_failed_and_not_started_runs(stopped_run, tmp_path):
    (stopped_run / "error.json").write_text("{}")
    assert run_status(stopped_run).state == "failed"
    fresh = tmp_path / "runs" / "fresh"
    fresh.mkdir()
    shutil.copy(stopped_run / "config.json", fresh)
    status = run_status(fresh)
    assert status.state == "not started" and status.iteration == 0 and status.metatest is None


def test_find_runs_takes_a_run_or_a_folder_of_runs(stopped_run, tmp_path):
    other = tmp_path / "runs" / "deeper" / "other"
    other.mkdir(parents=True)
    shutil.copy(stopped_run / "config.json", other)
    assert find_runs(stopped_run) == [stopped_run]
    assert find_runs(tmp_path) == [stopped_run, other]
    with pytest.raises(RunError, match="no run directory"):
        find_runs(stopped_run / "evaluations")
    with pytest.raises(RunError, match="does not exist"):
        find_runs(tmp_path / "missing")


def test_cli_prints_a_row_per_run(stopped_run, tmp_path, capsys):
    assert main(["status", str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    assert "bandit" in out and "stopped" in out and "50%" in out
    assert f"at {2 * STEPS_PER_ITERATION} steps" in out
    assert main(["status", str(tmp_path / "nothing")]) == 1
    assert capsys.readouterr().err.count("\n") == 1


def test_the_best_periodic_meta_test_is_the_first_of_highest_success(stopped_run):
    paths = [stopped_run / "evaluations" / f"iteration-{i:06d}.json" for i in (1, 2)]
    records = [json.loads(path.read_text()) for path in paths]
    rates = [record["aggregate"]["test_episode_success_rate"] for record in records]
    best = run_status(stopped_run).best
    assert best is not None and best.success == max(rates)
    assert best.env_steps == (1 + rates.index(max(rates))) * STEPS_PER_ITERATION

    # half the tasks succeed in both: the first one is best. In Meta-World's count with two
    # sub-envs per round (Bandit's tasks are one class), the episodes all end at step 1 and the
    # first sub-env's takes the round's place: the first meta-test's successes (even tasks)
    # count, the second's (odd tasks) do not
    for first, (path, record) in enumerate(zip(paths, records, strict=True)):
        succeeds = [index % 2 == first for index in range(len(record["tasks"]))]
        record = {**with_test_successes(record, succeeds), "metaworld_envs_per_class": 2}
        path.write_text(json.dumps(record))
    best = run_status(stopped_run).best
    assert best is not None and best.success == 0.5 and best.env_steps == STEPS_PER_ITERATION
    assert best.metaworld_success == pytest.approx(1.0)
    assert best.test_return == periodic_return(stopped_run, 1)
    column = status_table([run_status(stopped_run)], stopped_run).columns[-1]
    assert column.header == "best during training"
    assert list(column.cells) == [
        f"success 0.50 at {STEPS_PER_ITERATION} steps (Meta-World's count 1.00)"
    ]

    for path, record in zip(paths, records, strict=True):  # a benchmark without success
        for task in record["tasks"]:
            task.update(episode_successes=None, episode_success_steps=None)
        path.write_text(json.dumps(record))
    assert run_status(stopped_run).best is None


@pytest.mark.parametrize(
    ("steps", "text"), [(20_000_000, "2e7"), (9_200_000, "9.2e6"), (52_000, "52,000")]
)
def test_steps_are_written_as_budgets_are(steps, text):
    assert format_steps(steps) == text


def test_cli_shows_the_readable_runs_and_names_a_damaged_one(stopped_run, tmp_path, capsys):
    damaged = tmp_path / "runs" / "damaged"
    shutil.copytree(stopped_run, damaged)
    checkpoint = damaged / "checkpoint.pt"
    checkpoint.write_bytes(checkpoint.read_bytes()[:100])
    assert main(["status", str(tmp_path / "runs")]) == 1
    captured = capsys.readouterr()
    assert "bandit" in captured.out and "stopped" in captured.out
    assert f"checkpoint {checkpoint} is corrupt" in captured.err
    assert "1 run directory could not be read" in captured.err


def test_unfinished_lists_only_the_runs_without_a_result_and_how_to_resume_them(
    stopped_run, tmp_path, capsys
):
    finished = tmp_path / "runs" / "nop-run"
    train(RunSettings("Bandit", "nop", seed=0, env_steps=1, out=finished))
    command = "metabench train --benchmark Bandit --out 'runs/a b'"
    path = stopped_run / "checkpoint.pt"
    torch.save({**torch.load(path, weights_only=True), "command": command}, path)
    assert run_status(stopped_run).command == command

    assert main(["status", "--unfinished", str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    assert "bandit" in out and "nop-run" not in out
    assert f"to resume {stopped_run}: {command}" in out.splitlines()
    assert main(["status", str(tmp_path / "runs")]) == 0
    assert "nop-run" in capsys.readouterr().out
    assert main(["status", "--unfinished", str(finished)]) == 0
    assert capsys.readouterr().out.strip() == f"every run under {finished} has finished"


def test_the_console_off_a_terminal_is_120_columns_wide_unless_columns_says_otherwise(
    monkeypatch,
):
    """Pytest's captured stdout is not a terminal, as a pipe is not."""
    from metabench.harness.report import make_console

    monkeypatch.delenv("COLUMNS", raising=False)
    assert make_console().width == 120
    monkeypatch.setenv("COLUMNS", "200")
    assert make_console().width == 200
    monkeypatch.setenv("COLUMNS", "wide")  # not a number: rich would ignore it too
    assert make_console().width == 120
