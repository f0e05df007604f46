"""How ML10 training grows with the cores (``--cpus``) and the device (``--device``).

For each core count: Meta-World's env-only step rate on that many processes (metabench's lean
step, random actions, the ML10 training classes in turn), then one ML10 iteration of each
algorithm as ``metabench train --cpus N --device D`` builds it, timed after a first iteration
that builds the envs. Each line gives the env steps per second, their ratio to the env-only rate
measured just before, and the hours 2e7 steps would take at that rate (meta-tests not included).

    OMP_NUM_THREADS=1 .venv/bin/python scripts/scaling.py --cores 1 2 [--device cuda]
        [--algorithms rl2-ppo-metaworld maml-trpo] [--episodes N] [--set KEY=VALUE ...]

``--episodes`` shortens the iterations (episodes per trial for RL2, per task for MAML; default:
the published 10) to keep a machine with few cores within minutes. ``--set`` overrides
hyperparameters of every algorithm measured, as ``metabench train --set`` does (e.g.
``update_in_workers=true`` for RL2's split update).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from profile_ml10 import add_set_argument, env_only_rate

from metabench.devices import device_name, resolve_device
from metabench.harness.run import RunSettings, build_algorithm, plan_run

EPISODE_KEYS = {"maml-trpo": "episodes_per_task"}
"""The hyperparameter ``--episodes`` sets (RL2: ``episodes_per_trial``)."""


def iteration_rate(
    algorithm: str,
    cores: int,
    device: str,
    episodes: int | None,
    overrides: dict[str, Any] | None = None,
) -> float:
    """Env steps per second of one ML10 iteration (the second: the first builds the envs)."""
    overrides = dict(overrides or {})
    if episodes is not None:
        overrides[EPISODE_KEYS.get(algorithm, "episodes_per_trial")] = episodes
    out = Path(tempfile.mkdtemp(prefix="scaling-"))
    settings = RunSettings("ML10", algorithm, 0, 1, out, overrides, cpus=cores, device=device)
    plan = plan_run(settings)
    algo = build_algorithm(plan.spec, plan.config, None)
    try:
        algo.train(1)
        steps_before = algo.steps_per_iteration
        start = time.perf_counter()
        algo.train(1)
        return steps_before / (time.perf_counter() - start)
    finally:
        close = getattr(algo, "close", None)  # MAML's env workers; SB3's envs close at exit
        if close is not None:
            close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cores", nargs="+", type=int, default=[1, os.cpu_count() or 1])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--algorithms", nargs="*", default=["rl2-ppo-metaworld", "maml-trpo"])
    parser.add_argument("--episodes", type=int, default=None)
    parser.add_argument("--env-steps", type=int, default=5_000, help="env-only steps per process")
    add_set_argument(parser, "every algorithm's")
    args = parser.parse_args()
    overrides = dict(args.set)
    device = resolve_device(args.device)
    print(f"{os.cpu_count()} cores, {device_name(device)}, torch {torch.__version__}", flush=True)
    for cores in args.cores:
        env_rate = env_only_rate(cores, args.env_steps, lean=True)
        print(f"{cores} cores: env-only {env_rate:,.0f} steps/s", flush=True)
        for algorithm in args.algorithms:
            rate = iteration_rate(algorithm, cores, str(device), args.episodes, overrides)
            hours = 2e7 / rate / 3600
            print(
                f"  {algorithm}: {rate:,.0f} steps/s, {rate / env_rate:.2f} of env-only, "
                f"2e7 steps in {hours:.1f} h",
                flush=True,
            )


if __name__ == "__main__":
    main()
