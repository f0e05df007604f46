"""Runs: result files with provenance, atomic writes, resuming, and one-line errors."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from metabench.analysis.periodic import periodic_metatests
from metabench.analysis.resultfile import collect_results, read_result
from metabench.atomic import atomic_write_bytes, atomic_write_json, json_text
from metabench.cli import main
from metabench.errors import RunError
from metabench.evaluation import task_to_json
from metabench.harness.benchmarks import get_benchmark
from metabench.harness.report import status_table
from metabench.harness.run import RunDirectory, RunSettings
from metabench.harness.schedule import MetaTestSchedule
from metabench.harness.status import run_status
from metabench.harness.training import evaluate, train
from metabench.records import VERSION, MetaTestRecord, Protocol, RecordVersionError
from tests.factories import ROOT

# Bandit with RL2-PPO's preset: 64 trials of 3 one-pull episodes per iteration.
STEPS_PER_ITERATION = 64 * 3


def settings(out, algorithm="rl2-ppo", steps=2 * STEPS_PER_ITERATION, **kwargs):
    return RunSettings("Bandit", algorithm, seed=0, env_steps=steps, out=Path(out), **kwargs)


def no_temporary_files(path: Path) -> bool:
    return not [p for p in path.rglob("*") if p.name.endswith(".tmp")]


def test_atomic_write_keeps_the_old_file_when_interrupted(tmp_path, monkeypatch):
    target = tmp_path / "result.json"
    atomic_write_json(target, {"a": 1.0, "nan": float("nan")})
    assert json.loads(target.read_text()) == {"a": 1.0, "nan": None}

    def fail(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(KeyboardInterrupt):
        atomic_write_bytes(target, b"half")
    assert json.loads(target.read_text())["a"] == 1.0
    assert no_temporary_files(tmp_path)


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_atomic_files_get_the_permissions_a_plain_write_would(tmp_path, umask):
    previous = os.umask(umask)
    try:
        atomic_write_bytes(tmp_path / "atomic", b"x")
        (tmp_path / "plain").write_bytes(b"x")
    finally:
        os.umask(previous)
    mode = (tmp_path / "atomic").stat().st_mode & 0o777
    assert mode == (tmp_path / "plain").stat().st_mode & 0o777 == 0o666 & ~umask


def test_nop_result_records_provenance_and_floor(tmp_path):
    result = train(settings(tmp_path / "nop", algorithm="nop"))
    on_disk = json.loads((tmp_path / "nop" / "result.json").read_text())
    assert on_disk == json.loads(json_text(result.to_json()))
    versions = on_disk["provenance"]["versions"]
    for package in ("metabench", "gymnasium", "mujoco", "metaworld", "torch", "stable-baselines3"):
        assert versions[package]
    assert on_disk["provenance"]["git_revision"]
    cpu = on_disk["provenance"]["cpu"]
    assert cpu["torch_capability"] == torch.backends.cpu.get_cpu_capability() and cpu["model"]
    assert set(cpu) == {"model", "torch_capability", "vector_extensions", "kernel_env"}
    assert on_disk["config"]["seed"] == 0 and on_disk["env_steps"] == 0
    assert on_disk["wall_time_s"] > 0
    spec = get_benchmark("Bandit")
    assert on_disk["config"]["test_tasks"] == spec.test_tasks(0)
    # NOP always pulls arm 0: it pays in exactly the test tasks whose best arm is 0
    tasks = spec.test_tasks(0)
    expected = sum(task["best_arm"] == 0 for task in tasks) / len(tasks)
    assert on_disk["metatest"]["aggregate"]["return_per_episode"] == pytest.approx([expected] * 3)
    # what changes the numbers, in one record (NOP's zero action is deterministic)
    assert on_disk["metatest_protocol"] == {
        "n_test_tasks": 30,
        "n_run_test_tasks": 30,
        "exploration_episodes": 2,
        "test_episodes": 1,
        "deterministic_test": True,
    }


@pytest.fixture
def keeps_checkpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    """Finished runs keep their checkpoint, as those of earlier versions did, and as a run has
    it while its final meta-test goes."""
    monkeypatch.setattr(RunDirectory, "keep_agent", lambda self, algorithm: False)


def test_a_finished_run_keeps_its_agent_instead_of_its_checkpoint_and_is_not_repeated(
    tmp_path, capsys
):
    out = tmp_path / "rl2"
    first = train(settings(out))
    assert first.iterations == 2 and first.env_steps == 2 * STEPS_PER_ITERATION
    run = RunDirectory(out)
    agent = run.load_agent()
    assert run.load_checkpoint() is None and agent is not None and agent["iteration"] == 2
    assert run.final_checkpoint_path.exists()  # on this machine only: a larger --steps extends
    assert "optimizer" not in agent["algorithm"] and "policy" in agent["algorithm"]
    assert (out / "tensorboard" / "metabench").is_dir()
    again = train(settings(out))
    assert again == first == read_result(out / "result.json")
    assert "already complete" in capsys.readouterr().err
    assert no_temporary_files(out)


def test_a_run_killed_before_it_kept_its_agent_keeps_it_when_run_again(
    tmp_path, capsys, monkeypatch
):
    out = tmp_path / "rl2"
    with monkeypatch.context() as patch:
        patch.setattr(RunDirectory, "keep_agent", lambda self, algorithm: False)
        first = train(settings(out))
    run = RunDirectory(out)
    assert run.load_checkpoint() is not None and run.load_agent() is None
    capsys.readouterr()
    assert train(settings(out)) == first
    assert f"Kept its trained agent in {run.agent_path}" in capsys.readouterr().err
    assert run.load_checkpoint() is None and run.load_agent() is not None
    assert MetaTestRecord.of(evaluate(out)) == first.metatest


def without_times(record: dict[str, float]) -> dict[str, float]:
    return {key: value for key, value in record.items() if "time" not in key}


def test_a_larger_steps_extends_a_finished_run_from_its_last_checkpoint(tmp_path, capsys):
    out = tmp_path / "rl2"
    first = train(settings(out))
    run = RunDirectory(out)
    assert run.final_checkpoint_path.exists() and not run.checkpoint_path.exists()
    capsys.readouterr()
    extended = train(settings(out, steps=4 * STEPS_PER_ITERATION))
    err = " ".join(capsys.readouterr().err.split())
    aside = out / f"result-{2 * STEPS_PER_ITERATION}-steps.json"
    assert f"Extending {out} from --steps {2 * STEPS_PER_ITERATION} to" in err
    assert "Resuming" in err and "at iteration 2 of 4" in err
    assert read_result(aside) == first  # the earlier result, kept
    assert extended.iterations == 4 and extended.env_steps == 4 * STEPS_PER_ITERATION
    assert run.load_agent()["iteration"] == 4
    # it trained as a run given that budget from the start
    straight = train(settings(tmp_path / "straight", steps=4 * STEPS_PER_ITERATION))
    assert extended.config == straight.config
    assert without_times(extended.metatrain) == without_times(straight.metatrain)
    assert extended.metatest == straight.metatest


def test_a_finished_run_without_its_training_state_says_it_cannot_be_extended(tmp_path):
    out = tmp_path / "rl2"
    train(settings(out))
    run = RunDirectory(out)
    run.final_checkpoint_path.unlink()  # as in a clone: the repository ships the agent only
    with pytest.raises(RunError, match=r"cannot be extended: .*into another --out"):
        train(settings(out, steps=4 * STEPS_PER_ITERATION))
    assert run.completed_result() is not None  # nothing moved
    with pytest.raises(RunError, match=r"holds a different run \(differs in: env_steps_budget"):
        train(settings(out, steps=STEPS_PER_ITERATION))  # a smaller budget is another run


def test_budget_is_whole_iterations_never_more(tmp_path):
    result = train(settings(tmp_path / "r", steps=3 * STEPS_PER_ITERATION - 1))
    assert result.iterations == 2


def test_periodic_evaluations_are_written(tmp_path):
    out = tmp_path / "r"
    train(settings(out, steps=2 * STEPS_PER_ITERATION, eval_schedule=MetaTestSchedule(1)))
    names = sorted(p.name for p in (out / "evaluations").iterdir())
    assert names == ["iteration-000001.json", "iteration-000002.json"]


def test_periodic_meta_tests_on_a_subset_say_how_many_tasks_they_used(tmp_path, user_specs):
    """``[evaluation] periodic_test_tasks``: the meta-tests during training use that many of the
    run's test tasks (fixed per seed, recorded in config.json), and their files and TensorBoard
    curves say so; the final meta-test uses all of them."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    text = (ROOT / "envs" / "Bandit.toml").read_text()
    user_specs("envs/BanditSubset.toml", text + "periodic_test_tasks = 6\n")
    out = tmp_path / "r"
    steps = 2 * 10 * 3  # two iterations of rl2-ppo's default meta-batch of 10 trials
    train(RunSettings("BanditSubset", "rl2-ppo", 0, steps, out, eval_schedule=MetaTestSchedule(1)))
    result = json.loads((out / "result.json").read_text())
    config = result["config"]
    subset = config["periodic_test_tasks"]
    assert len(subset) == len(set(subset)) == 6 and subset == sorted(subset)
    assert result["metatest"]["aggregate"]["n_tasks"] == 30
    assert result["metatest_protocol"]["n_test_tasks"] == 30
    for name in ("iteration-000001.json", "iteration-000002.json"):
        periodic = json.loads((out / "evaluations" / name).read_text())
        assert periodic["aggregate"]["n_tasks"] == 6
        assert periodic["metatest_protocol"]["n_test_tasks"] == 6
        assert periodic["metatest_protocol"]["n_run_test_tasks"] == 30
        assert periodic["test_task_indices"] == subset
        assert [t["task"] for t in periodic["tasks"]] == [config["test_tasks"][i] for i in subset]
    events = EventAccumulator(str(out / "tensorboard" / "metabench"))
    events.Reload()
    counts = {tag: [e.value for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}
    assert counts["periodic_metatest/n_test_tasks"] == [6, 6]
    assert counts["metatest/n_test_tasks"] == [30]  # the final meta-test only

    # metabench evaluate --test-tasks periodic: the checkpoint on those 6 tasks, recorded so
    evaluated = evaluate(out, test_tasks="periodic", exploration_episodes=1, test_episodes=1)
    (written,) = (out / "evaluations").glob("evaluate-*.json")
    record = json.loads(written.read_text())
    assert record["test_task_indices"] == subset
    assert [t["task"] for t in record["tasks"]] == [config["test_tasks"][i] for i in subset]
    assert evaluated.n_tasks == record["metatest_protocol"]["n_test_tasks"] == 6


def test_evaluate_on_the_periodic_tasks_of_a_run_without_a_subset_says_what_to_change(tmp_path):
    out = tmp_path / "r"
    train(settings(out))
    with pytest.raises(RunError, match="used all its test tasks: leave out --test-tasks periodic"):
        evaluate(out, test_tasks="periodic")
    assert not list((out / "evaluations").glob("evaluate-*.json"))


def test_evaluate_reads_the_checkpoint_and_keeps_every_evaluation(tmp_path):
    out = tmp_path / "r"
    train(settings(out))
    tasks = [task_to_json(task) for task in get_benchmark("Bandit").test_tasks(0)[:4]]
    for _ in range(2):  # within one second: two files all the same
        result = evaluate(out, test_tasks=4, exploration_episodes=2, test_episodes=1)
        assert result.n_tasks == 4 and len(result.return_per_episode) == 3
    files = sorted((out / "evaluations").glob("evaluate-*.json"))
    assert len(files) == 2
    for path in files:
        record = json.loads(path.read_text())
        assert [task["task"] for task in record["tasks"]] == tasks  # the run's first 4
        assert record["metatest_protocol"]["exploration_episodes"] == 2
    with pytest.raises(RunError, match=r"30 test tasks: ask for at most 30 \(--test-tasks\)$"):
        evaluate(out, test_tasks=31)


def test_evaluate_writes_into_a_copied_run_without_its_evaluations_folder(tmp_path):
    out, copy = tmp_path / "r", tmp_path / "copy"
    train(settings(out))
    copy.mkdir()
    for name in ("config.json", "agent.pt"):  # what a hand-made copy of a run holds
        shutil.copy(out / name, copy / name)
    result = evaluate(copy, test_tasks=2, exploration_episodes=1, test_episodes=1)
    (written,) = (copy / "evaluations").glob("evaluate-*.json")
    assert json.loads(written.read_text())["tasks"] == MetaTestRecord.of(result).to_json()["tasks"]


def test_budget_smaller_than_one_iteration_fails_before_writing(tmp_path):
    with pytest.raises(RunError, match="less than one iteration"):
        train(settings(tmp_path / "small", steps=STEPS_PER_ITERATION - 1))
    assert not (tmp_path / "small").exists()


def test_directory_of_another_run_is_refused(tmp_path):
    out = tmp_path / "r"
    train(settings(out, algorithm="nop"))
    with pytest.raises(RunError, match="holds a different run"):
        train(settings(out))


OLD_NAMES = {"exploration_episodes": "n_exploration_eps", "test_episodes": "n_test_episodes"}
UNSET = {
    "periodic_test_tasks": None,
    "train_evaluation_tasks": None,
    "cpus": None,
    "device": "cpu",
    "algorithm_spec": None,
    "batched": False,
    "train_evaluation": None,
    "metaworld_envs_per_class": None,
    "episode_success_steps": None,
    "episode_returns_to_success": None,
    "test_task_indices": None,
}
"""What version 1 left out where a run had none (version 3 writes it)."""


def _old(record: dict) -> dict:
    return {
        OLD_NAMES.get(key, key): value
        for key, value in record.items()
        if key != "version" and (key not in UNSET or UNSET[key] != value)
    }


def _old_metatest(record: dict) -> dict:
    return {**_old(record), "version": 1, "tasks": [_old(task) for task in record["tasks"]]}


def write_as_version_1(out: Path) -> None:
    """Rewrite a run directory's files as version 1 of the meta-test result wrote them."""
    config = _old(json.loads((out / "config.json").read_text()))
    config["protocol"] = _old(config["protocol"])
    atomic_write_json(out / "config.json", config)
    for path in (out / "evaluations").glob("*.json"):
        atomic_write_json(path, _old_metatest(json.loads(path.read_text())))
    result = _old(json.loads((out / "result.json").read_text()))
    result["config"] = config
    result["metatest"] = _old_metatest(result["metatest"])
    atomic_write_json(out / "result.json", result)


def test_a_run_written_by_version_1_resumes_and_evaluates_as_the_same_run(
    tmp_path, capsys, keeps_checkpoint
):
    """A run directory of version 1 (``n_exploration_eps``, ``n_test_episodes``) is the same run:
    its files read as the current records, ``metabench evaluate`` reproduces its numbers, and it
    resumes (here: its final meta-test again, from its checkpoint) to the same result."""
    out = tmp_path / "r"
    original = train(settings(out, eval_schedule=MetaTestSchedule(1)))
    periodic = periodic_metatests(out / "result.json")
    assert original.config.protocol == Protocol(2, 1, batched=False) and len(periodic) == 2
    write_as_version_1(out)
    old_config = (out / "config.json").read_bytes()
    assert b'"n_exploration_eps": 2' in old_config and b'"version"' not in old_config
    assert b'"version": 1' in (out / "result.json").read_bytes()
    assert read_result(out / "result.json") == original
    assert RunDirectory(out).read_config() == original.config
    assert periodic_metatests(out / "result.json") == periodic
    capsys.readouterr()
    assert train(settings(out)) == original  # the same run, already complete
    assert "already complete" in capsys.readouterr().err
    evaluate(out)
    assert "The same numbers as the run's final meta-test" in capsys.readouterr().err
    (out / "result.json").unlink()
    resumed = train(settings(out))
    assert "Resuming" in capsys.readouterr().err
    assert resumed.metatest == original.metatest
    assert (out / "config.json").read_bytes() == old_config  # left as it was written


def test_a_result_of_a_newer_version_is_a_one_line_error_naming_it(tmp_path, capsys):
    out = tmp_path / "r"
    train(settings(out, algorithm="nop"))
    path = out / "result.json"
    result = json.loads(path.read_text())
    result["version"] = VERSION + 1
    atomic_write_json(path, result)
    message = (
        f"{path}: result record version {VERSION + 1} is newer than this metabench reads "
        f"(versions 1 to {VERSION}): upgrade metabench to read it"
    )
    with pytest.raises(RecordVersionError) as raised:
        read_result(path)
    assert str(raised.value) == message
    warnings: list[str] = []
    assert collect_results(tmp_path, warnings.append) == []
    assert warnings == [f"skipped: {message}"]
    capsys.readouterr()
    command = ["train", "--benchmark", "Bandit", "--algorithm", "nop", "--seed", "0"]
    assert main([*command, "--steps", str(2 * STEPS_PER_ITERATION), "--out", str(out)]) == 1
    assert capsys.readouterr().err == f"metabench: error: {message}\n"
    assert path.exists()  # not set aside as corrupt


def test_a_folder_of_the_users_is_not_a_run_directory(tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    with pytest.raises(RunError, match=r"--out .*mine is not empty \(notes.txt\)"):
        train(settings(out))
    assert [p.name for p in out.iterdir()] == ["notes.txt"]


def test_a_run_directory_in_use_is_refused_until_its_run_ends(tmp_path):
    out = tmp_path / "r"
    out.mkdir()
    with RunDirectory(out).locked():  # as a run in another process holds it
        with pytest.raises(RunError, match=rf"in use by a metabench run \(pid {os.getpid()}\)"):
            train(settings(out))
        assert not (out / "config.json").exists()
    assert train(settings(out)).iterations == 2


def test_corrupt_checkpoint_is_reported(tmp_path, keeps_checkpoint):
    out = tmp_path / "r"
    run = RunDirectory(out)
    train(settings(out))
    (out / "result.json").unlink()
    run.checkpoint_path.write_bytes(run.checkpoint_path.read_bytes()[:100])
    with pytest.raises(RunError, match="corrupt"):
        train(settings(out))


def test_unwritable_output_directory_is_reported(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(RunError, match="writable"):
        train(settings(blocker / "run"))


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["train", "--benchmark", "Nope", "--algorithm", "nop"], 2, "unknown benchmark 'Nope'"),
        (["train", "--benchmark", "Bandit", "--algorithm", "nope"], 2, "unknown algorithm 'nope'"),
        (["train", "--benchmark", "Bandit", "--algorithm", "rl2-ppo", "--steps", "10"], 1,
         "less than one iteration"),
        (["train", "--benchmark", "Bandit", "--algorithm", "rl2-ppo", "--set", "lr=1"], 1,
         "unknown hyperparameter(s) lr of rl2-ppo"),
        (["evaluate", "/nonexistent/run"], 1, "not a metabench run directory"),
    ],
)  # fmt: skip
def test_cli_errors_are_one_line_with_exit_code(args, code, message, tmp_path, capsys):
    if args[0] == "train":
        args = [*args, "--out", str(tmp_path / "run")]
    try:
        assert main(args) == code
    except SystemExit as exit_info:
        assert exit_info.code == code
    err = capsys.readouterr().err.strip().splitlines()
    assert message in err[-1]
    if code == 1:
        assert len(err) == 1 and err[0].startswith("metabench: error:")


