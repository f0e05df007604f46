"""When a run meta-tests during training: every N iterations, or every S environment steps."""

import json
from dataclasses import replace

import pytest

from metabench.cli import build_parser, main
from metabench.harness.executors import LocalExecutor
from metabench.harness.grid import plan, run_grid
from metabench.harness.report import make_console
from metabench.harness.schedule import MetaTestSchedule


def crossings(n_iterations: int, steps_per_iteration: int, interval: int) -> list[int]:
    """The first iteration whose env steps reach each multiple of ``interval``, found by walking
    the iterations (an independent check of the schedule's arithmetic)."""
    due, threshold, steps = [], interval, 0
    for iteration in range(1, n_iterations + 1):
        steps += steps_per_iteration
        if steps >= threshold:
            due.append(iteration)
            while threshold <= steps:
                threshold += interval
    return due


@pytest.mark.parametrize(
    ("steps_per_iteration", "interval"),
    [(300, 1000), (300, 300), (100_000, 1_000_000), (500, 120), (7, 50), (1000, 999)],
)
def test_an_env_step_interval_meta_tests_after_the_first_iteration_past_each_multiple(
    steps_per_iteration, interval
):
    schedule = MetaTestSchedule(env_steps=interval)
    due = [i for i in range(1, 41) if schedule.due(i, steps_per_iteration)]
    assert due == crossings(40, steps_per_iteration, interval)
    assert schedule.count(40, steps_per_iteration) == len(due)


def test_an_interval_of_whole_iterations_is_the_same_as_every_n_iterations():
    # ML10 RL2's 1e5 steps per iteration: every 1e6 steps is every 10 iterations
    by_steps, by_iterations = MetaTestSchedule(env_steps=1_000_000), MetaTestSchedule(10)
    assert [i for i in range(1, 201) if by_steps.due(i, 100_000)] == list(range(10, 201, 10))
    assert all(by_iterations.due(i, 100_000) == by_steps.due(i, 100_000) for i in range(1, 201))
    assert by_iterations.count(200, 100_000) == 20
    assert not MetaTestSchedule() and MetaTestSchedule().count(200, 100_000) == 0


def test_a_schedule_is_one_interval_of_at_least_zero():
    with pytest.raises(ValueError, match="not both"):
        MetaTestSchedule(iterations=2, env_steps=1000)
    with pytest.raises(ValueError, match=">= 0"):
        MetaTestSchedule(env_steps=-1)


@pytest.mark.parametrize(
    "schedule", [MetaTestSchedule(), MetaTestSchedule(3), MetaTestSchedule(env_steps=5000)]
)
def test_a_schedule_round_trips_through_the_train_options(schedule):
    args = build_parser().parse_args(
        ["train", "--benchmark", "Bandit", "--algorithm", "nop", *schedule.options()]
    )
    assert MetaTestSchedule(args.eval_every, args.eval_every_steps) == schedule


@pytest.mark.parametrize(
    "options",
    [["--eval-every", "2", "--eval-every-steps", "1000"], ["--eval-every", "-1"],
     ["--eval-every-steps", "-5"]],
)  # fmt: skip
def test_train_refuses_two_intervals_or_a_negative_one(tmp_path, capsys, options):
    args = ["train", "--benchmark", "Bandit", "--algorithm", "nop", "--out", str(tmp_path / "r")]
    with pytest.raises(SystemExit) as exit_info:
        main([*args, *options])
    assert exit_info.value.code == 2
    assert "--eval-every" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_a_grid_meta_tests_each_cell_every_s_env_steps(tmp_path):
    """bench --eval-every-steps reaches each cell's metabench train: with 192 steps per
    iteration (rl2-ppo on the bandit), every 300 steps is after iterations 2 (384) and 4 (768)
    of 4."""
    (cell,) = plan(["Bandit"], ["rl2-ppo"], [0], "quick", tmp_path, eval_every_steps=300)
    assert cell.command()[-2:] == ["--eval-every-steps", "300"]
    small = replace(cell, steps=4 * 192)
    assert run_grid([small], LocalExecutor(2), make_console())[small] is None
    files = sorted((cell.out / "evaluations").iterdir())
    assert [f.name for f in files] == ["iteration-000002.json", "iteration-000004.json"]
    assert [json.loads(f.read_text())["env_steps"] for f in files] == [384, 768]
