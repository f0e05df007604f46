"""How far ML10's updates are from this machine's arithmetic limit, and the fastest end-to-end
rate that limit allows.

The update is most of an ML10 iteration (``scripts/profile_ml10.py``). This script counts the
floating-point operations of one update with torch's FLOP formulas (``torch.utils.flop_counter``)
(matrix products, forward and every backward, MAML's second-order ones included), times the
same update, and measures the machine's float32 matrix-product rate at the update's thread
count in the same run. It prints, per algorithm, the update's FLOPs per published iteration,
its achieved rate, the time the update would take at the machine's rate (the floor no
implementation of the same computation can beat), and the end-to-end rate that floor allows
when the env steps at metabench's env-only rate on every core.

FLOPs are linear in the steps of an iteration, so the update runs on shortened iterations
(``--episodes``, default 1 episode per task or trial) and is scaled to the published 10. The
FLOP counts do not depend on the machine's load; the times do: run it on an idle machine.

    OMP_NUM_THREADS=1 .venv/bin/python scripts/update_floor_ml10.py [--parts rl2 maml]
        [--episodes N] [--ops N]
"""

from __future__ import annotations

import argparse
import copy
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from profile_ml10 import build, env_only_rate
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry

from metabench.threads import torch_threads

PUBLISHED_EPISODES = 10
"""Episodes per task (MAML-TRPO) and per trial (RL2-PPO) in the shipped ML10 settings."""


@dataclass(frozen=True)
class UpdateCost:
    """One update at the shortened size, and what it scales to."""

    name: str
    flops: int
    seconds: float
    threads: int
    scale: float
    """Published iteration size over the measured one."""
    iteration_steps: int
    """Env steps of a published iteration."""


def matmul_rate(threads: int, rows: int = 5_000, width: int = 512, repeats: int = 20) -> float:
    """Best float32 ``[rows, width] @ [width, width]`` rate in FLOP/s on ``threads`` threads
    (the shape of MAML's hidden layer on one task's steps)."""
    a, b = torch.randn(rows, width), torch.randn(width, width)
    best = float("inf")
    with torch_threads(threads):
        for _ in range(repeats):
            start = time.perf_counter()
            torch.mm(a, b)
            best = min(best, time.perf_counter() - start)
    return 2 * rows * width * width / best


class FlopCount(TorchDispatchMode):
    """Adds up the FLOPs of every op torch's FLOP counter has a formula for (matrix products).

    ``FlopCounterMode`` itself cannot count MAML's update: its per-module tracker raises on the
    policy's functional forward passes without a graph (the line search's)."""

    def __init__(self) -> None:
        super().__init__()
        self.flops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        formula = flop_registry.get(func._overloadpacket)
        if formula is not None:
            self.flops += int(formula(*args, **kwargs, out_val=out))
        return out


def counted(run: Callable[[], object]) -> int:
    """The FLOPs ``run`` performs."""
    with FlopCount() as counter:
        run()
    return counter.flops


