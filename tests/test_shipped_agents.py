"""The trained agents shipped in ``results/`` load without running code and meta-test to the
numbers of their ``result.json`` (on the kind of CPU that made them; elsewhere ``evaluate`` says
what differs)."""

import json
import shutil

import pytest
import torch

from metabench.analysis.resultfile import read_result
from metabench.harness.loading import load_run
from metabench.harness.provenance import cpu_record
from metabench.harness.run import RunDirectory
from metabench.harness.training import evaluate
from metabench.records import MetaTestRecord
from tests.factories import ROOT

SHIPPED = sorted(path.parent for path in (ROOT / "results").rglob("agent.pt"))
"""Every run directory of ``results/`` that ships its agent."""


def test_results_ship_agents_and_no_checkpoint_of_a_finished_run():
    assert SHIPPED, "results/ ships no trained agent"
    for run in SHIPPED:
        assert (run / "result.json").is_file(), f"{run} ships an agent but no result"
        assert not (run / "checkpoint.pt").exists(), f"{run} ships its whole checkpoint"
        agent = RunDirectory(run).load_agent()  # weights_only: refused if it would run code
        result = json.loads((run / "result.json").read_text())
        assert agent is not None and agent["iteration"] == result["iterations"]


@pytest.mark.parametrize(
    "run",
    [run for run in SHIPPED if "PointRobot" in run.parent.name and run.name.endswith("seed0")],
    ids=lambda run: f"{run.parent.name}/{run.name}",
)
def test_a_shipped_agent_loads_into_its_algorithm_as_the_code_is_now(run):
    """Options added after a run was recorded, at the default that keeps the earlier behaviour,
    leave its agent loadable (the point robots' agents: every algorithm shipped there, quickly)."""
    loaded = load_run(run)
    assert loaded.iteration == json.loads((run / "result.json").read_text())["iterations"] > 0


@pytest.mark.slow
@pytest.mark.mujoco
def test_a_shipped_agent_meta_tests_to_the_numbers_of_its_result(tmp_path, capsys):
    shipped = ROOT / "results" / "HalfCheetahVel" / "maml-trpo-seed0"
    run = tmp_path / "run"  # a copy: evaluate writes its record into the run's evaluations/
    run.mkdir()
    for name in ("config.json", "result.json", "agent.pt"):
        shutil.copy(shipped / name, run / name)
    recorded = read_result(run / "result.json")
    result = MetaTestRecord.of(evaluate(run))
    said = " ".join(capsys.readouterr().err.split())  # the console wraps long lines
    cpu, recorded_cpu = cpu_record(), recorded.provenance["cpu"]
    if recorded_cpu == cpu:
        assert result == recorded.metatest
        assert "The same numbers as the run's final meta-test" in said
    elif result != recorded.metatest:  # another kind of CPU: the difference is stated, not hidden
        assert "these numbers differ from the final meta-test" in said
        for key in sorted(k for k in cpu if cpu[k] != recorded_cpu.get(k)):
            assert f"cpu.{key}: {recorded_cpu.get(key)!r} -> {cpu[key]!r}" in said


@pytest.mark.mujoco
def test_an_rl2_agent_shipped_under_version_3_names_loads():
    """RL2's agents shipped before version 4 of the records hold its option ``processes``, which
    the agent must match to load: they load into an RL2 whose option is ``step_in_workers``."""
    shipped = ROOT / "results" / "HalfCheetahVel" / "rl2-ppo-seed0"
    stored = torch.load(shipped / "agent.pt", weights_only=True)
    assert stored["algorithm"]["config"]["processes"] is False  # version 3's name
    loaded = load_run(shipped)
    assert loaded.algorithm.config.step_in_workers is False
    assert loaded.iteration == stored["iteration"]
