"""PointGoal is the MAML paper's 2-D navigation, and MAML-TRPO visibly adapts on it through the
CLI at its baseline settings (pytorch-maml-rl's ``2d-navigation.yaml``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from metabench.cli import main
from metabench.harness.benchmarks import get_benchmark
from metabench.harness.run import build_algorithm, make_evaluator
from metabench.records import RunConfig


def run(tmp_path: Path, algorithm: str, steps: int) -> dict:
    out = tmp_path / algorithm
    args = ["train", "--benchmark", "PointGoal", "--algorithm", algorithm, "--seed", "0"]
    assert main([*args, "--steps", str(steps), "--cpus", "1", "--out", str(out)]) == 0
    result: dict = json.loads((out / "result.json").read_text())
    return result


@pytest.mark.slow
def test_maml_trpo_adapts_and_beats_nop_on_point_goal_through_the_cli(tmp_path, capsys):
    """8 iterations (640k steps; ``metabench train``'s default 1e6 gives 12): after one inner
    step on 20 exploration episodes, the 20 test episodes beat the exploration episodes, NOP
    (standing still) and the same inner step from the untrained policy the run started from, on
    the same 20 test tasks. Seeds 0, 1, 2 gave post - pre 19.7, 15.2, 17.9 and post - NOP 13.4,
    9.7, 11.4 (at 1e6 steps, post -21.1, -20.6, -21.0 against NOP's -39.2, -35.9, -37.4); the
    untrained policy's post was -89.5, -128.2, -102.6."""
    maml = run(tmp_path, "maml-trpo", 640_000)
    nop = run(tmp_path, "nop", 1)
    capsys.readouterr()
    assert maml["config"]["test_tasks"] == nop["config"]["test_tasks"]
    assert maml["iterations"] == 8
    aggregate = maml["metatest"]["aggregate"]
    per_episode = aggregate["return_per_episode"]
    assert len(per_episode) == 40  # 20 exploration, then 20 test episodes
    pre, post = float(np.mean(per_episode[:20])), aggregate["test_return"]
    assert post == pytest.approx(np.mean(per_episode[20:]))
    floor = nop["metatest"]["aggregate"]["test_return"]
    spec = get_benchmark("PointGoal")
    config = RunConfig.from_json(maml["config"])
    untrained = build_algorithm(spec, config, None)  # as the run started
    untrained_post = make_evaluator(spec, 0).evaluate(untrained).test_return
    print(f"pre {pre:.2f} post {post:.2f}; nop {floor:.2f}; untrained {untrained_post:.2f}")
    assert post > pre + 8.0
    assert post > floor + 5.0
    assert post > untrained_post + 30.0
