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

The update runs on shortened iterations (``--episodes``, default 1 episode per task or trial)
and is scaled to the published 10: by the steps, or for a chunked RL2 update (Meta-World+'s,
``rl2-ppo-metaworld``) by its chunks, whose number is not proportional to a trial's length. An
RL2 update split over the env worker (``--set update_in_workers=true``) is counted in one process
(the same products, all of them here) and its floor is taken at the rate of every process it
runs in. The FLOP counts do not depend on the machine's load; the times do: run it on an idle
machine.

    OMP_NUM_THREADS=1 .venv/bin/python scripts/update_floor_ml10.py [--parts rl2 maml]
        [--rl2 rl2-ppo-metaworld] [--set KEY=VALUE ...] [--episodes N] [--ops N]
"""

from __future__ import annotations

import argparse
import copy
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from profile_ml10 import add_set_argument, build, env_only_rate
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry

from metabench.algos.rl2.chunked_update import chunk_starts
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
    processes: int
    """Processes the update runs in, each on ``threads`` threads."""
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
    meta-batch of ``episodes`` episodes per task, timed as a run's later iterations take it
    (after a first step, which pays for the pages its memory is new in) and then counted from
    the same start."""
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
        algo.meta_optimize(train, valid)  # the first step's memory is new to the process
        print(f"MAML-TRPO outer step: the process's first took {time.perf_counter() - start:.2f} s")
        algo.policy.load_state_dict(start_state)
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
    return UpdateCost("MAML-TRPO outer step", flops, seconds, threads, 1, scale, int(steps * scale))


def rl2_update(
    algorithm: str, overrides: dict[str, Any], episodes: int, ops: int = 0
) -> UpdateCost:
    """``algorithm``'s RL2 update as configured (whole trials or chunks, one process or split):
    counted in one process on the first iteration of ``episodes`` episodes per trial, timed on
    the second (same sizes), profiled by op on a third if ``ops``."""
    algo, _ = build(algorithm, {**overrides, "episodes_per_trial": episodes})
    model = algo.model
    original = model.train
    split = model.update_venv
    processes = split.processes if split is not None else 1
    record: dict[str, float] = {}

    def count_train() -> None:
        record["threads"] = torch.get_num_threads()
        model.update_venv = None  # every product in this process, where it is counted
        record["flops"] = counted(original)
        model.update_venv = split

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
    trial = model.n_steps
    algo.venv.close()
    if model.chunk_length is None:
        scale = PUBLISHED_EPISODES / episodes
    else:  # the same products per chunk, and chunks are not linear in a trial's steps
        published, measured = (
            len(chunk_starts(length, model.chunk_length, model.chunk_overlap))
            for length in (trial * PUBLISHED_EPISODES // episodes, trial)
        )
        scale = published / measured
    return UpdateCost(
        f"{algorithm} update",
        int(record["flops"]),
        record["seconds"],
        int(record["threads"]),
        processes,
        scale,
        int(steps * PUBLISHED_EPISODES / episodes),
    )


def report(cost: UpdateCost, env_rate: float) -> None:
    """The update's FLOPs, achieved and peak rates, floor, and the end-to-end bound."""
    peak = matmul_rate(cost.threads) * cost.processes
    flops = cost.flops * cost.scale
    seconds = cost.seconds * cost.scale
    floor = flops / peak
    env_seconds = cost.iteration_steps / env_rate
    where = f"{cost.threads} thread{'s' * (cost.threads > 1)}"
    if cost.processes > 1:
        where = f"{cost.processes} processes of {where}"
    bound = cost.iteration_steps / (floor + env_seconds)
    print(
        f"\n{cost.name} ({where}), per published "
        f"iteration of {cost.iteration_steps:,} env steps:\n"
        f"  {flops / 1e12:.2f} TFLOP (matrix products), measured {seconds:.1f} s "
        f"(x{cost.scale:g} of {cost.seconds:.2f} s) = {flops / seconds / 1e9:.1f} GFLOP/s\n"
        f"  machine's float32 matrix-product rate on {where}: {peak / 1e9:.1f} GFLOP/s "
        f"-> floor {floor:.1f} s "
        f"({floor / seconds:.0%} of the measured time)\n"
        f"  env at the lean env-only rate on every core ({env_rate:,.0f} steps/s): "
        f"{env_seconds:.1f} s\n"
        f"  end to end, at most {bound:,.0f} steps/s ({bound / env_rate:.2f} of the env-only "
        f"rate) with the update at the floor; "
        f"{cost.iteration_steps / (seconds + env_seconds):,.0f} with the update as measured"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", nargs="+", default=["rl2", "maml"], choices=["rl2", "maml"])
    parser.add_argument(
        "--episodes", type=int, default=1, help="episodes per task / trial measured (default 1)"
    )
    parser.add_argument(
        "--rl2", default="rl2-ppo", metavar="ALGORITHM",
        help="the RL2 baseline whose update is measured (default rl2-ppo)",
    )  # fmt: skip
    add_set_argument(parser, "the RL2 baseline's")
    parser.add_argument(
        "--ops", type=int, default=0, help="also print each update's N slowest ops (profiler)"
    )
    args = parser.parse_args()
    env_rate = env_only_rate(os.cpu_count() or 1, lean=True)
    costs = []
    if "rl2" in args.parts:
        costs.append(rl2_update(args.rl2, dict(args.set), args.episodes, args.ops))
    if "maml" in args.parts:
        costs.append(maml_update(args.episodes, args.ops))
    for cost in costs:
        report(cost, env_rate)


if __name__ == "__main__":
    main()
