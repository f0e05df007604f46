"""RL2-PPO iteration time with garage's components switched on, side by side.

Builds RL2-PPO on HalfCheetahVel with the baseline's settings (10 tasks x 4 episodes x horizon
100, width 64, 10 epochs) once per variant (the default critic + LSTM, the linear baseline, the
GRU, and garage's full combination with maximum-entropy rewards), then alternates single
iterations between them so all see the same machine load, and prints the best wall time of a
whole iteration and of its PPO update (advantages included) per variant.

    .venv/bin/python scripts/bench_rl2_components.py [--iterations 3]
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from typing import Any

import torch

import metabench  # noqa: F401 - registers the ids
from metabench.algos.rl2.rl2_ppo import RL2PPO, RL2PPOConfig
from metabench.harness.algorithms import get_algorithm
from metabench.harness.benchmarks import get_benchmark

VARIANTS: dict[str, dict[str, Any]] = {
    "lstm + critic (default)": {},
    "lstm + linear": {"value_baseline": "linear"},
    "gru + critic": {"recurrent_cell": "gru"},
    "gru + linear": {"recurrent_cell": "gru", "value_baseline": "linear"},
    "gru + linear + max entropy": {
        "recurrent_cell": "gru",
        "value_baseline": "linear",
        "entropy_method": "max",
    },
}


class _Timed:
    """Wraps ``RecurrentPPO.train`` to add up the time spent in PPO updates."""

    def __init__(self, algo: RL2PPO) -> None:
        self.seconds = 0.0
        self._train = algo.model.train
        algo.model.train = self  # type: ignore[method-assign]

    def __call__(self) -> None:
        start = time.perf_counter()
        self._train()
        self.seconds += time.perf_counter() - start


def build(options: dict[str, Any]) -> RL2PPO:
    spec = get_benchmark("HalfCheetahVel")
    config = RL2PPOConfig(**get_algorithm("rl2-ppo").hyperparameters(spec, {}))
    return RL2PPO(
        spec.env_id,
        config=dataclasses.replace(config, **options),
        seed=0,
        env_kwargs=spec.train_env_kwargs(0),
    )


def measure(iterations: int) -> dict[str, tuple[float, float]]:
    """Best (iteration, update) seconds per variant over ``iterations`` alternating rounds,
    after one warm-up iteration each."""
    algos = {name: build(options) for name, options in VARIANTS.items()}
    timers = {name: _Timed(algo) for name, algo in algos.items()}
    for algo in algos.values():
        algo.train(1)
    best = {name: (float("inf"), float("inf")) for name in algos}
    for _ in range(iterations):
        for name, algo in algos.items():
            timers[name].seconds = 0.0
            start = time.perf_counter()
            algo.train(1)
            total = time.perf_counter() - start
            best[name] = (min(best[name][0], total), min(best[name][1], timers[name].seconds))
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=3, help="timed rounds per variant")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    best = measure(args.iterations)
    print(f"RL2-PPO on HalfCheetahVel, 4000 env steps per iteration, {args.threads} torch")
    print(f"thread(s), best of {args.iterations} (seconds):")
    print(f"  {'variant':28s} {'iteration':>10s} {'update':>8s}")
    for name, (total, update) in best.items():
        print(f"  {name:28s} {total:10.2f} {update:8.2f}")


if __name__ == "__main__":
    main()
