"""A run kept in a git repository: committed mid-way, it resumes from a fresh clone with its
recorded command, to the numbers of a run that was never interrupted."""

import json
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from metabench.cli import main
from metabench.harness import provenance
from metabench.harness.hooks import StopOnInterrupt
from metabench.harness.provenance import portable_path, work_tree_root
from metabench.harness.run import RunDirectory, RunSettings, recorded_command, with_out
from metabench.harness.training import train

ROOT = Path(__file__).resolve().parents[2]
METABENCH = Path(sys.executable).with_name("metabench")
"""The console script of the environment running the tests, as a plain shell finds it."""

# Bandit with RL2-PPO's preset: 64 trials of 3 one-pull episodes per iteration
STEPS_PER_ITERATION = 64 * 3
ITERATIONS = 40


def test_out_is_recorded_relative_to_the_work_tree_that_holds_it(tmp_path):
    repository = tmp_path / "repo"
    (repository / ".git").mkdir(parents=True)
    run = repository / "results" / "ML10" / "run"
    assert work_tree_root(run) == repository and work_tree_root(tmp_path / "x" / "run") is None
    assert portable_path(run, repository) == "results/ML10/run"
    outside = tmp_path / "elsewhere" / "run"
    assert portable_path(outside, repository) == str(outside)
    assert portable_path(outside, None) == str(outside)
    assert with_out(["train", "--out", "x", "--seed", "1"], "y") == [
        "train", "--out", "y", "--seed", "1",
    ]  # fmt: skip
    assert with_out(["train", "--out=x"], "y") == ["train", "--out=y"]
    assert with_out(["train"], "runs/r") == ["train", "--out", "runs/r"]


