"""RL2-PPO training speed: stock RecurrentPPO against whole-sequence LSTM training.

Trains the same RL2-PPO configuration (HalfCheetahVel, garage's example settings: 10 tasks x 4
episodes x horizon 100, LSTM 64, 10 epochs) with sb3-contrib's stock recurrent policy and with
metabench's WholeSequenceLstmPolicy, alternating iterations so both see the same machine load,
and prints environment steps per second of each and their ratio.

    .venv/bin/python scripts/bench_rl2_training.py [--iterations 3]
"""

from __future__ import annotations

import argparse
import time

import torch
from sb3_contrib.common.recurrent.policies import RecurrentActorCriticPolicy

import metabench  # noqa: F401 - registers the ids
from metabench.algos.rl2.policy import WholeSequenceLstmPolicy
from metabench.algos.rl2.rl2_ppo import RL2PPO, RL2PPOConfig
from metabench.harness.algorithms import get_algorithm
from metabench.harness.benchmarks import get_benchmark


def build(policy_class: type[RecurrentActorCriticPolicy]) -> RL2PPO:
    spec = get_benchmark("HalfCheetahVel")
    hyperparameters = get_algorithm("rl2-ppo").hyperparameters(spec, {})
    return RL2PPO(
        spec.env_id,
        config=RL2PPOConfig(**hyperparameters),
        seed=0,
        env_kwargs=spec.train_env_kwargs(0),
        policy_class=policy_class,
    )


def measure(iterations: int) -> dict[str, float]:
    """Environment steps per second of a full RL2-PPO iteration (rollout + training), best of
    ``iterations`` alternating rounds after one warm-up iteration each."""
    algos = {"stock": build(RecurrentActorCriticPolicy), "whole": build(WholeSequenceLstmPolicy)}
    for algo in algos.values():
        algo.train(1)  # warm-up: first-call allocations, env start
    best = {name: float("inf") for name in algos}
    for _ in range(iterations):
        for name, algo in algos.items():
            start = time.perf_counter()
            algo.train(1)
            best[name] = min(best[name], time.perf_counter() - start)
    steps = algos["stock"].steps_per_iteration
    return {name: steps / seconds for name, seconds in best.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=3, help="timed rounds per policy")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rates = measure(args.iterations)
    print(f"RL2-PPO on HalfCheetahVel, {args.threads} torch thread(s), best of {args.iterations}:")
    print(f"  stock RecurrentPPO:      {rates['stock']:8.0f} env steps/s")
    print(f"  whole-sequence training: {rates['whole']:8.0f} env steps/s")
    print(f"  speed-up: {rates['whole'] / rates['stock']:.2f}x (target >= 5x)")


if __name__ == "__main__":
    main()