@pytest.mark.slow
def test_sigkill_then_same_command_resumes(tmp_path):
    out = tmp_path / "run"
    command = [
        sys.executable, "-m", "metabench.cli", "train", "--benchmark", "Bandit",
        "--algorithm", "rl2-ppo", "--steps", str(200 * STEPS_PER_ITERATION), "--out", str(out),
        "--checkpoint-every", "1",
    ]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    run = RunDirectory(out)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        state = run.load_checkpoint() if run.checkpoint_path.exists() else None
        if state is not None and state["iteration"] >= 3:
            break
        time.sleep(0.2)
    process.send_signal(signal.SIGKILL)
    process.wait()
    killed_at = run.load_checkpoint()["iteration"]
    assert 3 <= killed_at < 200 and not run.result_path.exists()

    command[command.index("--steps") + 1] = str((killed_at + 2) * STEPS_PER_ITERATION)
    # a different budget is a different run ...
    finished = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert finished.returncode == 1 and "env_steps_budget" in finished.stderr
    # ... so resume with the same command
    command[command.index("--steps") + 1] = str(200 * STEPS_PER_ITERATION)
    command += ["--checkpoint-every", "1"]
    stale = out / ".checkpoint.pt.killed.tmp"  # what a write cut off by SIGKILL leaves
    stale.write_bytes(b"half")
    resumed = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        state = run.load_checkpoint()
        if state["iteration"] >= killed_at + 2:
            break
        time.sleep(0.2)
    resumed.send_signal(signal.SIGKILL)
    resumed.wait()
    assert resumed.stderr is not None
    said = " ".join(resumed.stderr.read().split())  # as wrapped at the console's width
    assert f"Resuming {out} at iteration {killed_at}" in said
    assert run.load_checkpoint()["iteration"] >= killed_at + 2
    # the resume removed the stale file; SIGKILL may have cut off one write of its own
    assert not stale.exists()
    assert len([p for p in out.rglob("*") if p.name.endswith(".tmp")]) <= 1


