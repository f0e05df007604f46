"""The meta-RL interface: train() returns dict[str, float] with documented keys."""

import json
from pathlib import Path

import pytest

from metabench.algos.registry import get_algorithm
from metabench.harness.benchmarks import get_benchmark

SMALL = {
    "rl2-ppo": ("Bandit", {"meta_batch_size": 2, "hidden_size": 8, "n_epochs": 1}),
    "maml-trpo": ("PointGoal", {"meta_batch_size": 2, "episodes_per_task": 2, "hidden_sizes": [8]}),
    "nop": ("Bandit", {}),
    "cem": ("HalfCheetahVel", {}),
    "cmaes": ("HalfCheetahVel", {}),
}


@pytest.mark.parametrize("name", sorted(SMALL))
def test_train_returns_numbers_keyed_metatrain(name):
    benchmark, overrides = SMALL[name]
    spec = get_benchmark(benchmark)
    entry = get_algorithm(name)
    algo = entry.build(spec, 0, entry.hyperparameters(spec, overrides), None)
    stats = algo.train(1)
    assert isinstance(stats, dict)
    assert all(key.startswith("metatrain/") for key in stats)
    assert all(type(value) is float for value in stats.values())
    if name == "rl2-ppo":
        assert {"metatrain/average_return", "metatrain/success_rate"} <= set(stats)
    elif name == "maml-trpo":
        assert stats["metatrain/post_update_return"] == algo.history[-1].post_update_return
    else:
        assert stats == {}  # nothing is meta-trained
    if hasattr(algo, "close"):
        algo.close()


def test_maml_train_gives_the_metatrain_keys_committed_results_hold():
    committed = Path(__file__).parents[1] / "results" / "HalfCheetahVel" / "maml-trpo-seed0"
    if not (committed / "result.json").exists():
        pytest.skip("no committed MAML-TRPO result")
    keys = set(json.loads((committed / "result.json").read_text())["metatrain"])
    spec = get_benchmark("PointGoal")
    entry = get_algorithm("maml-trpo")
    algo = entry.build(spec, 0, entry.hyperparameters(spec, SMALL["maml-trpo"][1]), None)
    try:
        assert set(algo.train(1)) == keys
    finally:
        algo.close()