def top_ops(run: Callable[[], object], rows: int) -> str:
    """``run``'s ops by self CPU time (torch's profiler): which kernels the update waits on."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profiler:
        run()
    return str(profiler.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows))


def maml_update(episodes: int, ops: int = 0) -> UpdateCost:
    """MAML-TRPO's outer step (meta-gradient, CG on the KL Hessian, line search) on one
    meta-batch of ``episodes`` episodes per task, timed and then counted from the same start."""
    algo, _ = build("maml-trpo", {"episodes_per_task": episodes})
    tasks = algo.task_sampler.sample(algo.config.meta_batch_size, np.random.default_rng(0))
    meta = {name: p.detach() for name, p in algo.policy.params().items()}
    threads = algo.config.update_threads
    train_episodes = algo.collect(tasks, [meta] * len(tasks))
    with torch_threads(threads):
        train = [algo.process(e) for e in train_episodes]
        adapted = [
            {k: v.detach() for k, v in algo.adapt(meta, data, create_graph=False).items()}
            for data in train
        ]
    valid_episodes = algo.collect(tasks, adapted)
    with torch_threads(threads):
        valid = [algo.process(e) for e in valid_episodes]
        start_state = copy.deepcopy(algo.policy.state_dict())
        start = time.perf_counter()
        step = algo.meta_optimize(train, valid)
        seconds = time.perf_counter() - start
        algo.policy.load_state_dict(start_state)
        flops = counted(lambda: algo.meta_optimize(train, valid))
        if ops:
            algo.policy.load_state_dict(start_state)
            print(top_ops(lambda: algo.meta_optimize(train, valid), ops))
    algo.close()
    print(f"MAML-TRPO outer step: {step.reason}, {step.n_backtracks} backtracks")
    scale = PUBLISHED_EPISODES / episodes
    steps = sum(e.n_steps for e in train_episodes) + sum(e.n_steps for e in valid_episodes)
    return UpdateCost("MAML-TRPO outer step", flops, seconds, threads, scale, int(steps * scale))


def rl2_update(episodes: int, ops: int = 0) -> UpdateCost:
    """RL2-PPO's update (PPO epochs over whole trials, one process): counted on the first
    iteration of ``episodes`` episodes per trial, timed on the second (same sizes), profiled
    by op on a third if ``ops``."""
    algo, _ = build("rl2-ppo", {"episodes_per_trial": episodes})
    model = algo.model
    original = model.train
    record: dict[str, float] = {}

    def count_train() -> None:
        record["threads"] = torch.get_num_threads()
        record["flops"] = counted(original)

    def time_train() -> None:
        start = time.perf_counter()
        original()
        record["seconds"] = time.perf_counter() - start

    def profile_train() -> None:
        print(top_ops(original, ops))

    for wrapper in (count_train, time_train, profile_train)[: 3 if ops else 2]:
        model.train = wrapper
        algo.train(1)
    steps = algo.steps_per_iteration
    algo.venv.close()
    scale = PUBLISHED_EPISODES / episodes
    return UpdateCost(
        "RL2-PPO update",
        int(record["flops"]),
        record["seconds"],
        int(record["threads"]),
        scale,
        int(steps * scale),
    )


def report(cost: UpdateCost, env_rate: float) -> None:
    """The update's FLOPs, achieved and peak rates, floor, and the end-to-end bound."""
    peak = matmul_rate(cost.threads)
    flops = cost.flops * cost.scale
    seconds = cost.seconds * cost.scale
    floor = flops / peak
    env_seconds = cost.iteration_steps / env_rate
    print(
        f"\n{cost.name} ({cost.threads} torch thread{'s' * (cost.threads > 1)}), per published "
        f"iteration of {cost.iteration_steps:,} env steps:\n"
        f"  {flops / 1e12:.2f} TFLOP (matrix products), measured {seconds:.1f} s "
        f"(x{cost.scale:g} of {cost.seconds:.2f} s) = {flops / seconds / 1e9:.1f} GFLOP/s\n"
        f"  machine's float32 matrix-product rate at {cost.threads} thread"
        f"{'s' * (cost.threads > 1)}: {peak / 1e9:.1f} GFLOP/s -> floor {floor:.1f} s "
        f"({floor / seconds:.0%} of the measured time)\n"
        f"  env at the lean env-only rate on every core ({env_rate:,.0f} steps/s): "
        f"{env_seconds:.1f} s\n"
        f"  end to end, at most {cost.iteration_steps / (floor + env_seconds):,.0f} steps/s with "
        f"the update at the floor; {cost.iteration_steps / (seconds + env_seconds):,.0f} with "
        f"the update as measured"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", nargs="+", default=["rl2", "maml"], choices=["rl2", "maml"])
    parser.add_argument(
        "--episodes", type=int, default=1, help="episodes per task / trial measured (default 1)"
    )
    parser.add_argument(
        "--ops", type=int, default=0, help="also print each update's N slowest ops (profiler)"
    )
    args = parser.parse_args()
    env_rate = env_only_rate(os.cpu_count() or 1, lean=True)
    costs = []
    if "rl2" in args.parts:
        costs.append(rl2_update(args.episodes, args.ops))
    if "maml" in args.parts:
        costs.append(maml_update(args.episodes, args.ops))
    for cost in costs:
        report(cost, env_rate)


if __name__ == "__main__":
    main()
