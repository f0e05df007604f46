"""Every record under ``results/``: read through the migrations, written back the same, and its
meta-tests' numbers, computed from their episodes, equal to the aggregates stored beside them
(recomputed here with numpy, independently). The unfinished runs resume: the configuration their
recorded command resolves to today equals the one they stored."""

from __future__ import annotations

import json
import math
import shlex
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from metabench.records import VERSION, EvaluationRecord, MetaTestRecord, RunConfig, RunResult
from tests.factories import ROOT

RESULTS = ROOT / "results"
RESULT_FILES = sorted(RESULTS.rglob("result.json"))
CONFIG_FILES = sorted(RESULTS.rglob("config.json"))
EVALUATION_FILES = sorted(RESULTS.rglob("evaluations/*.json"))


def name(path: Path) -> str:
    return str(path.relative_to(RESULTS))


def same(computed: float | None, stored: Any) -> bool:
    """JSON writes NaN as null."""
    if stored is None:
        return computed is None or math.isnan(computed)
    return computed == stored


def numpy_aggregate(stored: dict[str, Any]) -> dict[str, Any]:
    """A stored meta-test's numbers, recomputed from its episodes with numpy."""
    explore = stored.get("exploration_episodes", stored.get("n_exploration_eps"))
    returns = np.array([task["episode_returns"] for task in stored["tasks"]], dtype=np.float64)
    numbers: dict[str, Any] = {
        "test_return": returns[:, explore:].mean(axis=1).mean(),
        "return_per_episode": returns.mean(axis=0),
        "n_env_steps": sum(sum(task["episode_lengths"]) for task in stored["tasks"]),
        "n_tasks": len(stored["tasks"]),
    }
    flags = [t["episode_successes"] for t in stored["tasks"] if t["episode_successes"] is not None]
    if flags:
        successes = np.array(flags, dtype=np.float64)
        numbers["success_rate_per_episode"] = successes.mean(axis=0)
        numbers["test_success_rate"] = successes[:, explore:].max(axis=1).mean()
        numbers["test_episode_success_rate"] = successes[:, explore:].mean()
    return numbers


def check_metatest(record: MetaTestRecord, stored: dict[str, Any]) -> None:
    aggregate = stored["aggregate"]
    # the stored numbers are those numpy recomputes from the stored episodes
    for key, value in numpy_aggregate(stored).items():
        assert aggregate[key] is not None and np.allclose(aggregate[key], value, rtol=1e-12), key
    # and the record computes exactly the stored numbers from its episodes
    assert same(record.test_return, aggregate["test_return"])
    assert record.return_per_episode == aggregate["return_per_episode"]
    assert record.success_rate_per_episode == aggregate["success_rate_per_episode"]
    assert record.result.n_env_steps == aggregate["n_env_steps"]
    assert record.n_tasks == aggregate["n_tasks"]
    success = record.success
    if success is None:
        assert aggregate["test_success_rate"] is None
        assert aggregate["test_episode_success_rate"] is None
        return
    assert success.task_rate == aggregate["test_success_rate"]
    assert success.episode_rate == aggregate["test_episode_success_rate"]
    if "metaworld_success_rate" in aggregate:
        assert success.metaworld is not None
        assert success.metaworld.success_rate == aggregate["metaworld_success_rate"]
        assert success.metaworld.mean_return == aggregate["metaworld_return"]
        per_class = aggregate["metaworld_success_rate_per_class"]
        assert success.metaworld.success_rate_per_class == per_class
    else:
        assert success.metaworld is None


def test_results_hold_every_kind_of_file() -> None:
    assert len(RESULT_FILES) > 50 and len(CONFIG_FILES) > 50 and len(EVALUATION_FILES) > 100
    versions = {json.loads(path.read_text())["metatest"]["version"] for path in RESULT_FILES}
    assert {1, 2} <= versions  # the earlier versions are read below


@pytest.mark.parametrize("path", RESULT_FILES, ids=name)
def test_a_result_reads_computes_its_aggregates_and_writes_back_the_same(path: Path) -> None:
    stored = json.loads(path.read_text())
    result = RunResult.from_json(stored)
    assert RunResult.from_json(json.loads(json.dumps(result.to_json()))) == result
    check_metatest(result.metatest, stored["metatest"])
    if result.train_evaluation is not None:
        check_metatest(result.train_evaluation, stored["train_evaluation"])
    assert result.config.seed == stored["config"]["seed"]
    assert result.env_steps == stored["env_steps"]
    assert result.metatest_protocol == stored.get("metatest_protocol")


