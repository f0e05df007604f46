"""The meta-test on training tasks after training (Meta-World's meta-train success per class)."""

from __future__ import annotations

import importlib.metadata
import json

import numpy as np
import pytest

from metabench.analysis.resultfile import read_result
from metabench.analysis.tables import per_task_success_markdown
from metabench.cli import main
from metabench.evaluation import task_from_json
from metabench.harness.benchmarks import get_benchmark
from metabench.tasks.metaworld.envs import MetaWorldTaskSampler

pytestmark = pytest.mark.metaworld

TINY_ML1 = """
description = "ML1 reach-v3, tiny"
source = "tests"
env_id = "metabench/ML1-v0"
horizon = 6
episodes_per_trial = 2
reports_success = true

[tasks]
env_name = "reach-v3"

[split]
kind = "metaworld"
benchmark = "ML1"
test_tasks = 2

[evaluation]
exploration_episodes = 1
test_episodes = 1
batched = true
train_tasks = 3
"""


def test_ml10_meta_train_tasks_are_one_per_training_class_and_fixed_by_the_seed():
    spec = get_benchmark("ML10")
    # seed 0's ML10 is built once per process and shared with the other tests (each seed's
    # takes Meta-World about 10 s)
    tasks = spec.train_evaluation_tasks(seed=0)
    train_classes = MetaWorldTaskSampler("ML10", split="train", seed=0).class_names
    assert sorted(task.env_name for task in tasks) == sorted(train_classes)
    assert [t.data for t in spec.train_evaluation_tasks(seed=0)] == [t.data for t in tasks]
    assert [t.data for t in spec.train_evaluation_tasks(seed=1)] != [t.data for t in tasks]


def test_a_run_meta_tests_its_recorded_training_tasks(tmp_path, user_specs):
    user_specs("envs/TinyML1.toml", TINY_ML1)
    out = tmp_path / "run"
    args = ["train", "--benchmark", "TinyML1", "--algorithm", "nop", "--steps", "1"]
    assert main([*args, "--out", str(out), "--cpus", "2"]) == 0
    result = json.loads((out / "result.json").read_text())
    recorded = [task_from_json(t) for t in result["config"]["train_evaluation_tasks"]]
    train_goals = MetaWorldTaskSampler("ML1", split="train", env_name="reach-v3", seed=0).tasks
    assert {t.data for t in recorded} <= {t.data for t in train_goals}  # training goals only
    evaluated = result["train_evaluation"]
    assert [t["task"] for t in evaluated["tasks"]] == result["config"]["train_evaluation_tasks"]
    assert evaluated["aggregate"]["n_env_steps"] == 3 * 2 * 6
    successes = [s for t in evaluated["tasks"] for s in t["episode_successes"][1:]]
    table = per_task_success_markdown([read_result(out / "result.json")], "train_evaluation")
    assert f"| reach-v3 | {np.mean(successes):.3f} |" in table
    # what changes the meta-test's numbers, Meta-World's version and reward function included
    assert result["metatest_protocol"] == {
        "n_test_tasks": 2,
        "n_run_test_tasks": 2,
        "exploration_episodes": 1,
        "test_episodes": 1,
        "deterministic_test": True,
        "metaworld": {
            "version": importlib.metadata.version("metaworld"),
            "benchmark": "ML1",
            "reward_function_version": "v2",
            "test_goals_per_class": None,
        },
    }


@pytest.mark.parametrize(
    ("algorithm", "overrides"),
    [
        ("maml-trpo", ["meta_batch_size=2", "episodes_per_task=1", "hidden_sizes=[8]"]),
        ("rl2-ppo", ["meta_batch_size=2", "hidden_size=8", "step_in_workers=true"]),
    ],
)
def test_trained_algorithms_meta_test_batched_on_meta_world(
    tmp_path, user_specs, algorithm, overrides
):
    """A trained MAML (one policy per task, adapted by a gradient step) and RL2 (one batched
    recurrent pass) both run the batched meta-test and the one on training tasks."""
    user_specs("envs/TinyML1.toml", TINY_ML1)
    out = tmp_path / "run"
    args = ["train", "--benchmark", "TinyML1", "--algorithm", algorithm, "--steps", "24"]
    sets = [arg for override in overrides for arg in ("--set", override)]
    assert main([*args, *sets, "--out", str(out), "--cpus", "2"]) == 0
    result = json.loads((out / "result.json").read_text())
    assert result["config"]["protocol"]["batched"] is True
    assert result["metatest_protocol"]["deterministic_test"] is False  # both sample
    for key, n_tasks in (("metatest", 2), ("train_evaluation", 3)):
        assert result[key]["aggregate"]["n_env_steps"] == n_tasks * 2 * 6