def test_table_lists_runs_and_references_and_skips_corrupt_results(tmp_path, capsys):
    results = tmp_path / "results"
    train(settings(results / "nop", algorithm="nop"))
    assert main(["table", "--results", str(results)]) == 0
    page = (results / "README.md").read_text()
    assert "| Bandit | nop | 0 | 0 |" in page
    curve = read_result(results / "nop" / "result.json").metatest.return_per_episode
    assert " → ".join(f"{v:.2f}" for v in curve) in page  # NOP's curve
    assert "Published settings" not in page  # none for Bandit: a page lists its benchmarks' only
    assert "| nop | 1 |" in page  # the summary over seeds
    assert (results / "summary.csv").read_text().startswith("benchmark,")
    assert (results / "plots" / "adaptation_Bandit.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "![adaptation_Bandit](plots/adaptation_Bandit.png)" in page  # shown on the page
    elsewhere = tmp_path / "pages"
    before = {p: p.read_bytes() for p in results.rglob("*") if p.is_file()}
    assert main(["table", "--results", str(results), "--out", str(elsewhere)]) == 0
    assert (elsewhere / "README.md").read_text() == page  # the same page, its plots beside it
    assert (elsewhere / "plots" / "adaptation_Bandit.png").is_file()
    assert (elsewhere / "summary.csv").is_file()
    assert {p: p.read_bytes() for p in results.rglob("*") if p.is_file()} == before
    (results / "broken").mkdir()
    (results / "broken" / "result.json").write_text('{"config": ')
    capsys.readouterr()
    assert main(["table", "--results", str(results)]) == 0  # the other runs are still tabled
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "warning: skipped" in err[0]
    assert "broken/result.json is unreadable" in err[0]
    assert "| Bandit | nop | 0 | 0 |" in (results / "README.md").read_text()


def test_maml_trpo_runs_through_the_same_harness(tmp_path, short_point_goal):
    out = tmp_path / "maml"
    overrides = {"meta_batch_size": 2, "episodes_per_task": 2, "hidden_sizes": [8]}
    run = RunSettings(short_point_goal, "maml-trpo", 0, 2 * 160, out, hyperparameters=overrides)
    result = train(run)
    # one iteration: 2 tasks x 2 episodes x 20 steps, before and after adaptation
    assert result.iterations == 2 and result.env_steps == 320
    assert "metatrain/post_update_return" in result.metatrain
    assert result.config.hyperparameters["num_grad_updates"] == 1
    assert RunDirectory(out).load_agent()["iteration"] == 2
    with pytest.raises(ValueError, match=r"unknown hyperparameter\(s\) lr of maml-trpo"):
        train(RunSettings("PointGoal", "maml-trpo", 0, 320, tmp_path / "x", {"lr": 1}))


@pytest.mark.mujoco
@pytest.mark.parametrize("algorithm", ["cem", "cmaes"])
def test_policy_search_baselines_run_through_the_harness(tmp_path, algorithm):
    result = train(RunSettings("HalfCheetahVel", algorithm, 0, 1, tmp_path / algorithm))
    assert result.iterations == 0 and result.env_steps == 0  # no meta-training
    # population sized to HalfCheetahVel's exploration budget: two generations of 5 episodes
    assert result.config.hyperparameters["n_samples"] == 5
    assert result.metatest.n_tasks == 40
    with pytest.raises(ValueError, match="unknown hyperparameter"):
        train(RunSettings("HalfCheetahVel", algorithm, 0, 1, tmp_path / "x", {"lr": 1}))


def test_table_lists_failed_grid_cells(tmp_path):
    results = tmp_path / "results"
    failed = results / "Bandit" / "rl2-ppo-seed1"
    failed.mkdir(parents=True)
    atomic_write_json(failed / "error.json", {"exit_code": 1, "log_tail": ["...", "boom | x"]})
    assert main(["table", "--results", str(results)]) == 0  # a grid whose only cell failed
    assert "| `Bandit/rl2-ppo-seed1` | 1 | boom \\| x |" in (results / "README.md").read_text()
    train(settings(failed))  # retried: its result replaces the failure on the page
    assert main(["table", "--results", str(results)]) == 0
    page = (results / "README.md").read_text()
    assert "Failed runs" not in page and "| Bandit | rl2-ppo | 0 |" in page


def test_pearl_records_the_env_steps_it_took_its_initial_collection_included(
    tmp_path, short_point_goal, keeps_checkpoint
):
    # 3 training tasks x 20 initial steps, then 2 tasks x (20 prior + 20 posterior) an iteration
    overrides = {
        "n_train_tasks": 3,
        "num_initial_steps": 20,
        "num_tasks_sample": 2,
        "num_steps_prior": 20,
        "num_extra_rl_steps_posterior": 20,
        "num_train_steps_per_itr": 2,
        "meta_batch_size": 2,
        "batch_size": 8,
        "embedding_batch_size": 6,
        "latent_size": 2,
        "hidden_sizes": [8],
        "encoder_hidden_sizes": [8],
    }
    out = tmp_path / "pearl"
    run = RunSettings(
        short_point_goal, "pearl", 0, 2 * 80, out, overrides, eval_schedule=MetaTestSchedule(1)
    )
    result = train(run)
    # --steps bought two iterations; the count has the initial collection on top of them, as
    # the algorithm's own tally of the steps it collected does
    assert result.iterations == 2
    assert result.env_steps == 3 * 20 + 2 * 80 == result.metatrain["metatrain/env_steps"]
    periodic = [json.loads(p.read_text()) for p in sorted((out / "evaluations").iterdir())]
    assert [record["env_steps"] for record in periodic] == [60 + 80, 60 + 160]
    # metabench status counts the progress against that total, not against --steps alone
    checkpoint = torch.load(out / "checkpoint.pt", weights_only=True)
    assert checkpoint["planned_env_steps"] == 3 * 20 + 2 * 80
    assert run_status(out).planned_env_steps == 3 * 20 + 2 * 80
    result_path = out / "result.json"
    result_path.rename(out / "result.json.kept")  # as while the final meta-test runs
    stopped = run_status(out)
    assert (stopped.state, stopped.env_steps, stopped.planned_env_steps) == ("stopped", 220, 220)
    progress = status_table([stopped], out).columns[3]
    assert progress.header == "env steps" and list(progress.cells) == ["220 / 220 (100%)"]


def test_evaluate_with_other_test_actions_gives_what_a_run_trained_with_them_gives(tmp_path):
    # deterministic_test changes only the test episodes: the two runs train alike
    sampled = train(settings(tmp_path / "sampled"))
    mode = train(settings(tmp_path / "mode", hyperparameters={"deterministic_test": True}))
    agents = [RunDirectory(tmp_path / name).load_agent() for name in ("sampled", "mode")]
    weights = [agent["algorithm"]["policy"] for agent in agents if agent is not None]
    assert len(weights) == 2 and weights[0].keys() == weights[1].keys()
    assert all(torch.equal(weights[0][key], weights[1][key]) for key in weights[0])
    assert sampled.metatest.return_per_episode != mode.metatest.return_per_episode
    result = evaluate(tmp_path / "sampled", test_actions="mode")
    assert MetaTestRecord.of(result) == mode.metatest
    (written,) = (tmp_path / "sampled" / "evaluations").glob("evaluate-*.json")
    assert json.loads(written.read_text())["metatest_protocol"]["deterministic_test"] is True
    assert MetaTestRecord.of(evaluate(tmp_path / "mode", test_actions="sample")) == sampled.metatest


def test_test_actions_of_an_algorithm_without_the_option_is_a_one_line_error(tmp_path, capsys):
    out = tmp_path / "nop"
    train(settings(out, algorithm="nop", steps=1))
    assert main(["evaluate", str(out), "--test-actions", "mode"]) == 1
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "metabench: error: NOP has no deterministic_test option, so its test episodes act as its "
        "own settings say: leave out --test-actions"
    )


def test_the_runs_table_says_which_runs_ship_a_trained_agent(tmp_path, monkeypatch):
    results = tmp_path / "results"
    train(settings(results / "nop", algorithm="nop"))
    train(settings(results / "rl2"))
    with monkeypatch.context() as patch:  # finished as an earlier version did: no agent kept
        patch.setattr(RunDirectory, "keep_agent", lambda self, algorithm: False)
        train(settings(results / "old", steps=3 * STEPS_PER_ITERATION))
    (results / "old" / "checkpoint.pt").unlink()
    assert main(["table", "--results", str(results)]) == 0
    rows = {
        line.split("|")[-3].strip(): line.split("|")[-2].strip()
        for line in (results / "README.md").read_text().splitlines()
        if line.startswith("| Bandit |") and line.count("|") == 11
    }
    assert rows == {"`nop`": "none needed", "`rl2`": "`agent.pt`", "`old`": "—"}
