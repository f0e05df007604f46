"""PEARL's gradient step against Stable-Baselines3's SAC step with the same networks and batch.

PEARL's update (the encoder, two Q-functions, V and its target, the policy) is SAC's with a
context encoder and a V-function added. This times one PEARL gradient step at its HalfCheetahVel
settings (16 tasks x 256 transitions, 3x300 networks, 3x200 encoder, latent 5) and one step of
SB3's ``SAC.train`` with the same 3x300 networks on a batch of the same 4,096 transitions of
HalfCheetah's shape (observation 20 + latent 5, action 6), interleaved in one run, on one torch
thread, and prints each time per step and the ratio (PEARL / SAC).

    .venv/bin/python scripts/bench_pearl_step.py [--rounds 5] [--steps 20]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3 import SAC

import metabench  # noqa: F401 - registers the ids
from metabench.algos.pearl import PEARL, PEARLConfig
from metabench.harness.timing import best_times

TASKS, BATCH = 16, 256
"""PEARL's meta-batch and per-task batch at its HalfCheetahVel settings."""


def make_pearl_steps(steps: int, seed: int = 0) -> Callable[[], None]:
    """``steps`` PEARL gradient steps on replay buffers filled once with initial-step data."""
    config = PEARLConfig(
        n_train_tasks=TASKS,
        num_initial_steps=BATCH + 100,  # enough for one batch and one context per task
        num_tasks_sample=1,
        num_steps_prior=100,
        num_extra_rl_steps_posterior=0,
        num_train_steps_per_itr=1,
        meta_batch_size=TASKS,
        batch_size=BATCH,
        update_threads=1,
    )
    algo = PEARL("metabench/HalfCheetahVel-v0", config=config, seed=seed)
    algo.train(1)  # fills every task's buffers
    rng = np.random.default_rng(seed)

    def run() -> None:
        for _ in range(steps):
            algo.gradient_step(rng.integers(TASKS, size=TASKS))

    return run


class _Shapes(gym.Env[np.ndarray, np.ndarray]):
    """An env of HalfCheetah-with-latent's shapes; SAC reads its spaces and resets it once."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (20 + 5,), np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, (6,), np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple:
        return np.zeros(25, dtype=np.float32), {}

    def step(self, action: np.ndarray) -> tuple:
        return np.zeros(25, dtype=np.float32), 0.0, False, False, {}


def make_sac_steps(steps: int, seed: int = 0) -> Callable[[], None]:
    """``steps`` of SB3's ``SAC.train`` on a replay buffer of random transitions."""
    sac = SAC(
        "MlpPolicy",
        _Shapes(),
        batch_size=TASKS * BATCH,
        buffer_size=2 * TASKS * BATCH,
        policy_kwargs={"net_arch": [300, 300, 300]},
        seed=seed,
        device="cpu",
    )
    rng = np.random.default_rng(seed)
    buffer = sac.replay_buffer
    assert buffer is not None
    for _ in range(2 * TASKS * BATCH):
        buffer.add(
            rng.normal(size=(1, 25)).astype(np.float32),
            rng.normal(size=(1, 25)).astype(np.float32),
            rng.uniform(-1, 1, size=(1, 6)).astype(np.float32),
            rng.normal(size=1).astype(np.float32),
            np.zeros(1, dtype=np.float32),
            [{}],
        )
    sac._setup_learn(total_timesteps=1)  # the logger train() records to

    def run() -> None:
        sac.train(gradient_steps=steps, batch_size=TASKS * BATCH)

    return run


def measure(rounds: int, steps: int) -> dict[str, float]:
    """Seconds per gradient step of each, best round of ``rounds`` interleaved."""
    times = best_times(
        {"pearl": make_pearl_steps(steps), "sb3 sac": make_sac_steps(steps)}, rounds=rounds
    )
    return {name: seconds / steps for name, seconds in times.items()}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (best counts)")
    parser.add_argument("--steps", type=int, default=20, help="gradient steps per round")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    per_step = measure(args.rounds, args.steps)
    ratio = per_step["pearl"] / per_step["sb3 sac"]
    print(
        f"gradient step, {TASKS} tasks x {BATCH} transitions, 3x300 networks, one thread, best "
        f"of {args.rounds} rounds of {args.steps}: PEARL {1e3 * per_step['pearl']:.1f} ms, "
        f"SB3 SAC {1e3 * per_step['sb3 sac']:.1f} ms; PEARL / SAC {ratio:.2f}"
    )


if __name__ == "__main__":
    main()
