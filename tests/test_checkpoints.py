"""Checkpoints hold tensors and plain values only: loading one can run no code."""

import io
import os
import shlex
from pathlib import Path

import numpy as np
import pytest
import torch

from metabench.cli import main
from metabench.errors import RunError
from metabench.harness.benchmarks import get_benchmark
from metabench.harness.run import CHECKPOINT_FORMAT, RunDirectory, RunSettings, make_evaluator
from metabench.harness.training import train
from tests.factories import TINY, build_tiny, policy_parameters


class RunsACommand:
    """Unpickling this calls ``os.system(command)``."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


def crafted_run(tmp_path: Path) -> tuple[Path, Path]:
    """A finished NOP run whose checkpoint would create ``marker`` when unpickled in full."""
    out = tmp_path / "run"
    train(RunSettings("Bandit", "nop", 0, 1, out))
    marker = tmp_path / "marker"
    buffer = io.BytesIO()
    payload = RunsACommand(f"touch {shlex.quote(str(marker))}")
    torch.save({"format": CHECKPOINT_FORMAT, "x": payload}, buffer)
    (out / "checkpoint.pt").write_bytes(buffer.getvalue())
    return out, marker


def test_crafted_checkpoint_is_refused_without_running_it(tmp_path, capsys):
    out, marker = crafted_run(tmp_path)
    capsys.readouterr()
    assert main(["evaluate", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("metabench: error: checkpoint")
    assert "objects other than tensors" in err[0] and "delete it" in err[0]
    assert not marker.exists()
    with pytest.raises(RunError, match="objects other than tensors"):
        RunDirectory(out).load_checkpoint()
    assert not marker.exists()


def test_checkpoint_of_another_format_is_refused_in_one_line(tmp_path):
    run = RunDirectory(tmp_path)
    buffer = io.BytesIO()
    torch.save({"format": 1, "iteration": 3}, buffer)
    run.checkpoint_path.write_bytes(buffer.getvalue())
    with pytest.raises(RunError, match=f"not a metabench checkpoint of format {CHECKPOINT_FORMAT}"):
        run.load_checkpoint()
    # format 1 held NumPy arrays: refused by the weights-only reader, with the same advice
    buffer = io.BytesIO()
    torch.save({"format": 1, "numpy_rng": np.random.get_state()}, buffer)
    run.checkpoint_path.write_bytes(buffer.getvalue())
    with pytest.raises(RunError, match="delete it to restart") as error:
        run.load_checkpoint()
    assert "\n" not in str(error.value)


def build(name: str, seed: int):
    # the policy searches need more than PointGoal's one exploration episode per generation
    return build_tiny(name, "HalfCheetahVel" if name in ("cem", "cmaes") else "PointGoal", seed)


@pytest.mark.parametrize("name", sorted(TINY))
def test_every_algorithm_resumes_exactly_from_a_weights_only_checkpoint(tmp_path, name):
    straight = build(name, seed=3)
    if straight.steps_per_iteration:
        straight.train(1)
        straight.train(1)
    first = build(name, seed=3)
    if first.steps_per_iteration:
        first.train(1)
    run = RunDirectory(tmp_path)
    run.save_checkpoint({"iteration": 1, "algorithm": first.state_dict()})
    state = run.load_checkpoint()  # weights_only=True: raises if anything else was saved
    assert state is not None and state["format"] == CHECKPOINT_FORMAT
    resumed = build(name, seed=3)
    resumed.load_state_dict(state["algorithm"])
    if resumed.steps_per_iteration:
        resumed.train(1)
    for a, b in zip(policy_parameters(straight), policy_parameters(resumed), strict=True):
        assert torch.equal(a, b)
    for algo in (straight, first, resumed):
        if hasattr(algo, "close"):
            algo.close()


def small_metatest(name: str, seed: int):
    """A meta-test of 2 test tasks with few episodes, on the benchmark :func:`build` uses."""
    spec = get_benchmark("HalfCheetahVel" if name in ("cem", "cmaes") else "PointGoal")
    exploration = spec.exploration_episodes if name in ("cem", "cmaes") else 2
    return make_evaluator(
        spec, seed, test_tasks=spec.test_tasks(seed)[:2], exploration_episodes=exploration,
        test_episodes=1,
    )  # fmt: skip


def leaves(value) -> list[str]:
    """The paths of every entry of a nested state, to see what a file holds."""
    if isinstance(value, dict):
        return [f"{key}/{leaf}" for key, item in value.items() for leaf in leaves(item)] or [""]
    return [""]


@pytest.mark.parametrize("name", sorted(TINY))
def test_a_trained_agent_meta_tests_as_the_whole_checkpoint_does(tmp_path, name):
    trained = build(name, seed=3)
    if trained.steps_per_iteration:
        trained.train(1)
    state = trained.state_dict()
    run = RunDirectory(tmp_path)
    run.save_checkpoint({"iteration": 1, "algorithm": state})
    checkpoint_size = run.checkpoint_path.stat().st_size
    assert run.keep_agent(trained)
    assert not run.checkpoint_path.exists() and not run.keep_agent(trained)
    agent = run.load_agent()  # weights_only=True, like a checkpoint
    assert agent is not None and agent["iteration"] == 1

    # each loaded just before its meta-test: SB3's algorithms restore the global generators
    evaluator = small_metatest(name, seed=3)
    from_checkpoint = build(name, seed=3)
    from_checkpoint.load_state_dict(state)
    expected = evaluator.evaluate(from_checkpoint)
    from_agent = build(name, seed=3)
    from_agent.load_agent_state(agent["algorithm"])
    assert evaluator.evaluate(from_agent) == expected
    for algo in (trained, from_checkpoint, from_agent):
        if hasattr(algo, "close"):
            algo.close()

    kept = leaves(agent["algorithm"])
    training_only = [path for path in leaves(state) if path not in kept]
    if any("optimizer" in path or "buffers" in path for path in leaves(state)):
        assert not any("optimizer" in path or "buffers" in path for path in kept)
        assert run.agent_path.stat().st_size < checkpoint_size
    else:  # nothing only training reads: the agent is the whole state
        assert training_only == []


def test_a_pearl_agent_keeps_the_encoder_and_the_policy_only():
    pearl = build("pearl", seed=0)
    agent = pearl.agent_state(pearl.state_dict())
    assert sorted(agent["networks"]) == ["encoder", "policy"]


def test_a_damaged_agent_is_refused_in_one_line_naming_what_to_do(tmp_path):
    run = RunDirectory(tmp_path)
    buffer = io.BytesIO()
    torch.save({"format": 1, "weights": torch.zeros(1000)}, buffer)
    run.agent_path.write_bytes(buffer.getvalue()[:200])  # cut off
    with pytest.raises(RunError, match=r"agent\.pt is corrupt .*: train the run again") as error:
        run.load_agent()
    assert "\n" not in str(error.value)
