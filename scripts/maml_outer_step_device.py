"""MAML-TRPO's outer step at ML10's size on each device: seconds per step, and how far each
device's updated meta-parameters are from the first device's (same batch, same start).

The batch has ML10's shapes (20 tasks x 10 episodes x 500 steps before and after adapting, 39-dim
observations, 4-dim actions) and the policy is maml-trpo's ML10 one (2x512 tanh, Xavier init,
inner lr 0.005, advantages divided by their variance); observations, actions and advantages are
synthetic, since the step's cost depends on these shapes and not on the env. It needs no
Meta-World, so it runs wherever torch does::

    .venv/bin/python scripts/maml_outer_step_device.py --devices cpu cuda [--rounds 3]

Each round restores the start and takes the step again; the first step on a device is a warm-up
(CUDA's kernels load then) and is not counted.
"""

from __future__ import annotations

import argparse
import time

import torch

import metabench  # noqa: F401 - registers the ids
from metabench.algos.maml import MAML, MAMLConfig
from metabench.algos.maml.functional import TaskData
from metabench.algos.maml.policy import GaussianMLPPolicy
from metabench.devices import device_name, resolve_device
from metabench.memory import retain_freed_memory

OBS_DIM, ACTION_DIM, TASKS = 39, 4, 20
"""ML10's observation and action sizes and maml-trpo's ML10 meta-batch."""


def batch(steps: int, seed: int) -> list[TaskData]:
    """One synthetic task batch on the CPU: ``TASKS`` tasks of ``steps`` steps each."""
    generator = torch.Generator().manual_seed(seed)
    tasks = []
    for _ in range(TASKS):
        advantages = torch.randn(steps, generator=generator)
        tasks.append(
            TaskData(
                observations=torch.randn(steps, OBS_DIM, generator=generator),
                actions=torch.randn(steps, ACTION_DIM, generator=generator),
                advantages=(advantages - advantages.mean()) / advantages.var(),
            )
        )
    return tasks


def on(device: torch.device, tasks: list[TaskData]) -> list[TaskData]:
    return [TaskData(*(tensor.to(device) for tensor in task)) for task in tasks]


def ml10_step(device: torch.device, steps: int) -> tuple[MAML, list[TaskData], list[TaskData]]:
    """maml-trpo's ML10 policy and two synthetic batches of ``steps`` steps per task on
    ``device``: what :meth:`MAML.trpo_optimize` takes one outer step from."""
    config = MAMLConfig(
        meta_batch_size=TASKS,
        episodes_per_task=1,
        hidden_sizes=(512, 512),
        inner_lr=0.005,
        advantage_scale="variance",
        weight_init="xavier",
    )
    algo = MAML("metabench/PointGoal-v0", config=config, env_kwargs={"horizon": 2}, device=device)
    algo.close()
    torch.manual_seed(0)
    # ML10's policy in place of PointGoal's: the step only reads the policy and the batch
    algo.policy = GaussianMLPPolicy(OBS_DIM, ACTION_DIM, (512, 512), weight_init="xavier").to(
        device
    )
    return algo, on(device, batch(steps, 1)), on(device, batch(steps, 2))


def outer_steps(device: torch.device, steps: int, rounds: int) -> tuple[list[float], torch.Tensor]:
    """Times of ``rounds`` outer steps after a warm-up, and the parameters after one step."""
    algo, train, valid = ml10_step(device, steps)
    start = {name: value.clone() for name, value in algo.policy.state_dict().items()}
    times = []
    for round_ in range(rounds + 1):
        algo.policy.load_state_dict(start)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        began = time.perf_counter()
        step = algo.trpo_optimize(train, valid)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if round_ > 0:
            times.append(time.perf_counter() - began)
        print(f"  {device_name(device)}: {time.perf_counter() - began:.2f} s ({step.reason})")
    after = torch.cat([p.detach().cpu().flatten() for p in algo.policy.parameters()])
    return times, after


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--devices", nargs="+", default=["cpu", "auto"])
    parser.add_argument("--rounds", type=int, default=3, help="timed steps per device")
    parser.add_argument(
        "--steps-per-task", type=int, default=5_000, help="steps per task (ML10: 10 x 500)"
    )
    parser.add_argument("--threads", type=int, default=None, help="torch threads on the CPU")
    args = parser.parse_args()
    retain_freed_memory()  # as every run does (metabench.harness.run.build_algorithm)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads")
    reference: torch.Tensor | None = None
    for name in args.devices:
        device = resolve_device(name)
        times, after = outer_steps(device, args.steps_per_task, args.rounds)
        line = f"{device_name(device)}: {min(times):.2f} s per outer step (best of {len(times)})"
        if reference is None:
            reference = after
        else:
            gap = (after - reference).abs().max().item()
            relative = ((after - reference).norm() / reference.norm()).item()
            line += (
                f"; parameters differ from the first device's by {gap:.2e} (rel. {relative:.1e})"
            )
        print(line, flush=True)


if __name__ == "__main__":
    main()
