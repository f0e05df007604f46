"""The meta-RL interface: train() returns dict[str, float] with documented keys."""

import json
import math

import pytest

from tests.factories import ROOT, TINY, build_tiny

BENCHMARK = {
    "rl2-ppo": "Bandit",
    "rl2-trpo": "Bandit",
    "nop": "Bandit",
    "cem": "HalfCheetahVel",
    "cmaes": "HalfCheetahVel",
}
"""Where each algorithm's iteration is shortest (PointGoal for the others)."""


@pytest.mark.parametrize("name", sorted(TINY))
def test_train_returns_numbers_keyed_metatrain(name):
    algo = build_tiny(name, BENCHMARK.get(name, "PointGoal"))
    stats = algo.train(1)
    assert isinstance(stats, dict)
    assert all(key.startswith("metatrain/") for key in stats)
    assert all(type(value) is float for value in stats.values())
    if name.startswith("rl2-"):
        assert {"metatrain/average_return", "metatrain/success_rate"} <= set(stats)
        if name == "rl2-trpo":
            assert {"metatrain/trpo_kl", "metatrain/trpo_accepted"} <= set(stats)
    elif name in ("oracle", "multitask"):
        returns = [value for key, value in stats.items() if "return" in key]
        assert returns and all(math.isfinite(value) for value in returns)
    elif name.startswith("maml-"):
        assert stats["metatrain/post_update_return"] == algo.history[-1].post_update_return
    elif name == "pearl":
        assert stats["metatrain/env_steps"] == algo.env_steps == 400  # 200 initial, 200 own
        assert {"metatrain/qf_loss", "metatrain/kl_divergence"} <= set(stats)
    else:
        assert stats == {}  # nothing is meta-trained
    if hasattr(algo, "close"):
        algo.close()


def test_maml_train_gives_the_metatrain_keys_committed_results_hold():
    committed = ROOT / "results" / "HalfCheetahVel" / "maml-trpo-seed0"
    if not (committed / "result.json").exists():
        pytest.skip("no committed MAML-TRPO result")
    keys = set(json.loads((committed / "result.json").read_text())["metatrain"])
    algo = build_tiny("maml-trpo", "PointGoal")
    try:
        assert set(algo.train(1)) == keys
    finally:
        algo.close()


def test_a_run_derives_its_test_tasks_once(tmp_path, monkeypatch):
    from metabench.harness.benchmarks import BenchmarkSpec
    from metabench.harness.run import RunSettings, plan_run
    from metabench.harness.training import train

    calls = []
    original = BenchmarkSpec.test_tasks

    def counted(self, seed):
        calls.append(seed)
        return original(self, seed)

    monkeypatch.setattr(BenchmarkSpec, "test_tasks", counted)
    plan = plan_run(RunSettings("Bandit", "nop", 3, 1, tmp_path / "plan"))
    assert len(calls) == 1
    assert list(plan.test_tasks) == plan.evaluator().test_tasks
    assert list(plan.config.test_tasks) == list(plan.test_tasks)
    calls.clear()
    train(RunSettings("Bandit", "nop", 3, 1, tmp_path / "run"))
    assert calls == [3]
