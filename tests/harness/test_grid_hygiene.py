"""Grid hygiene: duplicate cells merged, a cell's cores bound its run, degenerate cells refused."""

import dataclasses
import json
import os

import pytest
import torch

from metabench.algos.run_envs import RunEnvs
from metabench.atomic import atomic_write_json
from metabench.cli import main
from metabench.harness.algorithms import get_algorithm
from metabench.harness.benchmarks import get_benchmark
from metabench.harness.grid import plan
from metabench.harness.provenance import provenance
from metabench.harness.run import RunSettings, build_algorithm, resolve


def test_duplicate_benchmarks_algorithms_and_seeds_are_one_cell(tmp_path):
    cells = plan(["Bandit", "Bandit"], ["nop", "rl2-ppo", "nop"], [0, 0, 1], "quick", tmp_path)
    labels = [cell.label for cell in cells]
    assert labels == [
        "Bandit nop seed 0", "Bandit nop seed 1", "Bandit rl2-ppo seed 0", "Bandit rl2-ppo seed 1",
    ]  # fmt: skip


def test_bench_with_a_seed_twice_runs_it_once(tmp_path, capsys):
    args = ["bench", "--benchmarks", "Bandit", "--algorithms", "nop", "--seeds", "0", "0"]
    assert main([*args, "--results", str(tmp_path), "--cores", "2"]) == 0
    assert "1 cells ran, 0 failed" in capsys.readouterr().out


def test_a_cell_runs_with_the_cores_its_baseline_declares(tmp_path):
    (maml,) = plan(["PointGoal"], ["maml-trpo"], [0], "quick", tmp_path)
    command = maml.command()
    assert command[command.index("--cpus") + 1] == "2" == str(get_algorithm("maml-trpo").cpus)


def test_a_cell_on_a_machine_with_fewer_cores_than_declared_uses_them_all(tmp_path, monkeypatch):
    """metabench train refuses --cpus beyond the machine's cores: a cell asks for what there is
    (it runs alone then, as the executors already schedule it)."""
    (maml,) = plan(["PointGoal"], ["maml-trpo"], [0], "quick", tmp_path)
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    command = maml.command()
    assert maml.cpus == 2 and command[command.index("--cpus") + 1] == "1"


def test_cpus_is_recorded_and_a_run_uses_one_torch_thread_on_any_machine(tmp_path, monkeypatch):
    threads = []
    monkeypatch.setattr(torch, "get_num_threads", lambda: 64)
    monkeypatch.setattr(torch, "set_num_threads", threads.append)
    settings = RunSettings("Bandit", "nop", 0, 1, tmp_path, cpus=2)
    spec, config = resolve(settings)
    assert config.cpus == 2 and config.to_json()["cpus"] == 2
    build_algorithm(spec, config, None)
    assert threads == [1]  # not 2, not 64: the recorded command gives the same numbers anywhere
    settings.cpus = None  # not given: no bound, recorded as none
    assert resolve(settings)[1].to_json()["cpus"] is None


def test_provenance_records_the_thread_settings(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    threads = provenance()["threads"]
    assert threads == {"torch": torch.get_num_threads(), "OMP_NUM_THREADS": "1"}


@pytest.mark.mujoco
def test_cpus_bounds_the_maml_collector_processes_on_a_64_core_machine(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    spec = get_benchmark("HalfCheetahVel")
    entry = get_algorithm("maml-trpo")
    small = {"meta_batch_size": 2, "episodes_per_task": 4, "hidden_sizes": [8]}
    hyperparameters = entry.hyperparameters(spec, small)
    algo = entry.build(RunEnvs(spec, 0, processes=2), hyperparameters, None)
    try:
        vec_env = algo.collector.vec_env.unwrapped  # type: ignore[attr-defined]
        assert vec_env.processes == 2
        assert len(vec_env._rows._processes) == 1  # the calling process steps rows too
    finally:
        algo.close()  # type: ignore[attr-defined]
    # without a bound every core is used: what a 64-core Ray node running 32 cells must not do
    assert entry.hyperparameters(spec, small) == hyperparameters


@pytest.mark.metaworld
def test_cpus_bounds_the_sharded_metaworld_processes_on_a_64_core_machine(monkeypatch):
    from metabench.vector import sharded

    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    made = []
    original = sharded.ShardedVectorEnv.__init__

    def spy(self, env_fns, processes=None, **kwargs):
        made.append(processes)
        original(self, env_fns, processes, **kwargs)

    monkeypatch.setattr(sharded.ShardedVectorEnv, "__init__", spy)
    spec = get_benchmark("ML1-reach")
    entry = get_algorithm("maml-trpo")
    small = {"meta_batch_size": 2, "episodes_per_task": 2, "hidden_sizes": [8]}
    algo = entry.build(RunEnvs(spec, 0, processes=2), entry.hyperparameters(spec, small), None)
    try:
        assert made == [2]
        assert len(algo.collector.vec_env.unwrapped.processes) == 2  # type: ignore[attr-defined]
    finally:
        algo.close()  # type: ignore[attr-defined]


@pytest.mark.parametrize(("algorithm", "name"), [("cem", "CEM"), ("cmaes", "CMA-ES")])
def test_a_search_that_could_never_update_is_refused_at_resolve_time(
    tmp_path, algorithm, name, short_point_goal
):
    # PointGoalShort gives one exploration episode; a generation needs at least two
    with pytest.raises(ValueError, match=f"{name} on PointGoalShort: one generation") as error:
        plan([short_point_goal], [algorithm], [0], "quick", tmp_path)
    assert "raise [evaluation] exploration_episodes to at least 2" in str(error.value)
    assert not (tmp_path / short_point_goal).exists()


def test_too_large_a_population_names_the_setting_to_change(tmp_path, capsys):
    args = ["train", "--benchmark", "HalfCheetahVel", "--algorithm", "cem", "--set", "n_samples=11"]
    assert main([*args, "--out", str(tmp_path / "run")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "set n_samples to at most 10 (--set n_samples=10)" in err[0]
    assert not (tmp_path / "run").exists()
    config = json.dumps(resolve(RunSettings("HalfCheetahVel", "cem", 0, 1, tmp_path))[1].to_json())
    assert '"n_samples": 5' in config  # two generations of HalfCheetahVel's 10 episodes


def test_a_run_directory_without_cpus_recorded_is_a_run_without_a_bound(tmp_path):
    """A ``config.json`` of version 2 recorded ``cpus`` only when given: one without it is a run
    of no bound, which a run with one does not resume (every run in ``results/`` records it)."""
    from metabench.errors import RunError
    from metabench.harness.run import RunDirectory

    settings = RunSettings("Bandit", "nop", 0, 1, tmp_path, cpus=1)
    _, config = resolve(settings)
    run = RunDirectory(tmp_path)
    run.create()
    unbound = {k: v for k, v in config.to_json().items() if k not in ("cpus", "version")}
    atomic_write_json(run.config_path, unbound)
    assert run.read_config() == dataclasses.replace(config, cpus=None)
    with pytest.raises(RunError, match="differs in: cpus"):
        run.claim(config)
    assert run.claim(dataclasses.replace(config, cpus=None)) is None
    assert json.loads(run.config_path.read_text()) == unbound  # left as it was
