"""Where the time of ML10 goes: one RL2-PPO iteration, one MAML-TRPO iteration, one meta-test.

Builds each algorithm exactly as ``metabench train --benchmark ML10`` does (the shipped baseline
settings), wraps the methods each phase runs in with timers, runs it once and prints the split:

* **env**: Meta-World's own ``step`` (the Sawyer env), measured where it runs;
* **wrappers**: metabench's task env, ``Trial`` and ``RL2Env`` around it;
* **vector env / IPC**: the vector env's step beyond its sub-envs' (in-process) or waiting on
  the worker processes (env stepping and IPC together, as the parent sees them);
* **policy inference**: the policy's forward passes that choose actions;
* **rollout buffer**: recording steps, advantages and baselines;
* **update**: the optimisation step (PPO epochs; MAML's inner adaptation and outer TRPO step).

Also measures Meta-World's env-only step rate (the ML10 training classes in turn, random
actions) on one process and on every core, the reference the speed checks compare against.

    OMP_NUM_THREADS=1 .venv/bin/python scripts/profile_ml10.py [--parts rl2 maml metatest env]
        [--episodes N] [--set KEY=VALUE ...] [--rl2 ALGORITHM] [--device cuda] [--cpus N]

``--episodes`` shortens trials and per-task batches for a quick look (the default runs the
published iteration: 20 tasks x 10 episodes x 500 steps). ``--rl2`` picks the RL2 baseline
(default ``rl2-ppo``; ``rl2-ppo-metaworld`` is the Meta-World+ parity one), ``--device`` and
``--cpus`` are ``metabench train``'s (default: the CPU, every core). On a GPU each timed phase
waits for the GPU's queued work before it stops its clock, so a phase owns the kernels it
launched. Nothing else may run meanwhile.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

import metabench  # noqa: F401 - registers the ids
from metabench.cli import hyperparameter
from metabench.harness.run import RunSettings, build_algorithm, make_evaluator, plan_run

BENCHMARK = "ML10"


class Stopwatch:
    """Adds up the wall time of wrapped callables by label (re-entrant calls count once).

    :param device: where the timed code runs; on a GPU each clock reading waits for the queued
        kernels first (they run after the call that launched them returns).
    """

    def __init__(self, device: torch.device | None = None) -> None:
        self.synchronize: Callable[[], None] = (
            torch.cuda.synchronize if device is not None and device.type == "cuda" else lambda: None
        )
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._depth: dict[str, int] = defaultdict(int)
        self._originals: list[tuple[Any, str, Any]] = []

    def wrap(self, owner: Any, name: str, label: str) -> None:
        """Time ``owner.name`` (an instance or a class attribute) under ``label``."""
        original = getattr(owner, name)
        self._originals.append((owner, name, vars(owner).get(name)))

        def timed(*args: Any, **kwargs: Any) -> Any:
            with self.timing(label):
                return original(*args, **kwargs)

        setattr(owner, name, timed)

    def restore(self) -> None:
        """Undo every :meth:`wrap`, the last first."""
        for owner, name, attribute in reversed(self._originals):
            if attribute is None:  # was inherited: uncover it again
                delattr(owner, name)
            else:
                setattr(owner, name, attribute)
        self._originals.clear()

    @contextlib.contextmanager
    def timing(self, label: str) -> Iterator[None]:
        self._depth[label] += 1
        self.synchronize()
        start = time.perf_counter()
        try:
            yield
        finally:
            self._depth[label] -= 1
            self.synchronize()
            if self._depth[label] == 0:
                self.seconds[label] += time.perf_counter() - start
                self.calls[label] += 1


def print_split(title: str, total: float, steps: int, rows: list[tuple[str, float]]) -> None:
    """One table: each phase's seconds and share of ``total``, then the end-to-end rate."""
    print(f"\n{title}: {steps:,} env steps in {total:.1f} s = {steps / total:,.0f} steps/s")
    rest = total - sum(seconds for _, seconds in rows)
    for label, seconds in [*rows, ("other (Python glue, callbacks, copies)", rest)]:
        print(f"  {label:<44s} {seconds:8.1f} s  {100 * seconds / total:5.1f} %")


PROFILED_TEST_TASKS = 10
"""Test tasks of the measured meta-tests: as many as ``docs/speed.md``'s numbers were taken
with (2 per class), not ML10's final meta-test (200), so that measurements stay comparable."""


