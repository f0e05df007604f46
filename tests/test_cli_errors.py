"""Every error a user can provoke is one line and a non-zero exit; Ctrl-C says how to resume."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from metabench.cli import main
from metabench.harness.algorithms import clear_spec_caches
from metabench.harness.run import RunDirectory, RunSettings
from metabench.harness.training import train
from tests.factories import ROOT


def one_error_line(capsys, code: int, args: list[str]) -> str:
    """Run ``metabench args``; check the exit code and that stderr is one ``error:`` line."""
    try:
        returned = main(args)
    except SystemExit as exit_info:
        returned = exit_info.code
    assert returned == code
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "error: " in err[0]
    return err[0]


@pytest.fixture
def results(tmp_path: Path) -> Path:
    """A results folder with one finished NOP run."""
    folder = tmp_path / "results"
    train(RunSettings("Bandit", "nop", 0, 1, folder / "nop"))
    return folder


def test_table_out_that_is_a_file(results, tmp_path, capsys):
    out = tmp_path / "page.md"
    out.write_text("mine")
    capsys.readouterr()
    line = one_error_line(capsys, 1, ["table", "--results", str(results), "--out", str(out)])
    assert f"--out {out} is a file: give a folder" in line
    assert out.read_text() == "mine"


def test_table_on_a_folder_without_results(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    line = one_error_line(capsys, 1, ["table", "--results", str(empty)])
    assert f"no result.json under {empty}: run metabench train or bench first" in line
    assert list(empty.iterdir()) == []


@pytest.mark.parametrize("name", ["README.md", "summary.csv", "plots/adaptation_Bandit.png"])
def test_table_and_plot_never_replace_a_file_of_the_users(results, capsys, name):
    users = results / name
    users.parent.mkdir(exist_ok=True)
    users.write_bytes(b"mine")
    capsys.readouterr()
    line = one_error_line(capsys, 1, ["table", "--results", str(results)])
    assert f"{users} was not written by metabench (or was edited since)" in line
    assert users.read_bytes() == b"mine"
    assert not (results / "README.md").exists() or name == "README.md"  # nothing written
    if name.startswith("plots/"):
        line = one_error_line(capsys, 1, ["plot", "--results", str(results)])
        assert f"{users} was not written by metabench" in line
    users.unlink()
    assert main(["table", "--results", str(results)]) == 0  # its own files it replaces
    assert main(["plot", "--results", str(results)]) == 0
    assert main(["table", "--results", str(results)]) == 0
    page = results / "README.md"
    page.write_text(page.read_text() + "my notes\n")  # edited: no longer only metabench's
    line = one_error_line(capsys, 1, ["table", "--results", str(results)])
    assert f"{page} was not written by metabench (or was edited since)" in line
    assert page.read_text().endswith("my notes\n")


def test_plot_out_that_is_a_file(results, tmp_path, capsys):
    capsys.readouterr()
    out = tmp_path / "a-file"
    out.write_text("")
    line = one_error_line(capsys, 1, ["plot", "--results", str(results), "--out", str(out)])
    assert f"--out {out} is a file" in line


def test_unwritable_tensorboard_folder(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "tensorboard").write_text("in the way")  # as unwritable as a folder can be for root
    args = ["train", "--benchmark", "Bandit", "--algorithm", "rl2-ppo", "--out", str(out)]
    line = one_error_line(capsys, 1, [*args, "--steps", "192"])
    assert f"cannot write to {out / 'tensorboard'}" in line and "--out" in line


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes to read-only folders")
def test_read_only_tensorboard_folder(tmp_path, capsys):
    out = tmp_path / "run"
    (out / "tensorboard").mkdir(parents=True)
    (out / "tensorboard").chmod(0o555)
    args = ["train", "--benchmark", "Bandit", "--algorithm", "rl2-ppo", "--out", str(out)]
    line = one_error_line(capsys, 1, [*args, "--steps", "192"])
    assert "Permission denied" in line


@pytest.mark.parametrize(
    ("text", "message"),
    [("[1, 2]", "is not a JSON object"), ('{"seed": 0}', "lacks benchmark, algorithm")],
)
def test_evaluate_a_config_that_is_not_a_run_configuration(tmp_path, capsys, text, message):
    (tmp_path / "config.json").write_text(text)
    line = one_error_line(capsys, 1, ["evaluate", str(tmp_path)])
    assert f"{tmp_path / 'config.json'} {message}" in line


@pytest.mark.parametrize("command", ["train", "demo"])
def test_negative_seed_names_the_option(tmp_path, capsys, command):
    args = [command, "--seed", "-1"]
    if command == "train":
        args += ["--benchmark", "Bandit", "--algorithm", "nop", "--out", str(tmp_path / "run")]
    line = one_error_line(capsys, 2, args)
    assert "argument --seed: expected an integer from 0 to 2**32 - 1 (4294967295), got '-1'" in line
    assert not (tmp_path / "run").exists()


def test_bench_negative_seed_names_the_option(tmp_path, capsys):
    line = one_error_line(capsys, 2, ["bench", "--seeds", "0", "-1", "--results", str(tmp_path)])
    assert "argument --seeds: expected an integer from 0 to 2**32 - 1" in line


def test_bad_task_values_name_the_spec_file(tmp_path, monkeypatch, capsys):
    spec = tmp_path / "specs" / "envs" / "WidePoint.toml"
    spec.parent.mkdir(parents=True)
    text = (ROOT / "envs" / "PointGoal.toml").read_text()
    spec.write_text(text.replace("goal_range = [-0.5, 0.5]", 'goal_range = "wide"'))
    monkeypatch.setenv("METABENCH_SPECS", str(tmp_path / "specs"))
    clear_spec_caches()
    try:
        args = ["train", "--benchmark", "WidePoint", "--algorithm", "nop"]
        line = one_error_line(capsys, 1, [*args, "--out", str(tmp_path / "run")])
    finally:
        monkeypatch.delenv("METABENCH_SPECS")
        clear_spec_caches()
    number = text.splitlines().index("goal_range = [-0.5, 0.5]") + 1
    assert f"{spec}:{number}: metabench/PointGoal-v0 cannot be made" in line
    assert "goal_range must be two numbers [low, high], got 'wide'" in line


def test_table_skips_result_files_it_cannot_use_and_names_them(results, capsys):
    good = json.loads((results / "nop" / "result.json").read_text())
    config = {key: value for key, value in good["config"].items() if key != "benchmark"}
    tasks = [dict(task) for task in good["metatest"]["tasks"]]
    tasks[0]["episode_returns"] = [*tasks[0]["episode_returns"][:-1], None]  # NaN, as written
    broken = {
        "no-benchmark": {**good, "config": config},
        "null-return": {**good, "metatest": {**good["metatest"], "tasks": tasks}},
    }
    for name, content in broken.items():
        (results / name).mkdir()
        (results / name / "result.json").write_text(json.dumps(content))
    capsys.readouterr()
    assert main(["table", "--results", str(results)]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"metabench: warning: skipped: {results / 'no-benchmark' / 'result.json'} lacks "
        f"benchmark: delete it and re-run",
        f"metabench: warning: skipped {results / 'null-return' / 'result.json'}: "
        f"metatest test return is NaN, not a finite number",
    ]
    page = (results / "README.md").read_text()
    assert "| Bandit | nop | 0 | 0 |" in page and "null-return" not in page
    assert main(["plot", "--results", str(results)]) == 0


def test_ctrl_c_says_how_to_resume_and_exits_130(tmp_path):
    out = tmp_path / "run"
    command = [
        sys.executable, "-m", "metabench.cli", "train", "--benchmark", "Bandit",
        "--algorithm", "rl2-ppo", "--steps", str(1000 * 192), "--out", str(out),
        "--checkpoint-every", "1",
    ]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    run = RunDirectory(out)
    deadline = time.monotonic() + 120
    while not run.checkpoint_path.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == "metabench: interrupted; run the same command to resume"
    assert not run.result_path.exists() and run.load_checkpoint() is not None


def test_ctrl_c_checkpoints_the_iteration_it_stops_at(tmp_path):
    """With checkpoints far apart, the first Ctrl-C still leaves one: the run stops at the end
    of the iteration it is in and writes it, so resuming loses nothing."""
    out = tmp_path / "run"
    command = [
        sys.executable, "-m", "metabench.cli", "train", "--benchmark", "Bandit",
        "--algorithm", "rl2-ppo", "--steps", str(1000 * 192), "--out", str(out),
        "--checkpoint-every", "100000",
    ]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    events = out / "tensorboard" / "metabench"
    deadline = time.monotonic() + 120
    while not any(events.glob("events.*")) and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(2.0)  # a few iterations in
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    assert "stopping after this iteration" in err
    state = RunDirectory(out).load_checkpoint()
    assert state is not None and state["iteration"] >= 1


@pytest.mark.parametrize(
    ("algorithm", "setting", "message", "largest"),
    [
        ("rl2-ppo", "hidden_size=99999999999", "hidden_size must be an integer in [1, 4096], got "
         "99999999999", {"hidden_size": 4096}),
        ("maml-trpo", "hidden_sizes=[64, 4097]", "hidden_sizes must be a list of integers in "
         "[1, 4096], got [64, 4097]", {"hidden_sizes": [64, 4096]}),
        ("pearl", "latent_size=100000", "latent_size must be an integer in [1, 4096], got 100000",
         {"latent_size": 4096}),
        # the counts a batch holds in memory: tasks, episodes, steps, candidates
        ("rl2-ppo", "meta_batch_size=10000000", "meta_batch_size must be an integer in "
         "[1, 1000000], got 10000000", {"meta_batch_size": 1_000_000}),
        ("maml-trpo", "episodes_per_task=2000000", "episodes_per_task must be an integer in "
         "[1, 1000000], got 2000000", {"episodes_per_task": 1_000_000}),
        ("pearl", "replay_buffer_size=100000000", "replay_buffer_size must be an integer in "
         "[1, 10000000], got 100000000", {"replay_buffer_size": 10_000_000}),
    ],
)  # fmt: skip
def test_a_size_beyond_its_bound_is_one_line_naming_it(
    algorithm, setting, message, largest, capsys, tmp_path
):
    """Without a bound, a typo's width or count ran out of memory while the network or the batch
    was built, after the envs, and ended in a traceback. The bound itself is accepted (nothing is
    built here)."""
    from metabench.harness.algorithms import get_algorithm
    from metabench.harness.benchmarks import get_benchmark

    out = tmp_path / "run"
    args = ["train", "--benchmark", "PointGoal", "--algorithm", algorithm, "--steps", "1"]
    line = one_error_line(capsys, 1, [*args, "--set", setting, "--out", str(out)])
    assert line == f"metabench: error: --set: {message}"
    assert not out.exists()
    config = get_algorithm(algorithm).hyperparameters(get_benchmark("PointGoal"), largest)
    assert {key: config[key] for key in largest} == largest


def test_a_seed_beyond_32_bits_is_refused_by_the_python_api_before_any_file(tmp_path):
    """NOP took a seed of 2**32, and other algorithms failed in their generators without
    naming it."""
    out = tmp_path / "run"
    with pytest.raises(ValueError, match=r"^seed must be an integer from 0 to 2\*\*32 - 1 "):
        train(RunSettings("Bandit", "nop", 2**32, 1, out))
    assert not (out / "config.json").exists()
    assert train(RunSettings("Bandit", "nop", 2**32 - 1, 1, out)).config.seed == 2**32 - 1


def test_update_threads_above_the_runs_cores_is_one_line(capsys, tmp_path):
    """``--cpus`` bounds a run's torch threads too: an algorithm's ``update_threads`` above it
    would use cores the run was not given."""
    out = tmp_path / "run"
    args = ["train", "--benchmark", "PointGoal", "--algorithm", "maml-trpo", "--steps", "1",
            "--cpus", "1", "--set", "update_threads=2", "--out", str(out)]  # fmt: skip
    line = one_error_line(capsys, 1, args)
    assert line == (
        "metabench: error: update_threads = 2 (torch threads of the gradient steps) exceeds "
        "--cpus 1, the run's cores: raise --cpus, or lower update_threads"
    )
    assert not out.exists()
