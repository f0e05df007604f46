"""MAML sampler speed: HalfCheetahVectorEnv with a batched policy vs raw ``mujoco.rollout``.

Target (issue "MAML-TRPO sampler near raw MuJoCo speed"): for the MAML HalfCheetahVel batch of
800 cheetahs (40 tasks x 20 episodes), the vector env stepped by a batched torch policy reaches at
least 75% of the cheetah-steps/s of raw open-loop ``mujoco.rollout`` (one call of 5 substeps per
env step, all cores, persistent thread pool). A short horizon keeps the check to a few seconds;
``scripts/bench_sampler.py`` measures the full horizon and SyncVectorEnv too. Run with
``make bench``.
"""

from __future__ import annotations

import os

import mujoco
import numpy as np
import pytest
import torch
from mujoco import rollout

from metabench.vector.halfcheetah import HalfCheetahVelVectorEnv

pytestmark = [pytest.mark.benchmark, pytest.mark.mujoco]

NUM_ENVS = 800  # 40 tasks x 20 episodes
HORIZON, ROUNDS = 20, 9
FRAME_SKIP = 5
NTHREAD = os.cpu_count() or 1


@pytest.fixture
def one_torch_thread():
    """The policy runs on one torch thread: idle torch threads spin on the cores MuJoCo needs."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def make_samplers(backend: str = "exact") -> dict[str, object]:
    torch.manual_seed(0)
    policy = torch.nn.Sequential(
        torch.nn.Linear(20, 100),
        torch.nn.Tanh(),
        torch.nn.Linear(100, 100),
        torch.nn.Tanh(),
        torch.nn.Linear(100, 6),
    )
    venv = HalfCheetahVelVectorEnv(NUM_ENVS, horizon=HORIZON, nthread=NTHREAD, backend=backend)  # type: ignore[arg-type]
    venv.reset(seed=0)
    qpos, qvel = venv.get_states()
    model = venv.model
    initial = np.zeros((NUM_ENVS, mujoco.mj_stateSize(model, mujoco.mjtState.mjSTATE_FULLPHYSICS)))
    initial[:, 1:] = np.concatenate((qpos, qvel), axis=1)  # time, qpos, qvel
    rng = np.random.default_rng(0)
    controls = np.repeat(rng.standard_normal((HORIZON, NUM_ENVS, 1, model.nu)), FRAME_SKIP, axis=2)
    pool = rollout.Rollout(nthread=NTHREAD if NTHREAD > 1 else 0)
    datas = [mujoco.MjData(model) for _ in range(NTHREAD)]
    models = [model] * NUM_ENVS
    states = np.empty((NUM_ENVS, FRAME_SKIP, initial.shape[1]))

    def raw_rollout() -> None:
        state = initial.copy()
        for t in range(HORIZON):
            pool.rollout(models, datas, state, controls[t], skip_checks=True,
                         control_spec=int(mujoco.mjtState.mjSTATE_CTRL), nstep=FRAME_SKIP,
                         state=states)  # fmt: skip
            state[:] = states[:, -1]

    def vector_env() -> None:
        obs, _ = venv.reset()
        with torch.no_grad():
            for _ in range(HORIZON):
                mean = policy(torch.as_tensor(obs, dtype=torch.float32))
                obs, *_ = venv.step((mean + torch.randn_like(mean)).numpy())

    return {"raw_rollout": raw_rollout, "vector_env": vector_env}


@pytest.mark.parametrize("kind", ["raw_rollout", "vector_env"])
def test_sampler_batch(benchmark, kind, one_torch_thread):
    benchmark.group = f"{NUM_ENVS} HalfCheetahVel x {HORIZON} steps"
    benchmark(make_samplers()[kind])


@pytest.mark.parametrize("backend", ["exact", "rollout"])
def test_vector_env_reaches_75_percent_of_raw_rollout(side_by_side, one_torch_thread, backend):
    best = side_by_side(make_samplers(backend), rounds=ROUNDS)
    steps = NUM_ENVS * HORIZON
    ratio = best["raw_rollout"] / best["vector_env"]
    print(
        f"\n{NUM_ENVS} HalfCheetahVel x {HORIZON} steps on {NTHREAD} cores (best of {ROUNDS}): "
        f"raw mujoco.rollout {steps / best['raw_rollout']:,.0f} cheetah-steps/s, "
        f"HalfCheetahVectorEnv[{backend}] + policy {steps / best['vector_env']:,.0f}; "
        f"ratio {ratio:.2f} (target >= 0.75)"
    )
    assert ratio >= 0.75
