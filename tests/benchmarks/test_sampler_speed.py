"""MAML sampler speed: HalfCheetahVectorEnv with a batched policy vs raw ``mujoco.rollout``.

Target (issue "MAML-TRPO sampler near raw MuJoCo speed"): for the MAML HalfCheetahVel batch of
800 cheetahs (40 tasks x 20 episodes), the vector env stepped by a batched torch policy reaches at
least 75% of the cheetah-steps/s of raw open-loop ``mujoco.rollout`` (one call of 5 substeps per
env step, all cores, persistent thread pool), measured side by side in one run. A short horizon
keeps the check to a few seconds; ``scripts/bench_sampler.py`` measures the full horizon, the
rollout backend and SyncVectorEnv too. Run with ``make bench``.
"""

from __future__ import annotations

import pytest
import torch

from scripts.bench_sampler import RAW, make_contenders, measure, vector_name

pytestmark = [pytest.mark.benchmark, pytest.mark.mujoco]

NUM_ENVS = 800  # 40 tasks x 20 episodes: keep the MAML batch, shorten the episodes
HORIZON, ROUNDS = 20, 15


@pytest.mark.parametrize("kind", ["raw", "vector"])
def test_sampler_batch(benchmark, kind):
    contenders, close = make_contenders(NUM_ENVS, HORIZON, sync=False, long_rollout=False)
    name = RAW if kind == "raw" else vector_name("exact")
    benchmark.group = f"{NUM_ENVS} HalfCheetahVel x {HORIZON} steps"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        benchmark(contenders[name])
    finally:
        torch.set_num_threads(threads)
        close()


def test_vector_env_reaches_75_percent_of_raw_rollout(record_ratio):
    rates = measure(NUM_ENVS, HORIZON, ROUNDS, sync=False, long_rollout=False)
    vector = rates[vector_name("exact")]
    ratio = vector / rates[RAW]
    print(
        f"\n{NUM_ENVS} HalfCheetahVel x {HORIZON} steps, all cores, best of {ROUNDS}: raw "
        f"mujoco.rollout {rates[RAW]:,.0f} cheetah-steps/s, HalfCheetahVectorEnv + policy "
        f"{vector:,.0f}; ratio {ratio:.2f} (target >= 0.75)"
    )
    assert ratio >= 0.75
    record_ratio("halfcheetah_sampler_vs_raw_rollout", ratio, True)