@pytest.mark.parametrize("path", CONFIG_FILES, ids=name)
def test_a_config_reads_and_writes_back_the_same(path: Path) -> None:
    stored = json.loads(path.read_text())
    config = RunConfig.from_json(stored)
    assert RunConfig.from_json(json.loads(json.dumps(config.to_json()))) == config
    written = config.to_json()
    # what the file holds is kept, under the current names (RL2's options: version 4's, by a
    # rename written out here); what it left out has its version-2 meaning
    names = {"processes": "step_in_workers", "update_processes": "update_in_workers"}
    for key, value in stored.items():
        if key == "hyperparameters":
            value = {names.get(option, option): setting for option, setting in value.items()}
        if key not in ("protocol", "version"):
            assert written[key] == value, key
    assert written["version"] == VERSION
    assert written["protocol"]["batched"] == stored["protocol"].get("batched", False)
    assert written["cpus"] == stored.get("cpus") and written["device"] == stored.get(
        "device", "cpu"
    )


@pytest.mark.parametrize("path", EVALUATION_FILES, ids=name)
def test_an_evaluation_reads_computes_its_aggregates_and_writes_back_the_same(path: Path) -> None:
    stored = json.loads(path.read_text())
    record = EvaluationRecord.from_json(stored)
    assert EvaluationRecord.from_json(json.loads(json.dumps(record.to_json()))) == record
    check_metatest(record.metatest, stored)
    assert record.iteration == stored["iteration"] and record.env_steps == stored.get("env_steps")


UNFINISHED = sorted(
    path.parent
    for path in RESULTS.rglob("checkpoint.pt")
    if not (path.parent / "result.json").exists()
)


@pytest.mark.parametrize("run", UNFINISHED, ids=name)
def test_an_unfinished_run_resolves_to_its_stored_config(run: Path) -> None:
    """``metabench train`` resumes it only if its recorded command resolves to the configuration
    it stored (:meth:`~metabench.harness.run.RunDirectory.claim`)."""
    import torch

    from metabench.cli import build_parser
    from metabench.harness.run import RunDirectory, RunSettings, resolve

    try:  # a run training beside the tests may have finished since they were collected
        state = torch.load(run / "checkpoint.pt", map_location="cpu", weights_only=True)
    except FileNotFoundError:
        pytest.skip(f"{run} has finished")
    words = shlex.split(state["command"])
    args = build_parser().parse_args(words[words.index("metabench") + 1 :])
    assert args.command == "train" and Path(args.out) == run.relative_to(ROOT)
    settings = RunSettings(
        benchmark=args.benchmark,
        algorithm=args.algorithm,
        seed=args.seed,
        env_steps=args.steps,
        out=run,
        hyperparameters=dict(args.overrides),
        cpus=args.cpus,
        device=args.device,
    )
    _, config = resolve(settings)
    assert RunDirectory(run).read_config() == config


def as_version_2(config: dict[str, Any]) -> dict[str, Any]:
    """A configuration as version 2 wrote it: no version, the keys it recorded only when set
    left out where unset."""
    unset = {"periodic_test_tasks": None, "train_evaluation_tasks": None, "cpus": None}
    unset |= {"device": "cpu", "algorithm_spec": None}
    old = {k: v for k, v in config.items() if k != "version" and unset.get(k, k) != v}
    old["protocol"] = {k: v for k, v in config["protocol"].items() if (k, v) != ("batched", False)}
    return old


@pytest.mark.parametrize(
    ("suite", "algorithm", "seed", "steps", "cpus"),
    [("ML10", "maml-trpo", 1, 20_000_000, 2), ("HalfCheetahVel", "rl2-ppo", 0, 1000, None)],
)
def test_a_run_started_by_version_2_resumes(
    suite: str, algorithm: str, seed: int, steps: int, cpus: int | None, tmp_path: Path
) -> None:
    """A run directory whose ``config.json`` the previous version wrote (ML10's maml-trpo seed 1
    among them) is claimed by the same command today, its file left as it was."""
    from metabench.harness.run import RunDirectory, RunSettings, resolve

    settings = RunSettings(suite, algorithm, seed, steps, tmp_path, cpus=cpus)
    _, config = resolve(settings)
    old = as_version_2(config.to_json())
    assert "version" not in old and "device" not in old
    run = RunDirectory(tmp_path)
    run.config_path.write_text(json.dumps(old))
    assert run.claim(config) is None
    assert json.loads(run.config_path.read_text()) == old