def test_the_recorded_command_names_its_python_and_quotes_each_word(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = ["train", "--benchmark", "Bandit", "--algorithm", "nop", "--out", "my runs/a"]
    command = recorded_command(argv, "Bandit", "nop", tmp_path / "my runs" / "a")
    words = shlex.split(command)
    assert words[:3] == [sys.executable, "-m", "metabench"]
    assert words[-2:] == ["--out", str(tmp_path / "my runs" / "a")]


@pytest.mark.skipif(shutil.which("env") is None, reason="needs env")
def test_the_recorded_command_runs_as_written_in_an_empty_environment(tmp_path, monkeypatch):
    """Started from a sub-folder of a repository whose path has a space and a non-ASCII
    character, a run's recorded command runs in ``env -i bash`` from the root, to its numbers."""
    root = repository(tmp_path / "my repö")
    (root / "sub dir").mkdir()
    monkeypatch.chdir(root / "sub dir")
    args = ["train", "--benchmark", "Bandit", "--algorithm", "rl2-ppo", "--seed", "1",
            "--steps", str(2 * STEPS_PER_ITERATION), "--out", "../results/ü run"]  # fmt: skip
    monkeypatch.setattr(sys, "argv", ["metabench", *args])
    assert main(args) == 0
    run = root / "results" / "ü run"
    first = numbers(run)
    command = json.loads((run / "result.json").read_text())["command"]
    assert shlex.split(command)[-2:] == ["--out", "results/ü run"]
    for name in ("result.json", "agent.pt"):
        (run / name).unlink()
    again = subprocess.run(["env", "-i", "bash", "-c", command], cwd=root, capture_output=True)
    assert again.returncode == 0, again.stderr.decode()
    assert numbers(run) == first


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=cwd, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout


def repository(path: Path) -> Path:
    """A new git repository with the project's ``.gitignore``."""
    path.mkdir()
    git(path, "init", "--quiet")
    shutil.copy(ROOT / ".gitignore", path / ".gitignore")
    return path


def plain_shell(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``command`` in bash with an empty environment, as a user's plain shell runs it."""
    return subprocess.run(
        ["env", "-i", "bash", "-c", command], cwd=cwd, capture_output=True, text=True, timeout=600
    )


def numbers(run: Path) -> dict:
    """What a run computed: its result's numbers, without wall times and the command."""
    result = json.loads((run / "result.json").read_text())
    metatrain = {k: v for k, v in result["metatrain"].items() if "/time_" not in k}
    return {
        "metatrain": metatrain,
        **{key: result[key] for key in ("config", "env_steps", "iterations", "metatest")},
    }


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_run_committed_mid_way_resumes_from_a_fresh_clone_as_if_never_interrupted(tmp_path):
    out = "results/Bandit/rl2-ppo-seed0"
    argv = [
        "train", "--benchmark", "Bandit", "--algorithm", "rl2-ppo", "--seed", "0",
        "--steps", str(ITERATIONS * STEPS_PER_ITERATION), "--checkpoint-every", "1",
        "--eval-every", "10", "--out", out,
    ]  # fmt: skip
    source = repository(tmp_path / "source")
    process = subprocess.Popen(
        [str(METABENCH), *argv], cwd=source, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    run = RunDirectory(source / out)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and process.poll() is None:
        if run.checkpoint_path.exists() and run.load_checkpoint()["iteration"] >= 2:
            break
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)  # as a session's end stops a run
    process.wait()
    assert not run.result_path.exists(), "the run finished before it could be interrupted"
    killed_at = run.load_checkpoint()["iteration"]

    git(source, "add", "--all")
    git(source, "commit", "--quiet", "--message", "the run so far")
    committed = git(source, "ls-files", out).split()
    assert f"{out}/checkpoint.pt" in committed and f"{out}/config.json" in committed
    assert not [name for name in committed if "/tensorboard/" in name or name.endswith(".lock")]

    clone = tmp_path / "clone"
    git(tmp_path, "clone", "--quiet", str(source), str(clone))
    status = plain_shell(f"{shlex.quote(str(METABENCH))} status --unfinished {out}", clone)
    assert status.returncode == 0, status.stderr
    prefix = f"to resume {out}: "
    (line,) = [line for line in status.stdout.splitlines() if line.startswith(prefix)]
    command = line.removeprefix(prefix)
    assert f"--out {out}" in command  # relative to the root of the clone
    resumed = plain_shell(command, clone)
    assert resumed.returncode == 0, resumed.stderr
    assert f"Resuming {out} at iteration {killed_at} of {ITERATIONS}" in resumed.stderr

    straight_through = repository(tmp_path / "straight")
    straight = plain_shell(command, straight_through)
    assert straight.returncode == 0, straight.stderr
    assert numbers(clone / out) == numbers(straight_through / out)

    # what is committed once it has finished: the trained agent in place of the checkpoint
    finished = RunDirectory(clone / out)
    assert finished.agent_path.exists() and not finished.checkpoint_path.exists()
    evaluated = plain_shell(f"{shlex.quote(str(METABENCH))} evaluate {out}", clone)
    assert evaluated.returncode == 0, evaluated.stderr
    assert "The same numbers as the run's final meta-test" in evaluated.stderr


def stop_after(iteration: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the next run stop after ``iteration``, as Ctrl-C there would."""
    after_iteration = StopOnInterrupt.after_iteration

    def ctrl_c(self: StopOnInterrupt, trainer: Any, done: int, stats: Any) -> bool:
        if done == iteration:
            signal.raise_signal(signal.SIGINT)
        return after_iteration(self, trainer, done, stats)

    monkeypatch.setattr(StopOnInterrupt, "after_iteration", ctrl_c)


def bandit_run(out: Path) -> RunSettings:
    return RunSettings("Bandit", "rl2-ppo", 0, 4 * STEPS_PER_ITERATION, out, checkpoint_every=1)


def test_a_run_resumed_on_another_kind_of_cpu_records_each_and_where_it_took_over(
    tmp_path, monkeypatch
):
    out = tmp_path / "run"
    with monkeypatch.context() as patch:
        patch.setattr(provenance, "cpu_record", lambda: {"model": "first"})
        stop_after(2, patch)
        with pytest.raises(KeyboardInterrupt):
            train(bandit_run(out))
    with monkeypatch.context() as patch:
        patch.setattr(provenance, "cpu_record", lambda: {"model": "second"})
        result = train(bandit_run(out))
    assert result.provenance["trained_on"] == [
        {"from_iteration": 1, "cpu": {"model": "first"}},
        {"from_iteration": 3, "cpu": {"model": "second"}},
    ]
    assert result.provenance["cpu"] == {"model": "second"}  # the one that finished it

    # resumed on the same kind of CPU: one kind, nothing more to say
    same = tmp_path / "same"
    with monkeypatch.context() as patch:
        stop_after(2, patch)
        with pytest.raises(KeyboardInterrupt):
            train(bandit_run(same))
    assert "trained_on" not in train(bandit_run(same)).provenance


def test_a_checkpoint_that_kept_no_cpu_history_says_its_first_iterations_cpu_is_unknown():
    here = provenance.cpu_record()
    assert provenance.cpu_history(None, 0) == [{"from_iteration": 1, "cpu": here}]
    assert provenance.cpu_history(None, 12) == [
        {"from_iteration": 1, "cpu": None},
        {"from_iteration": 13, "cpu": here},
    ]
    recorded = [{"from_iteration": 1, "cpu": here}]
    assert provenance.cpu_history(recorded, 12) == recorded
