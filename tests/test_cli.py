"""The ``metabench`` command: demo output and argument errors."""

import re

import pytest

from metabench.cli import COMMANDS, main
from metabench.demo import run_demo
from metabench.tasks.family import sampling_task_envs


@pytest.mark.mujoco
def test_demo_runs_one_trial_per_task_and_prints_the_table(capsys):
    assert main(["demo", "--no-metaworld", "--tasks", "3", "--episodes-per-trial", "2"]) == 0
    out = capsys.readouterr().out
    assert len(re.findall(r"HalfCheetahVel +│ velocity=", out)) == 3
    results = run_demo(n_tasks=2, episodes_per_trial=3, seed=1, metaworld=False)
    # every task env of every family but Meta-World's (ML10 is shown from its test split)
    names = sampling_task_envs()
    assert [r.benchmark for r in results] == [name for name in names for _ in range(2)]
    assert {"AntDir", "HumanoidDir", "WalkerRandParams", "SparsePointRobot"} <= set(names)
    assert not {"ML1", "ML10", "ML45"} & set(names)
    assert all(len(r.returns) == 3 for r in results)
    cheetahs = [r for r in results if r.benchmark == "HalfCheetahVel"]
    assert all(r.steps == 3 * 200 for r in cheetahs)  # default horizon 200
    assert cheetahs[0].task != cheetahs[1].task
    sparse = [r for r in results if r.benchmark == "SparsePointRobot"]
    assert all(r.successes is not None for r in sparse)  # its env reports success
    assert all(r.successes is None for r in cheetahs)


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
        (
            ["bench", "--algorithms", "nope"],
            "argument --algorithms: unknown algorithm 'nope' (did you mean 'nop'?); choose one",
        ),
        (["bench", "--cores", "0"], "argument --cores: expected a positive integer, got 0"),
        (["plan", "--cores", "0"], "argument --cores: expected a positive integer, got 0"),
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
        (["bench", "--cpus", "2"], "--cpus 2"),
        (["plan", "--cpus", "2"], "--cpus 2"),
        # argparse takes an unambiguous prefix of an option for the option, so --algo is
        # --algorithm (as in the commands recorded in results/), without a warning
        (["train", "--benchmark", "Bandit", "--algo", "nop"], None),
    ],
)
def test_the_old_option_spellings_are_not_options(args, unrecognized, capsys):
    """``bench --envs/--baselines``, ``bench/plan --workers`` and ``--cpus`` and ``train --algo``
    were the old spellings of ``--benchmarks``, ``--algorithms``, ``--cores`` and
    ``--algorithm``."""
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
    from metabench.errors import RunError

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


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["train", "--benchmark", "PointGoal", "--algorithm", "tippo"], "--algorithm"),
        (["bench", "--algorithms", "nop", "tippo"], "--algorithms"),
        (["plan", "--algorithms", "tippo"], "--algorithms"),
    ],
)
def test_an_unknown_algorithm_names_the_algorithms_and_metabench_specs(
    args, option, capsys, monkeypatch, tmp_path
):
    """A plug-in's author who forgot ``METABENCH_SPECS`` got argparse's "invalid choice"."""
    from metabench.harness.algorithms import load_algorithms

    monkeypatch.delenv("METABENCH_SPECS", raising=False)
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert f"error: argument {option}: unknown algorithm 'tippo'; choose one of: " in line
    assert f"choose one of: {', '.join(sorted(load_algorithms()))}; " in line
    assert "tippo.toml, in <folder>/baselines/ with METABENCH_SPECS=<folder>" in line
    assert "(METABENCH_SPECS is not set; see docs/own-algorithm.md)" in line
    (tmp_path / "baselines").mkdir()  # set, but without the file
    monkeypatch.setenv("METABENCH_SPECS", str(tmp_path))
    with pytest.raises(SystemExit):
        main(args)
    assert f"METABENCH_SPECS={tmp_path} holds no baselines/tippo.toml" in capsys.readouterr().err


def test_an_unknown_benchmark_says_where_a_benchmark_of_ones_own_is_found(capsys, monkeypatch):
    monkeypatch.delenv("METABENCH_SPECS", raising=False)
    with pytest.raises(SystemExit):
        main(["train", "--benchmark", "Pointgoal", "--algorithm", "nop"])
    (line,) = capsys.readouterr().err.splitlines()
    assert "argument --benchmark: unknown benchmark 'Pointgoal' (did you mean 'PointGoal'?)" in line
    assert "Pointgoal.toml, in <folder>/envs/ with METABENCH_SPECS=<folder>" in line


def test_the_python_api_names_metabench_specs_for_an_unknown_algorithm(monkeypatch):
    from metabench.harness.algorithms import get_algorithm

    monkeypatch.delenv("METABENCH_SPECS", raising=False)
    with pytest.raises(KeyError, match=r"METABENCH_SPECS is not set; see docs/own-algorithm\.md"):
        get_algorithm("tippo")


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["train", "--benchmark", "Bandit", "--algorithm", "nop", "--seed"], "--seed"),
        (["demo", "--seed"], "--seed"),
        (["bench", "--seeds", "0"], "--seeds"),
        (["plan", "--seeds", "0"], "--seeds"),
    ],
)
def test_a_seed_beyond_32_bits_is_refused_naming_the_option_and_the_range(
    args, option, capsys, tmp_path
):
    from metabench.cli import build_parser

    # where a regression would take the seed: the smallest run, written under tmp_path
    places = {
        "train": ["--out", str(tmp_path / "run")],
        "bench": ["--results", str(tmp_path)],
        "plan": ["--calibration", str(tmp_path / "calibration.json")],
        "demo": ["--no-metaworld", "--tasks", "1", "--episodes-per-trial", "1"],
    }
    if args[0] in ("bench", "plan"):
        places[args[0]] += ["--benchmarks", "Bandit", "--algorithms", "nop"]
    args = [*args[:1], *places[args[0]], *args[1:]]
    largest = 2**32 - 1
    parsed = build_parser().parse_args([*args, str(largest)])
    assert largest in (parsed.seeds if option == "--seeds" else [parsed.seed])
    for value in (str(2**32), "-1"):
        with pytest.raises(SystemExit) as exit_info:
            main([*args, value])
        assert exit_info.value.code == 2
        assert capsys.readouterr().err.splitlines() == [
            f"metabench {args[0]}: error: argument {option}: expected an integer from 0 to "
            f"2**32 - 1 ({largest}), got '{value}' (see metabench {args[0]} --help)"
        ]


def test_train_help_lists_the_algorithms_once_without_their_descriptions(capsys):
    """The descriptions (``metabench list``'s) made ``--algorithm``'s help a wall, one of them
    twice ("multitask: multitask: ...")."""
    from metabench.harness.algorithms import load_algorithms

    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    algorithms = load_algorithms()
    assert f"the algorithm, one of: {', '.join(sorted(algorithms))}; " in text
    for entry in algorithms.values():
        assert " ".join(entry.description.split())[:40] not in text
    assert "metabench list says what each benchmark and algorithm is" in text
