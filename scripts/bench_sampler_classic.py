"""MAML-TRPO sampler throughput on the classic suite's MuJoCo tasks (Ant-Dir, Ant-Goal,
Humanoid-Dir): does MAML's collector need a batched vector env there, as HalfCheetah got one?

MAML's collector steps ``meta_batch_size x episodes_per_task`` task envs (pytorch-maml-rl's Ant
configs: 40 x 20 = 800) with one batched policy call per step. Contenders, each sampling one
batch of episodes per round, rounds interleaved and the best round of each kept
(:func:`metabench.harness.timing.best_times`), so that the ratios are measured side by side:

    (a)  raw      ``mujoco.rollout`` of the same model from the envs' reset states, one call of
                  ``frame_skip`` substeps per env step on all cores (MuJoCo's own threads), open
                  loop: the physics a closed-loop sampler cannot avoid.
    (c)  one      MAML's vector env for a family without a batched or sharded one
                  (``make_task_vec_env``: every sub-env in this process), with a MAML-sized
                  policy (64-64 tanh, Gaussian with std 1) on the batch of observations.
    (d)  sharded  the same sub-envs sharded over ``--processes`` worker processes
                  (``make_sharded_task_env``, as Meta-World's are): the same numbers as (c).

If (c) or (d) reaches a large share of (a), a batched env would gain little. Run it on an idle
machine, from the repository root::

    .venv/bin/python scripts/bench_sampler_classic.py --env-id metabench/AntDir-v0 \\
        --kwargs protocol=oyster
    .venv/bin/python scripts/bench_sampler_classic.py --env-id metabench/HumanoidDir-v0 \\
        --kwargs protocol=oyster --num-envs 400 --rounds 3
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import Any

import mujoco
import numpy as np
import torch
from bench_sampler import make_policy
from mujoco import rollout

from metabench.harness.timing import best_times
from metabench.registration import make_task_env
from metabench.vector import make_task_vec_env
from metabench.vector.sharded import make_sharded_task_env

RAW, ONE, SHARDED = "raw rollout, per step", "one process (MAML's default)", "sharded"


def make_contenders(
    env_id: str, env_kwargs: dict[str, Any], num_envs: int, horizon: int, processes: int
) -> tuple[dict[str, Callable[[], object]], Callable[[], None]]:
    """The timed functions, each sampling one batch of ``num_envs`` episodes of ``horizon``
    steps, and a function closing them."""
    probe = make_task_env(env_id, **env_kwargs)
    tasks = probe.unwrapped.sample_tasks(num_envs, np.random.default_rng(0))
    obs_dim, act_dim = probe.observation_space.shape[0], probe.action_space.shape[0]
    policy = make_policy(0, obs_dim, act_dim, hidden=64)  # pytorch-maml-rl's Ant policy: 64-64

    # (a) raw: every env's reset state, through the env's own model
    model = probe.unwrapped.model
    frame_skip = int(probe.unwrapped.frame_skip)
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    initial = np.empty((num_envs, mujoco.mj_stateSize(model, spec)))
    for index, task in enumerate(tasks):
        probe.reset(seed=index, options={"task": task})
        mujoco.mj_getState(model, probe.unwrapped.data, initial[index], spec)
    controls = np.random.default_rng(0).standard_normal((horizon, num_envs, 1, model.nu))
    controls = np.ascontiguousarray(np.repeat(controls, frame_skip, axis=2))
    pool = rollout.Rollout(nthread=processes if processes > 1 else 0)
    datas = [mujoco.MjData(model) for _ in range(processes)]
    step_states = np.empty((num_envs, frame_skip, initial.shape[1]))

    def raw() -> None:
        state = initial.copy()
        for t in range(horizon):
            pool.rollout([model] * num_envs, datas, state, controls[t],
                         control_spec=int(mujoco.mjtState.mjSTATE_CTRL), skip_checks=True,
                         nstep=frame_skip, state=step_states)  # fmt: skip
            state[:] = step_states[:, -1]

    def sampler(vec_env: Any) -> Callable[[], None]:
        def run() -> None:
            vec_env.set_tasks(tasks)
            obs, _ = vec_env.reset(seed=0)
            for _ in range(horizon):
                obs, *_ = vec_env.step(policy(np.asarray(obs)))

        return run

    one = make_task_vec_env(env_id, num_envs, env_kwargs=env_kwargs)
    sharded = make_sharded_task_env(env_id, num_envs, processes, info_keys=(), **env_kwargs)
    contenders: dict[str, Callable[[], object]] = {
        RAW: raw,
        ONE: sampler(one),
        SHARDED: sampler(sharded),
    }

    def close() -> None:
        for closer in (one.close, sharded.close, pool.close, probe.close):
            closer()

    return contenders, close


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--env-id", default="metabench/AntDir-v0")
    parser.add_argument(
        "--kwargs", nargs="*", default=["protocol=oyster"], help="task env keywords, key=value"
    )
    parser.add_argument("--num-envs", type=int, default=800, help="40 tasks x 20 episodes")
    parser.add_argument("--horizon", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--processes", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    env_kwargs = dict(item.split("=", 1) for item in args.kwargs)
    torch.set_num_threads(1)  # the cores go to MuJoCo and the env workers
    contenders, close = make_contenders(
        args.env_id, env_kwargs, args.num_envs, args.horizon, args.processes
    )
    try:
        best = best_times(contenders, args.rounds)
    finally:
        close()
    rates = {name: args.num_envs * args.horizon / seconds for name, seconds in best.items()}
    print(
        f"{args.env_id} {env_kwargs}: {args.num_envs} envs x horizon {args.horizon}, "
        f"{args.processes} processes (os.cpu_count() = {os.cpu_count()}); best of "
        f"{args.rounds} interleaved rounds"
    )
    for name, value in rates.items():
        print(f"  {name:<30} {value:>9,.0f} env steps/s  {value / rates[RAW]:6.1%} of raw")


if __name__ == "__main__":
    main()
