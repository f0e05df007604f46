"""ML10 speed: RL2-PPO and MAML-TRPO throughput against Meta-World's env-only step rate on every
core, and the batched meta-test against the sequential one, side by side in one run
(``scripts/bench_ml10.py``; shortened iterations, see there).

Measured on an idle 2-core machine (``docs/speed.md``): RL2-PPO about 0.3 of the env-only rate,
MAML-TRPO about 0.1 with one episode per task (its TRPO step through the inner adaptation of a
2x512 policy is most of an iteration), the batched meta-test about 1.7-2.3x the sequential one.
The floors below guard against regressions on a shared machine. Run with ``make bench``.
"""

from __future__ import annotations

import pytest

from scripts.bench_ml10 import RL2_EPISODES, lean_step_ratio, measure, split_update_ratio
from scripts.bench_rl2_chunked_update import update_times

pytestmark = [pytest.mark.benchmark, pytest.mark.metaworld]


def test_ml10_throughput_ratios(record_ratio):
    rates = measure(rounds=2)
    rl2 = rates["rl2"] / rates["env_only"]
    maml = rates["maml"] / rates["env_only"]
    batched = rates["metatest_batched"] / rates["metatest_sequential"]
    print(
        f"\nML10 env steps/s: env-only on every core {rates['env_only']:.0f}, RL2-PPO "
        f"{rates['rl2']:.0f} ({rl2:.3f} of it), MAML-TRPO {rates['maml']:.0f} ({maml:.3f}); "
        f"meta-test sequential {rates['metatest_sequential']:.0f}, batched "
        f"{rates['metatest_batched']:.0f} ({batched:.2f}x)"
    )
    assert rl2 >= 0.15
    assert maml >= 0.05
    assert batched >= 1.3
    record_ratio("ml10_rl2_vs_env_only", rl2, True)
    record_ratio("ml10_maml_vs_env_only", maml, True)
    record_ratio("ml10_metatest_batched_vs_sequential", batched, True)


def test_metaworld_lean_step_ratio(record_ratio):
    """metabench's lean Meta-World step against Meta-World's own, env-only on every core,
    interleaved rounds (about 1.6x on the ML10 training classes, ``docs/speed.md``)."""
    ratio = lean_step_ratio(rounds=3)
    print(f"\nlean / Meta-World env-only step rate on every core: {ratio:.2f}x")
    assert ratio >= 1.2
    record_ratio("metaworld_lean_step_vs_metaworld", ratio, True)


def test_rl2_split_update_ratio(record_ratio):
    """RL2-PPO's ML10 update split over the env worker (update_in_workers) against one process,
    on the same rollout, interleaved (about 1.35x on 2 cores)."""
    ratio = split_update_ratio(rounds=2)
    print(f"\nRL2-PPO ML10 update, split over 2 processes / one process: {ratio:.2f}x")
    assert ratio >= 1.1
    record_ratio("ml10_rl2_split_update_vs_one_process", ratio, True)


def test_rl2_chunked_update_ratio(record_ratio):
    """Meta-World+'s chunked RL2-PPO update (rl2-ppo-chunked) against the whole-trial one
    (rl2-ppo) on the same shortened rollout, interleaved (2 episodes per trial: 4 chunks)."""
    ratio = update_times(episodes=RL2_EPISODES, repeats=2).ratio
    print(f"\nRL2-PPO ML10 update, whole-trial / chunked: {ratio:.2f}x")
    assert ratio >= 1.1
    record_ratio("ml10_rl2_chunked_update_vs_whole_trial", ratio, True)


def test_rl2_split_chunked_update_ratio(record_ratio):
    """rl2-ppo-metaworld's chunked update split over the env worker (update_in_workers with
    chunk_length) against one process, on the same shortened rollout, interleaved (1.53-1.55x
    shortened, 1.42x at full size, on idle 2 cores, ``docs/speed.md``)."""
    ratio = update_times(episodes=RL2_EPISODES, repeats=2, split=True).ratio
    print(f"\nrl2-ppo-metaworld ML10 chunked update, one process / split over 2: {ratio:.2f}x")
    assert ratio >= 1.1
    record_ratio("ml10_rl2_split_chunked_update_vs_one_process", ratio, True)
