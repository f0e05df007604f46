"""The ``metabench`` command: demo output and argument errors."""

import pytest

from metabench.cli import COMMANDS, main
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


def test_bench_and_train_options_and_their_defaults():
    from metabench.cli import build_parser

    parser = build_parser()
    new = parser.parse_args(["bench", "--benchmarks", "Bandit", "--algorithms", "nop", "cem"])
    assert (new.benchmarks, new.algorithms) == (["Bandit"], ["nop", "cem"])
    default = parser.parse_args(["bench"])
    assert default.benchmarks == ["HalfCheetahVel"]
    assert default.algorithms == ["rl2-ppo", "maml-trpo", "cem", "nop"]
    assert parser.parse_args(["train", "--benchmark", "Bandit", "--algorithm", "cem"]).algorithm


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["train", "--benchmark", "Bandit"], "the following arguments are required: --algorithm"),
        (["bench", "--algorithms", "nope"], "invalid choice: 'nope'"),
        (["bench", "--cpus", "0"], "argument --cpus: expected a positive integer, got 0"),
        (["plan", "--cpus", "0"], "argument --cpus: expected a positive integer, got 0"),
        (
            ["evaluate", "r", "--test-tasks", "last"],
            "argument --test-tasks: expected a positive integer or 'periodic', got 'last'",
        ),
        (
            ["evaluate", "r", "--test-tasks", "0"],
            "argument --test-tasks: expected a positive integer or 'periodic', got '0'",
        ),
    ],
)
def test_option_errors_name_the_option(args, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err.splitlines()[-1]


@pytest.mark.parametrize(
    ("args", "unrecognized"),
    [
        (["bench", "--envs", "Bandit"], "--envs Bandit"),
        (["bench", "--baselines", "nop"], "--baselines nop"),
        (["bench", "--workers", "2"], "--workers 2"),
        (["plan", "--workers", "2"], "--workers 2"),
        # argparse takes an unambiguous prefix of an option for the option, so --algo is
        # --algorithm (as in the commands recorded in results/), without a warning
        (["train", "--benchmark", "Bandit", "--algo", "nop"], None),
    ],
)
def test_the_old_option_spellings_are_not_options(args, unrecognized, capsys):
    """``bench --envs/--baselines``, ``bench/plan --workers`` and ``train --algo`` were the old
    spellings of ``--benchmarks``, ``--algorithms``, ``--cpus`` and ``--algorithm``."""
    from metabench.cli import build_parser

    parser = build_parser()
    if unrecognized is None:
        assert parser.parse_args(args).algorithm == "nop"
        assert capsys.readouterr().err == ""
        return
    with pytest.raises(SystemExit) as exit_info:
        parser.parse_args(args)
    assert exit_info.value.code == 2
    assert f"error: unrecognized arguments: {unrecognized} " in capsys.readouterr().err


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_help_shows_each_default_once_and_no_formatting_artefacts(command, capsys):
    """No ``%%`` (argparse formats help strings, not descriptions), no ``(default: None)`` or
    Python list for a required option, an empty list or a help that already names its default."""
    import re

    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "%%" not in text
    assert "(default: None)" not in text and "(default: [" not in text
    assert "(default: False)" not in text
    assert not re.search(r"default:[^)]*\)\s*\(default:", text)
    if command == "bench":
        assert "(default: rl2-ppo maml-trpo cem nop)" in text
        assert "seeds (a seed given twice runs once) (default: 0)" in text
    if command == "plot":
        assert "with a 95% bootstrap band" in text


def test_cpus_beyond_the_machine_is_refused_with_its_core_count(capsys, monkeypatch):
    import os

    from metabench.cli import build_parser

    monkeypatch.setattr(os, "cpu_count", lambda: 3)
    args = ["train", "--benchmark", "Bandit", "--algorithm", "nop", "--cpus"]
    assert build_parser().parse_args([*args, "3"]).cpus == 3
    with pytest.raises(SystemExit) as exit_info:
        main([*args, "4"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        "metabench train: error: argument --cpus: 4 is more than the 3 cores of this machine: "
        "use at most 3 (see metabench train --help)"
    ]


def test_every_subcommand_has_a_handler():
    from metabench.cli import COMMANDS, build_parser

    parser = build_parser()
    subcommands = next(action.choices for action in parser._actions if action.dest == "command")
    assert set(subcommands) == set(COMMANDS)


def test_main_runs_the_handler_of_the_command_and_turns_its_errors_into_exit_codes(
    monkeypatch, capsys
):
    from metabench.cli import COMMANDS, INTERRUPTED
    from metabench.harness.run import RunError

    seen = []

    def handler(args):
        seen.append(args.results)
        if len(seen) == 2:
            raise RunError("cannot")
        if len(seen) == 3:
            raise KeyboardInterrupt

    monkeypatch.setitem(COMMANDS, "plot", handler)
    assert main(["plot", "--results", "here"]) == 0
    assert main(["plot", "--results", "there"]) == 1
    assert capsys.readouterr().err == "metabench: error: cannot\n"
    assert main(["plot"]) == 130
    assert capsys.readouterr().err == f"metabench: {INTERRUPTED}\n"
    assert [str(path) for path in seen] == ["here", "there", "results"]
