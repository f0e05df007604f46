"""``metabench bench``: planning a grid, isolating failing cells, skipping finished ones."""

import dataclasses
import json
import shlex
import sys

import pytest

from metabench.cli import main
from metabench.errors import RunError
from metabench.harness.executors import LocalExecutor
from metabench.harness.grid import plan, run_grid
from metabench.harness.report import make_console


def test_plan_is_the_product_of_benchmarks_algorithms_and_seeds(tmp_path):
    cells = plan(["Bandit", "PointGoal"], ["rl2-ppo", "nop"], [0, 1, 2], "quick", tmp_path)
    assert len(cells) == 12 and len({cell.out for cell in cells}) == 12
    rl2 = next(c for c in cells if c.algorithm == "rl2-ppo")
    assert (
        rl2.steps == 1_000_000 and rl2.out == tmp_path / rl2.benchmark / f"rl2-ppo-seed{rl2.seed}"
    )
    maml = plan(["PointGoal"], ["maml-trpo"], [0], "quick", tmp_path)[0]
    assert ("meta_batch_size", 10) in maml.overrides
    assert "--set" in maml.command() and "meta_batch_size=10" in maml.command()
    for bad in (lambda: plan(["Nope"], ["nop"], [0], "quick", tmp_path),
                lambda: plan(["Bandit"], ["nope"], [0], "quick", tmp_path)):  # fmt: skip
        with pytest.raises(KeyError, match="choose one of"):
            bad()
    with pytest.raises(KeyError, match=r"nop.toml has no profile 'huge'; its profiles: quick"):
        plan(["Bandit"], ["nop"], [0], "huge", tmp_path)


def test_failing_cell_is_recorded_others_finish_and_reruns_skip(tmp_path):
    # MAML-TRPO cannot run on the bandit's discrete actions: that cell fails, NOP's succeeds
    cells = plan(["Bandit"], ["nop", "maml-trpo"], [0], "quick", tmp_path)
    outcome = run_grid(cells, LocalExecutor(2), make_console())
    nop, maml = cells
    assert outcome[nop] is None and (nop.out / "result.json").exists()
    assert "continuous (Box) actions" in outcome[maml]
    error = json.loads((maml.out / "error.json").read_text())
    assert error["exit_code"] == 1 and "maml-trpo" in error["command"]
    # a command a plain shell runs: the Python of the run, `-m metabench`, every word quoted
    assert shlex.split(error["command"])[:4] == [sys.executable, "-m", "metabench", "train"]
    finished_at = (nop.out / "result.json").stat().st_mtime_ns
    again = run_grid(cells, LocalExecutor(1), make_console())
    assert (nop.out / "result.json").stat().st_mtime_ns == finished_at  # skipped, not re-run
    assert again[maml] is not None


def test_bench_command_writes_tables_and_exits_non_zero_on_failures(tmp_path, capsys):
    args = ["bench", "--benchmarks", "Bandit", "--algorithms", "nop", "--seeds", "0", "1",
            "--results", str(tmp_path), "--cores", "2"]  # fmt: skip
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "Bandit" in out and "nop" in out
    assert "| Bandit | nop | 1 |" in (tmp_path / "README.md").read_text()
    assert main([*args[:4], "maml-trpo", *args[5:]]) == 1
    assert "some cells failed" in capsys.readouterr().err


def test_a_corrupt_result_is_reported_set_aside_and_the_cell_re_run(tmp_path, capsys):
    cells = plan(["Bandit"], ["nop"], [0, 1], "quick", tmp_path)
    run_grid(cells, LocalExecutor(2), make_console())
    damaged, intact = cells
    good = json.loads((damaged.out / "result.json").read_text())
    (damaged.out / "result.json").write_text('{"config": {"benchmark": "Ban')  # truncated
    intact_mtime = (intact.out / "result.json").stat().st_mtime_ns
    outcome = run_grid(cells, LocalExecutor(1), make_console())
    assert outcome == {damaged: None, intact: None}
    assert "Bandit nop seed 0: corrupt result.json set aside" in capsys.readouterr().out
    redone = json.loads((damaged.out / "result.json").read_text())
    assert redone["metatest"] == good["metatest"]  # the same run, finished again
    assert (damaged.out / "result.json.corrupt").read_text().startswith('{"config"')
    assert (intact.out / "result.json").stat().st_mtime_ns == intact_mtime


def test_bench_into_an_unwritable_results_folder_is_a_one_line_error(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    args = [
        "bench",
        "--benchmarks",
        "Bandit",
        "--algorithms",
        "nop",
        "--results",
        str(blocker / "x"),
    ]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert (
        err.startswith(f"metabench: error: cannot write to {blocker / 'x'}") and "--results" in err
    )
    assert err.count("\n") == 1


def test_a_finished_cell_of_other_settings_stops_the_grid_and_a_larger_budget_extends_it(
    tmp_path,
):
    """A spec file changed since the grid ran: its finished cells are not passed off as the new
    settings' (``train`` refuses such a directory too); a larger --steps extends them."""
    (planned,) = plan(["Bandit"], ["rl2-ppo"], [0], "quick", tmp_path)
    cell = dataclasses.replace(planned, steps=300)  # two iterations
    run_grid([cell], LocalExecutor(1), make_console())
    finished_at = (cell.out / "result.json").stat().st_mtime_ns
    changed = dataclasses.replace(cell, overrides=(*cell.overrides, ("n_epochs", 1)))
    with pytest.raises(RunError, match=r"holds a result of other settings .*differs in: hyperpa"):
        run_grid([changed], LocalExecutor(1), make_console())
    assert (cell.out / "result.json").stat().st_mtime_ns == finished_at
    longer = dataclasses.replace(cell, steps=cell.steps * 2)
    assert run_grid([longer], LocalExecutor(1), make_console()) == {longer: None}
    result = json.loads((cell.out / "result.json").read_text())
    assert result["config"]["env_steps_budget"] == cell.steps * 2
    assert len(list(cell.out.glob("result-*-steps.json"))) == 1  # the shorter run, set aside
