"""Every stored version of the records reads as the current one, written by hand as each version
wrote it."""

from __future__ import annotations

import copy
import dataclasses
import json
from typing import Any

import pytest

from metabench.evaluation import TaskResult
from metabench.records import (
    FORMAT,
    VERSION,
    EvaluationRecord,
    MetaTestRecord,
    Protocol,
    RecordVersionError,
    RunConfig,
    RunResult,
    migrate,
)
from metabench.records.migrations import MIGRATIONS

TASK = {"goal": [0.5, -0.5]}


def metatest_v1() -> dict[str, Any]:
    """A meta-test as version 1 wrote it: two episodes, the first one exploring."""
    return {
        "format": FORMAT,
        "version": 1,
        "algorithm": "rl2",
        "env": "PointGoal",
        "n_exploration_eps": 1,
        "n_test_episodes": 1,
        "seed": 4,
        "tasks": [
            {
                "task_index": 0,
                "task": TASK,
                "n_exploration_eps": 1,
                "episode_returns": [-3.0, -1.5],
                "episode_lengths": [10, 10],
                "episode_successes": [False, True],
                "test_return": -1.5,
                "test_success": True,
            }
        ],
        "aggregate": {"test_return": -1.5},
    }


def metatest_v2() -> dict[str, Any]:
    """The same meta-test as version 2 wrote it (the episode counts renamed)."""
    record = metatest_v1()
    for part in (record, record["tasks"][0]):
        part["exploration_episodes"] = part.pop("n_exploration_eps")
    record["test_episodes"] = record.pop("n_test_episodes")
    record["version"] = 2
    return record


EXPECTED_METATEST = MetaTestRecord(
    algorithm="rl2",
    env="PointGoal",
    exploration_episodes=1,
    test_episodes=1,
    seed=4,
    tasks=(TaskResult(0, TASK, 1, [-3.0, -1.5], [10, 10], [False, True]),),
)


def config_v2(**protocol: Any) -> dict[str, Any]:
    """A ``config.json`` as version 2 wrote it: no version, the keys set only where a run had
    them left out."""
    return {
        "benchmark": "PointGoal",
        "benchmark_source": "metabench's toy",
        "env_id": "metabench/PointGoal-v0",
        "env_kwargs": {"horizon": 10},
        "algorithm": "rl2",
        "hyperparameters": {"lr": 0.001},
        "hyperparameter_sources": ["a paper"],
        "seed": 4,
        "env_steps_budget": 1000,
        "protocol": {"exploration_episodes": 1, "test_episodes": 1, **protocol},
        "test_tasks": [TASK],
    }


EXPECTED_CONFIG = RunConfig(
    benchmark="PointGoal",
    benchmark_source="metabench's toy",
    env_id="metabench/PointGoal-v0",
    env_kwargs={"horizon": 10},
    algorithm="rl2",
    hyperparameters={"lr": 0.001},
    hyperparameter_sources=["a paper"],
    seed=4,
    env_steps_budget=1000,
    protocol=Protocol(exploration_episodes=1, test_episodes=1, batched=False),
    test_tasks=(TASK,),
    periodic_test_tasks=None,
    train_evaluation_tasks=None,
    cpus=None,
    device="cpu",
    algorithm_spec=None,
)


def test_one_migration_per_version_step() -> None:
    assert VERSION == 5 and len(MIGRATIONS) == VERSION - 1


def test_a_meta_test_of_each_version_reads_as_the_same_record() -> None:
    v1 = metatest_v1()
    kept = copy.deepcopy(v1)
    assert MetaTestRecord.from_json(v1) == EXPECTED_METATEST
    assert v1 == kept  # the stored form is left as it was
    assert MetaTestRecord.from_json(metatest_v2()) == EXPECTED_METATEST
    current = EXPECTED_METATEST.to_json()
    assert current["version"] == VERSION
    assert MetaTestRecord.from_json(json.loads(json.dumps(current))) == EXPECTED_METATEST


def test_the_current_form_records_every_field() -> None:
    current = EXPECTED_METATEST.to_json()
    assert current["metaworld_envs_per_class"] is None
    task = current["tasks"][0]
    assert task["episode_success_steps"] is None and task["episode_returns_to_success"] is None
    config = EXPECTED_CONFIG.to_json()
    assert config["protocol"] == {"exploration_episodes": 1, "test_episodes": 1, "batched": False}
    unset = ("periodic_test_tasks", "train_evaluation_tasks", "cpus", "algorithm_spec")
    assert all(config[key] is None for key in unset) and config["device"] == "cpu"
    assert config["version"] == VERSION


def test_a_config_of_each_version_reads_as_the_same_config() -> None:
    v1 = config_v2()
    v1["protocol"] = {"n_exploration_eps": 1, "n_test_episodes": 1}
    assert RunConfig.from_json(v1) == EXPECTED_CONFIG
    assert RunConfig.from_json(config_v2()) == EXPECTED_CONFIG
    batched = RunConfig.from_json({**config_v2(batched=True), "cpus": 2, "device": "cuda:0"})
    assert batched.protocol.batched and (batched.cpus, batched.device) == (2, "cuda:0")
    assert RunConfig.from_json(EXPECTED_CONFIG.to_json()) == EXPECTED_CONFIG


