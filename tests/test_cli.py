"""The ``metabench`` command: demo output and argument errors."""

import pytest

from metabench.cli import main
from metabench.demo import run_demo


@pytest.mark.mujoco
def test_demo_runs_one_trial_per_task_and_prints_the_table(capsys):
    assert main(["demo", "--no-metaworld", "--tasks", "3", "--episodes-per-trial", "2"]) == 0
    out = capsys.readouterr().out
    assert out.count("HalfCheetahVel │ velocity=") == 3
    results = run_demo(n_tasks=2, episodes_per_trial=3, seed=1, metaworld=False)
    assert [len(r.returns) for r in results] == [3, 3]
    assert all(r.steps == 3 * 200 for r in results)  # default horizon 200
    assert results[0].task != results[1].task


@pytest.mark.mujoco
def test_demo_same_seed_same_numbers():
    first = run_demo(n_tasks=1, episodes_per_trial=1, seed=3, metaworld=False)
    second = run_demo(n_tasks=1, episodes_per_trial=1, seed=3, metaworld=False)
    assert first[0].returns == second[0].returns and first[0].task == second[0].task


@pytest.mark.parametrize("args", [["demo", "--tasks", "0"], ["demo", "--tasks", "x"], ["nope"]])
def test_bad_arguments_exit_with_a_message(args, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 2
    assert "error:" in capsys.readouterr().err
