"""MAML-TRPO's ML10 outer step with glibc's malloc as it comes and with the freed memory kept
(``metabench.memory.retain_freed_memory``, which every run sets), side by side.

Each side runs in its own process (a process's malloc settings cannot be undone), the two
alternating ``--rounds`` times. A process takes a warm-up step and then ``--steps`` timed ones
from the same start, as a run takes one per iteration, on the synthetic ML10-sized batch of
``scripts/maml_outer_step_device.py``; it prints each step's time and page faults, and the
SHA-256 of the parameters after a step, which must be equal on both sides::

    OMP_NUM_THREADS=1 .venv/bin/python scripts/bench_freed_memory.py [--rounds 2] [--steps 1]
        [--steps-per-task 5000] [--threads 2]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import statistics
import subprocess
import sys
import time

import torch
from maml_outer_step_device import ml10_step

from metabench.memory import retain_freed_memory

SIDES = ("as it comes", "kept")


def faults() -> int:
    """Minor page faults of this process so far."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def child(kept: bool, steps: int, steps_per_task: int) -> dict[str, object]:
    """One side: the warm-up and ``steps`` timed outer steps in this process."""
    applied = retain_freed_memory() if kept else False
    algo, train, valid = ml10_step(torch.device("cpu"), steps_per_task)
    start = {name: value.clone() for name, value in algo.policy.state_dict().items()}
    times, step_faults = [], []
    for _ in range(steps + 1):  # each from the same start, so each ends at the same parameters
        algo.policy.load_state_dict(start)
        before, began = faults(), time.perf_counter()
        algo.trpo_optimize(train, valid)
        times.append(time.perf_counter() - began)
        step_faults.append(faults() - before)
    flat = torch.cat([p.detach().flatten() for p in algo.policy.parameters()])
    digest = hashlib.sha256(flat.numpy().tobytes()).hexdigest()
    return {"applied": applied, "times": times, "faults": step_faults, "sha256": digest}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2, help="processes per side, alternating")
    parser.add_argument("--steps", type=int, default=1, help="timed steps after the warm-up")
    parser.add_argument("--steps-per-task", type=int, default=5_000, help="ML10: 10 x 500")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (maml-trpo: 2)")
    parser.add_argument("--child", choices=SIDES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        torch.set_num_threads(args.threads)
        record = child(args.child == "kept", args.steps, args.steps_per_task)
        print(json.dumps(record))
        return
    warm: dict[str, list[float]] = {side: [] for side in SIDES}
    digests: set[str] = set()
    for round_ in range(args.rounds):
        for side in SIDES:
            command = [
                sys.executable, __file__, "--child", side, "--steps", str(args.steps),
                "--steps-per-task", str(args.steps_per_task), "--threads", str(args.threads),
            ]  # fmt: skip
            output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
            record = json.loads(output.strip().splitlines()[-1])
            steps = ", ".join(
                f"{t:.1f} s ({f:,} faults)"
                for t, f in zip(record["times"], record["faults"], strict=True)
            )
            print(f"round {round_ + 1}, malloc {side}: warm-up then timed: {steps}", flush=True)
            warm[side].extend(record["times"][1:])
            digests.add(record["sha256"])
    base, kept = (statistics.median(warm[side]) for side in SIDES)
    same = "equal" if len(digests) == 1 else "DIFFERENT"
    print(
        f"warm outer step, median: {base:.1f} s as it comes, {kept:.1f} s kept: "
        f"{base / kept:.2f}x; parameters after the step {same} on both sides"
    )


if __name__ == "__main__":
    main()