def test_a_result_and_an_evaluation_of_each_version_read_as_the_same_records() -> None:
    v1_config = config_v2()
    v1_config["protocol"] = {"n_exploration_eps": 1, "n_test_episodes": 1}
    stored = {
        "config": v1_config,
        "command": "metabench train ...",
        "provenance": {"python": "3.11"},
        "iterations": 2,
        "env_steps": 1000,
        "wall_time_s": 5,
        "metatrain": {"metatrain/average_return": -2.0},
        "metatest": metatest_v1(),
        "train_evaluation": metatest_v1(),
    }
    expected = RunResult(
        config=EXPECTED_CONFIG,
        command="metabench train ...",
        provenance={"python": "3.11"},
        iterations=2,
        env_steps=1000,
        wall_time_s=5.0,
        metatrain={"metatrain/average_return": -2.0},
        metatest=EXPECTED_METATEST,
        metatest_protocol=None,
        train_evaluation=EXPECTED_METATEST,
    )
    assert RunResult.from_json(stored) == expected
    v2 = {**stored, "config": config_v2(), "metatest": metatest_v2(), "metatest_protocol": {}}
    del v2["train_evaluation"]
    assert RunResult.from_json(v2) == RunResult(
        **{**vars(expected), "metatest_protocol": {}, "train_evaluation": None}
    )
    assert RunResult.from_json(json.loads(json.dumps(expected.to_json()))) == expected
    periodic = {"iteration": 3, "env_steps": 300, "test_task_indices": [0], **metatest_v1()}
    assert EvaluationRecord.from_json(periodic) == EvaluationRecord(
        EXPECTED_METATEST, iteration=3, env_steps=300, test_task_indices=(0,)
    )


def test_versions_it_cannot_read_are_refused_with_the_fix() -> None:
    with pytest.raises(ValueError, match="format"):
        MetaTestRecord.from_json({"format": "something else"})
    newer = {**EXPECTED_METATEST.to_json(), "version": VERSION + 1}
    with pytest.raises(RecordVersionError) as raised:
        MetaTestRecord.from_json(newer)
    assert str(raised.value) == (
        f"metatest record version {VERSION + 1} is newer than this metabench reads (versions 1 "
        f"to {VERSION}): upgrade metabench to read it"
    )
    for version in (0, "1", None):
        with pytest.raises(RecordVersionError, match=f"version {version!r} is not one metabench"):
            migrate({**metatest_v1(), "version": version}, "metatest")


def test_rl2_options_named_processes_take_their_version_4_names() -> None:
    """Version 3's RL2 options ``processes`` and ``update_processes`` (true/false) read as
    ``step_in_workers`` and ``update_in_workers``; a third-party algorithm's keep their names."""
    v3 = {
        **EXPECTED_CONFIG.to_json(),
        "version": 3,
        "hyperparameters": {"lr": 0.001, "processes": True, "update_processes": False},
    }
    kept = copy.deepcopy(v3)
    config = RunConfig.from_json(v3)
    assert v3 == kept
    assert config.hyperparameters == {
        "lr": 0.001,
        "step_in_workers": True,
        "update_in_workers": False,
    }
    assert RunConfig.from_json(config.to_json()) == config
    result = RunResult.from_json(
        {
            **RunResult(
                config=EXPECTED_CONFIG, command="c", provenance={}, iterations=1, env_steps=10,
                wall_time_s=1.0, metatrain={}, metatest=EXPECTED_METATEST,
                metatest_protocol=None, train_evaluation=None,
            ).to_json(),
            "version": 3,
            "config": v3,
        }
    )  # fmt: skip
    assert result.config == config
    plugin = {**v3, "algorithm_spec": {"entry_point": "mine:ALGO"}}
    assert RunConfig.from_json(plugin).hyperparameters == v3["hyperparameters"]


def test_a_result_of_version_4_has_no_count_of_the_steps_taken() -> None:
    """Version 5 records ``env_steps_taken``; a version-4 result reads with ``None`` (not
    counted), and a count written reads back."""
    counted = RunResult(
        config=EXPECTED_CONFIG, command="c", provenance={}, iterations=1, env_steps=10,
        wall_time_s=1.0, metatrain={}, metatest=EXPECTED_METATEST, env_steps_taken=7,
    )  # fmt: skip
    current = json.loads(json.dumps(counted.to_json()))
    assert current["version"] == VERSION and current["env_steps_taken"] == 7
    assert RunResult.from_json(current) == counted
    v4 = {**current, "version": 4, "config": {**current["config"], "version": 4}}
    del v4["env_steps_taken"]
    kept = copy.deepcopy(v4)
    assert RunResult.from_json(v4) == dataclasses.replace(counted, env_steps_taken=None)
    assert v4 == kept
