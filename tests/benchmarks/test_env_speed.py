"""Env step speed: raw MuJoCo, the HalfCheetahVel task env, and the RL2 + Trial wrapped step.

Targets (issue "environment layer"): the task env within 2x of raw ``mj_step`` with frame skip 5,
and RL2Env + Trial adding at most 10% over the task env. Run with ``make bench``.
"""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from metabench.tasks.halfcheetah.envs import HalfCheetahVelEnv
from metabench.wrappers import RL2Env, Trial

pytestmark = [pytest.mark.benchmark, pytest.mark.mujoco]

STEPS = 2000
RATIO_STEPS, RATIO_ROUNDS = 250, 40  # short rounds: some of them escape the machine's noise
NO_END = 10**9  # no episode end inside a timing loop


def make_steppers(steps: int = STEPS) -> dict[str, object]:
    action = np.full(6, 0.1, dtype=np.float32)
    task_env = HalfCheetahVelEnv(horizon=NO_END)
    task_env.reset(seed=0)
    wrapped = RL2Env(Trial(HalfCheetahVelEnv(horizon=NO_END), episodes_per_trial=1))
    wrapped.reset(seed=0)
    model = task_env.model
    data = mujoco.MjData(model)

    def raw_mj_step() -> None:
        for _ in range(steps):
            data.ctrl[:] = action
            mujoco.mj_step(model, data, nstep=5)

    def task_env_step() -> None:
        for _ in range(steps):
            task_env.step(action)

    def rl2_trial_step() -> None:
        for _ in range(steps):
            wrapped.step(action)

    return {"raw_mj_step": raw_mj_step, "task_env": task_env_step, "rl2_trial": rl2_trial_step}


@pytest.mark.parametrize("kind", ["raw_mj_step", "task_env", "rl2_trial"])
def test_halfcheetah_step(benchmark, kind):
    benchmark.group = f"HalfCheetahVel, {STEPS} steps"
    benchmark(make_steppers()[kind])


def test_halfcheetah_step_ratios(side_by_side, record_ratio):
    best = side_by_side(make_steppers(RATIO_STEPS), rounds=RATIO_ROUNDS)
    env_vs_raw = best["task_env"] / best["raw_mj_step"]
    wrapper_overhead = best["rl2_trial"] / best["task_env"] - 1.0
    per_step = {name: 1e6 * t / RATIO_STEPS for name, t in best.items()}
    print(
        f"\nHalfCheetahVel step (best of {RATIO_ROUNDS} interleaved rounds of "
        f"{RATIO_STEPS} steps): raw mj_step x5 {per_step['raw_mj_step']:.1f} us, "
        f"task env {per_step['task_env']:.1f} us, RL2+Trial {per_step['rl2_trial']:.1f} us\n"
        f"task env / raw mj_step = {env_vs_raw:.2f} (target <= 2.0); "
        f"RL2+Trial overhead over task env = {100 * wrapper_overhead:.1f}% (target <= 10%)"
    )
    assert env_vs_raw <= 2.0
    assert wrapper_overhead <= 0.10
    record_ratio("halfcheetah_task_env_vs_raw_mj_step", env_vs_raw, False)
    record_ratio("rl2_trial_vs_task_env_step", 1.0 + wrapper_overhead, False)