def profiled_test_tasks(plan: Any) -> list[Any]:
    """:data:`PROFILED_TEST_TASKS` of the run's test tasks, evenly spaced (they are listed
    class by class, so as many of each class)."""
    tasks = list(plan.test_tasks)
    return tasks[:: max(1, len(tasks) // PROFILED_TEST_TASKS)][:PROFILED_TEST_TASKS]


def build(
    algorithm: str,
    overrides: dict[str, Any],
    seed: int = 0,
    device: str = "cpu",
    cpus: int | None = None,
) -> tuple[Any, Any]:
    """The algorithm as ``metabench train --device DEVICE --cpus CPUS`` builds it on ML10
    (``cpus=None``: every core), and the run's plan."""
    out = Path(tempfile.mkdtemp(prefix="profile-ml10-"))
    settings = RunSettings(
        BENCHMARK,
        algorithm,
        seed,
        1,
        out,
        hyperparameters=overrides,
        cpus=cpus or os.cpu_count(),
        device=device,
    )
    plan = plan_run(settings)
    return build_algorithm(plan.spec, plan.config, None), plan


def time_sawyer_classes(watch: Stopwatch) -> None:
    """Time ``step`` of every Sawyer env class (so it counts in whatever process it runs)."""
    from metaworld.env_dict import ALL_V3_ENVIRONMENTS
    from metaworld.sawyer_xyz_env import SawyerXYZEnv

    for cls in {SawyerXYZEnv, *ALL_V3_ENVIRONMENTS.values()}:
        if "step" in vars(cls):
            watch.wrap(cls, "step", "env: Meta-World step")


def profile_rl2(
    algorithm: str,
    overrides: dict[str, Any],
    episodes: int | None,
    device: str = "cpu",
    cpus: int | None = None,
) -> None:
    from metabench.algos.rl2.recurrent_ppo import RL2RecurrentPPO

    if episodes:
        overrides = {"episodes_per_trial": episodes, **overrides}
    algo, _ = build(algorithm, overrides, device=device, cpus=cpus)
    watch = Stopwatch(algo.device)
    model, venv = algo.model, algo.venv
    inner = venv.venv
    in_process = hasattr(inner, "envs")
    if in_process:
        time_sawyer_classes(watch)
        for env in inner.envs:
            watch.wrap(env, "step", "wrappers: task env + Trial + RL2Env")
        watch.wrap(inner, "step_wait", "vector env (DummyVecEnv)")
    else:
        watch.wrap(venv, "step_wait", "env + IPC")
    watch.wrap(venv, "reset", "first reset: builds the Sawyer envs")
    watch.wrap(model.policy, "forward", "policy inference")
    watch.wrap(model.rollout_buffer, "add", "rollout buffer: add")
    for name in ("_linear_baseline_advantages", "_rollout_entropies"):
        watch.wrap(model, name, "rollout buffer: advantages, baseline")
    watch.wrap(model.rollout_buffer, "compute_returns_and_advantage", "rollout buffer: GAE")
    watch.wrap(model, "collect_rollouts", "collect")
    watch.wrap(model, "train", "update: PPO epochs")
    assert isinstance(model, RL2RecurrentPPO)
    start = time.perf_counter()
    algo.train(1)
    total = time.perf_counter() - start
    s = watch.seconds
    rows = [("first reset: builds the Sawyer envs", s["first reset: builds the Sawyer envs"])]
    if in_process:
        env_s, wrapped_s = s["env: Meta-World step"], s["wrappers: task env + Trial + RL2Env"]
        rows += [
            ("env: Meta-World step", env_s),
            ("wrappers: task env + Trial + RL2Env", wrapped_s - env_s),
            ("vector env (DummyVecEnv)", s["vector env (DummyVecEnv)"] - wrapped_s),
        ]
    else:
        rows.append(("env: one shard here, the others in workers", s["env + IPC"]))
    rows += [
        ("policy inference", s["policy inference"]),
        ("rollout buffer: add", s["rollout buffer: add"]),
        ("rollout buffer: advantages, baseline, GAE",
         s["rollout buffer: advantages, baseline"] + s["rollout buffer: GAE"]),
        ("update: PPO epochs", s["update: PPO epochs"]),
    ]  # fmt: skip
    config = algo.config
    print_split(
        f"{algorithm} on ML10, one iteration on {algo.device} "
        f"({config.meta_batch_size} tasks x "
        f"{config.episodes_per_trial} episodes, {config.recurrent_cell} {config.hidden_size}, "
        f"{config.value_baseline} baseline, processes={config.step_in_workers}, update_in_workers="
        f"{config.update_in_workers}, "
        f"torch threads {torch.get_num_threads()})",
        total,
        algo.steps_per_iteration,
        rows,
    )
    algo.venv.close()


def profile_maml(
    overrides: dict[str, Any],
    episodes: int | None,
    device: str = "cpu",
    cpus: int | None = None,
) -> None:
    if episodes:
        overrides = {"episodes_per_task": episodes, **overrides}
    algo, _ = build("maml-trpo", overrides, device=device, cpus=cpus)
    watch = Stopwatch(algo.device)
    collector = algo.collector
    vec_env = collector.vec_env
    watch.wrap(vec_env, "step", "env + IPC (waiting on workers)")
    watch.wrap(vec_env, "reset", "env + IPC (waiting on workers)")
    watch.wrap(collector, "collect", "sampling")
    for name in ("process", "adapt"):
        watch.wrap(algo, name, "update: baselines + inner adaptation")
    watch.wrap(algo, "meta_optimize", "update: outer TRPO step")
    from metabench.algos.maml.policy import BatchedGaussianActor

    # the collector's actor, built per collect() call: its batched forward and sampling
    watch.wrap(BatchedGaussianActor, "__call__", "policy inference")
    start = time.perf_counter()
    stats = algo.train(1)
    total = time.perf_counter() - start
    s = watch.seconds
    inference = s["policy inference"]
    sampling_rest = s["sampling"] - s["env + IPC (waiting on workers)"] - inference
    print_split(
        f"MAML-TRPO on ML10, one iteration ({algo.config.meta_batch_size} tasks x "
        f"{collector.episodes_per_task} episodes x 2 passes, {len(vec_env.processes)} env workers, "
        f"torch threads {torch.get_num_threads()})",
        total,
        int(stats["metatrain/env_steps"]),
        [
            ("env + IPC (waiting on workers)", s["env + IPC (waiting on workers)"]),
            ("policy inference (sampling)", inference),
            ("rollout recording (collector)", sampling_rest),
            ("update: baselines + inner adaptation", s["update: baselines + inner adaptation"]),
            ("update: outer TRPO step", s["update: outer TRPO step"]),
        ],
    )
    algo.close()


def profile_metatest(algorithm: str, overrides: dict[str, Any]) -> None:
    """The sequential meta-test on Meta-World's own step (where the batched one started from)
    and on the lean step, then the batched one, all with the same policy in one run."""
    algo, plan = build(algorithm, overrides)
    # the adapted policy acts through the exploration policy's get_action (RL2) or its own
    explorer = type(algo.get_exploration_policy())
    kwargs = plan.spec.test_env_kwargs
    own_step = replace(
        plan.spec, test_env_kwargs={**(kwargs or plan.spec.env_kwargs), "lean": False}
    )
    tasks = profiled_test_tasks(plan)
    own = make_evaluator(own_step, plan.config.seed, test_tasks=tasks)
    lean = make_evaluator(plan.spec, plan.config.seed, test_tasks=tasks)
    sequential = {
        "Meta-World's own step": time_sequential_metatest(algorithm, algo, own, explorer),
        "lean step": time_sequential_metatest(algorithm, algo, lean, explorer),
    }

    from metabench.evaluation.batched import _TrialEnvs

    evaluator = make_evaluator(plan.spec, plan.config.seed, test_tasks=tasks)
    processes = os.cpu_count() or 1
    batched = Stopwatch()
    batched.wrap(type(algo.get_exploration_policies(1)), "get_actions", "policy inference")
    batched.wrap(_TrialEnvs, "step_rows", "env: one shard here, the others in workers")
    batched.wrap(_TrialEnvs, "__init__", "building the envs and workers")
    start = time.perf_counter()
    with algo.evaluation_streams(0):
        result = evaluator.evaluate(algo, processes=processes)
    total = time.perf_counter() - start
    ratios = ", ".join(f"{seconds / total:.2f}x on {step}" for step, seconds in sequential.items())
    s = batched.seconds
    print_split(
        f"batched meta-test of {algorithm} on ML10 (lean step, {result.n_tasks} test tasks at "
        f"once, {processes} processes), against the sequential meta-test: {ratios}",
        total,
        result.n_env_steps,
        [(label, s[label]) for label in sorted(s)],
    )


def time_sequential_metatest(
    algorithm: str, algo: Any, evaluator: Any, explorer: type[Any]
) -> float:
    """Run and split the meta-test one env at a time; its wall time."""
    watch = Stopwatch()
    watch.wrap(explorer, "get_action", "policy inference")
    time_sawyer_classes(watch)
    watch.wrap(evaluator.task_env, "step", "task env step")
    step = "lean step" if evaluator.task_env.lean else "Meta-World's own step"
    start = time.perf_counter()
    with algo.evaluation_streams(0):
        result = evaluator.evaluate(algo)
    total = time.perf_counter() - start
    evaluator.close()
    watch.restore()
    s = watch.seconds
    print_split(
        f"meta-test of {algorithm} on ML10 ({step}, {result.n_tasks} test tasks x "
        f"{result.exploration_episodes}+{result.test_episodes} episodes, one env at a time)",
        total,
        result.n_env_steps,
        [
            ("env: Meta-World step", s["env: Meta-World step"]),
            ("wrappers: task env", s["task env step"] - s["env: Meta-World step"]),
            ("policy inference", s["policy inference"]),
        ],
    )
    return total


def env_only_rate(processes: int, steps: int = 5_000, lean: bool = False) -> float:
    """Meta-World's own step rate, env-only: the ML10 training classes in turn, random actions,
    ``processes`` processes at once (steps/s summed over them). ``lean=True``: the same with
    metabench's lean step (``metabench/tasks/metaworld/lean.py``)."""
    import multiprocessing

    with multiprocessing.get_context("spawn").Pool(processes) as pool:
        jobs = [(steps, seed, lean) for seed in range(processes)]
        results = pool.map(_env_only_worker, jobs)
    return sum(steps / seconds for seconds in results)


def _env_only_worker(args: tuple[int, int, bool]) -> float:
    steps, seed, lean = args
    torch.set_num_threads(1)
    from metabench.tasks.metaworld.envs import MetaWorldTaskSampler, ML10Env

    env = ML10Env(split="train", lean=lean)
    sampler = MetaWorldTaskSampler(BENCHMARK)
    rng = np.random.default_rng(seed)
    sawyers = []
    for name in sampler.class_names:
        env.set_task(sampler.tasks_by_class[name][0])
        env.reset(seed=seed)
        assert env.sawyer_env is not None
        sawyers.append(env.sawyer_env)
    per_class = steps // len(sawyers)
    actions = rng.uniform(-1, 1, size=(per_class, 4)).astype(np.float32)
    start = time.perf_counter()
    for sawyer in sawyers:
        sawyer.curr_path_length = 0
        for action in actions:
            sawyer.step(action)
            if sawyer.curr_path_length >= 499:
                sawyer.reset()
    return time.perf_counter() - start


def add_set_argument(parser: argparse.ArgumentParser, whose: str) -> None:
    """``--set KEY=VALUE ...``, read as ``metabench train --set`` reads it, for ``whose``
    hyperparameters; the parsed list of pairs goes to ``dict``."""
    parser.add_argument(
        "--set", nargs="*", type=hyperparameter, default=[], metavar="KEY=VALUE",
        help=f"{whose} hyperparameters, read as metabench train --set reads them",
    )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parts = ["env", "rl2", "maml", "metatest"]
    parser.add_argument("--parts", nargs="+", default=parts, choices=parts)
    parser.add_argument(
        "--episodes",
        type=int,
        default=None,
        help="episodes per trial (RL2) and per task (MAML); default: the published ones",
    )
    add_set_argument(parser, "the RL2 baseline's")
    parser.add_argument("--rl2", default="rl2-ppo", help="the RL2 baseline of --parts rl2")
    parser.add_argument("--device", default="cpu", help="metabench train's --device (rl2, maml)")
    parser.add_argument("--cpus", type=int, default=None, help="metabench train's --cpus")
    args = parser.parse_args()
    overrides = dict(args.set)
    if "env" in args.parts:
        cores = os.cpu_count() or 1
        for lean in (False, True):
            one, every = env_only_rate(1, lean=lean), env_only_rate(cores, lean=lean)
            print(
                f"\n{'metabench lean' if lean else 'Meta-World'} env-only step rate (ML10 train "
                f"classes, random actions): {one:,.0f} steps/s on 1 process, {every:,.0f} on "
                f"{cores}"
            )
    if "rl2" in args.parts:
        profile_rl2(args.rl2, overrides, args.episodes, args.device, args.cpus)
    if "maml" in args.parts:
        profile_maml({}, args.episodes, args.device, args.cpus)
    if "metatest" in args.parts:
        profile_metatest("rl2-ppo", overrides)


if __name__ == "__main__":
    main()
