"""MAML-TRPO sampler throughput on HalfCheetahVel: vector env vs raw MuJoCo vs SyncVectorEnv.

The MAML configuration: 40 tasks x 20 episodes = 800 cheetahs, horizon 200. Each contender
samples one full batch of episodes per round; rounds are interleaved and the best round of each
is kept, so the ratios are measured side by side on a shared, noisy machine.

    (a)  raw     ``mujoco.rollout`` of the 800 cheetahs, open loop, one call of 5 substeps (the
                 frame skip) per env step, on all cores with a persistent thread pool: the
                 physics a closed-loop sampler cannot avoid, run by MuJoCo's own C++ threads.
                 A policy must see every observation, so a sampler returns to Python once per
                 env step; (a) pays that too, which makes it the fair "raw". (a') one long
                 rollout of horizon x 5 substeps is printed as the physics-only ceiling.
    (b)  vector  :class:`HalfCheetahVelVectorEnv` (``--backend exact``, the default, or
                 ``rollout``): reset + horizon steps with a batched torch MLP policy (100-100
                 tanh, Gaussian with std 1 as garage's MAML policy at initialisation) on the
                 (800, 20) observations under ``torch.no_grad()``.
    (c)  sync    Gymnasium ``SyncVectorEnv`` of 800 single ``HalfCheetahVelEnv`` with the same
                 policy.

All contenders draw actions of the same law (N(0, 1), plus the policy mean), so the contact load
of the physics is comparable. Run from the repository root::

    .venv/bin/python scripts/bench_sampler.py            # about 2 minutes on 2 cores
    .venv/bin/python scripts/bench_sampler.py --rounds 3 --horizon 50 --no-sync
    .venv/bin/python scripts/bench_sampler.py --protocol oyster --threads 1   # one core

``tests/benchmarks/test_sampler_speed.py`` imports :func:`measure` for the 75% check.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import get_args

import gymnasium as gym
import mujoco
import numpy as np
import torch
from mujoco import rollout

from metabench.harness.timing import best_times
from metabench.tasks.halfcheetah.envs import HalfCheetahProtocol, HalfCheetahVelEnv
from metabench.tasks.halfcheetah.vector import HalfCheetahVelVectorEnv, PhysicsBackend

FRAME_SKIP = 5
RAW = "raw rollout, nstep=5 per step"
LONG = "raw rollout, one long call"
SYNC = "SyncVectorEnv + policy"


def vector_name(backend: PhysicsBackend) -> str:
    return f"HalfCheetahVectorEnv[{backend}] + policy"


def make_policy(
    seed: int = 0, obs_dim: int = 20, act_dim: int = 6, hidden: int = 100
) -> Callable[[np.ndarray], np.ndarray]:
    """A MAML-sized Gaussian MLP policy (float32, as torch trains it): ``hidden``-``hidden``
    tanh, std 1 (the defaults: garage's MAML policy on HalfCheetah at initialisation)."""
    torch.manual_seed(seed)
    mean = torch.nn.Sequential(
        torch.nn.Linear(obs_dim, hidden),
        torch.nn.Tanh(),
        torch.nn.Linear(hidden, hidden),
        torch.nn.Tanh(),
        torch.nn.Linear(hidden, act_dim),
    )
    generator = torch.Generator().manual_seed(seed)

    def act(obs: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            mu = mean(torch.as_tensor(obs, dtype=torch.float32))
            return (mu + torch.randn(mu.shape, generator=generator)).numpy()

    return act


def make_contenders(
    num_envs: int = 800,
    horizon: int = 200,
    threads: int | None = None,
    backend: PhysicsBackend = "exact",
    sync: bool = True,
    long_rollout: bool = True,
    protocol: HalfCheetahProtocol = "garage",
) -> tuple[dict[str, Callable[[], None]], Callable[[], None]]:
    """The timed functions, each sampling one batch of episodes, and a function closing them."""
    threads = threads or os.cpu_count() or 1
    policy = make_policy()
    vec = HalfCheetahVelVectorEnv(
        num_envs, horizon=horizon, processes=threads, backend=backend, protocol=protocol
    )
    vec.reset(seed=0)

    # (a) raw: same model and reset states as the vector env, open-loop actions of the same law.
    model = vec.model
    nstate = mujoco.mj_stateSize(model, mujoco.mjtState.mjSTATE_FULLPHYSICS)
    qpos, qvel = vec.get_states()
    initial = np.zeros((num_envs, nstate))  # time, qpos, qvel (HalfCheetah has nothing else)
    initial[:, 1:] = np.concatenate((qpos, qvel), axis=1)
    rng = np.random.default_rng(0)
    controls = rng.standard_normal((horizon, num_envs, 1, model.nu))
    controls = np.ascontiguousarray(np.repeat(controls, FRAME_SKIP, axis=2))
    pool = rollout.Rollout(nthread=threads if threads > 1 else 0)
    datas = [mujoco.MjData(model) for _ in range(threads)]
    models = [model] * num_envs
    step_states = np.empty((num_envs, FRAME_SKIP, nstate))
    ctrl_spec = int(mujoco.mjtState.mjSTATE_CTRL)

    def raw_per_step() -> None:
        state = initial.copy()
        for t in range(horizon):
            pool.rollout(models, datas, state, controls[t], control_spec=ctrl_spec,
                         skip_checks=True, nstep=FRAME_SKIP, state=step_states)  # fmt: skip
            state[:] = step_states[:, -1]

    def vector_env() -> None:
        obs, _ = vec.reset()
        for _ in range(horizon):
            obs, *_ = vec.step(policy(obs))

    contenders: dict[str, Callable[[], None]] = {RAW: raw_per_step}
    if long_rollout:
        long_controls = np.ascontiguousarray(
            controls.transpose(1, 0, 2, 3).reshape(num_envs, horizon * FRAME_SKIP, model.nu)
        )
        long_states = np.empty((num_envs, horizon * FRAME_SKIP, nstate))

        def raw_long() -> None:
            pool.rollout(
                models,
                datas,
                initial,
                long_controls,
                control_spec=ctrl_spec,
                skip_checks=True,
                nstep=horizon * FRAME_SKIP,
                state=long_states,
            )

        contenders[LONG] = raw_long
    contenders[vector_name(backend)] = vector_env
    closers: list[Callable[[], None]] = [vec.close, pool.close]
    if sync:
        sync_env = gym.vector.SyncVectorEnv(
            [lambda: HalfCheetahVelEnv(horizon=horizon, protocol=protocol) for _ in range(num_envs)]
        )

        def sync_vector_env() -> None:
            obs, _ = sync_env.reset(seed=0)
            for _ in range(horizon):
                obs, *_ = sync_env.step(policy(obs))

        contenders[SYNC] = sync_vector_env
        closers.append(sync_env.close)

    def close() -> None:
        for closer in closers:
            closer()

    return contenders, close


def measure(
    num_envs: int = 800,
    horizon: int = 200,
    rounds: int = 5,
    threads: int | None = None,
    backend: PhysicsBackend = "exact",
    sync: bool = True,
    long_rollout: bool = True,
    torch_threads: int = 1,
    protocol: HalfCheetahProtocol = "garage",
) -> dict[str, float]:
    """Cheetah-steps/s of each contender, best of ``rounds`` interleaved rounds.

    :param torch_threads: torch intra-op threads for the policy; 1 leaves the cores to MuJoCo
        (idle torch threads spin on them for a while after each forward).
    """
    previous = torch.get_num_threads()
    torch.set_num_threads(torch_threads)
    contenders, close = make_contenders(
        num_envs, horizon, threads, backend, sync, long_rollout, protocol
    )
    try:
        best = best_times(contenders, rounds)
    finally:
        close()
        torch.set_num_threads(previous)
    return {name: num_envs * horizon / seconds for name, seconds in best.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--num-envs", type=int, default=800, help="cheetahs (40 tasks x 20)")
    parser.add_argument("--horizon", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--backend", choices=["exact", "rollout"], default="exact")
    parser.add_argument("--torch-threads", type=int, default=1)
    parser.add_argument("--no-sync", action="store_true", help="skip the slow SyncVectorEnv")
    parser.add_argument(
        "--protocol", choices=get_args(HalfCheetahProtocol), default="garage", help="whose variant"
    )
    args = parser.parse_args()

    rates = measure(
        args.num_envs,
        args.horizon,
        args.rounds,
        args.threads,
        args.backend,
        sync=not args.no_sync,
        torch_threads=args.torch_threads,
        protocol=args.protocol,
    )
    print(
        f"{args.num_envs} HalfCheetahVel cheetahs ({args.protocol}'s protocol) x horizon "
        f"{args.horizon}, threads "
        f"{args.threads} (os.cpu_count() = {os.cpu_count()}), {args.torch_threads} torch "
        f"thread(s); best of {args.rounds} interleaved rounds"
    )
    raw = rates[RAW]
    for name, value in rates.items():
        print(f"  {name:<40} {value:>9,.0f} cheetah-steps/s  {value / raw:6.1%} of (a)")
    vector = rates[vector_name(args.backend)]
    print(f"(b)/(a)  vector env / raw per-step rollout: {vector / raw:.2f} (target >= 0.75)")
    print(f"(b)/(a') vector env / one long rollout:      {vector / rates[LONG]:.2f}")
    if SYNC in rates:
        print(f"(b)/(c)  vector env / SyncVectorEnv:         {vector / rates[SYNC]:.2f}x")


if __name__ == "__main__":
    main()
