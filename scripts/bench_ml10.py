"""ML10 throughput against Meta-World's own step rate, and the batched meta-test against the
sequential one, measured side by side in one run.

Each round measures, back to back: Meta-World's env-only step rate on every core (the ML10
training classes in turn, random actions, one process per core), one RL2-PPO iteration and one
MAML-TRPO iteration with the shipped ML10 settings (whole iteration: rollouts and update), and
the meta-test of RL2-PPO one task at a time and batched. The best round of each is kept.
Also: the lean Meta-World step against Meta-World's own (env-only), and RL2-PPO's update split
over the env worker (``update_in_workers``) against one process, on the same rollout.
Iterations are shortened to keep a round to minutes (RL2: 2 episodes per trial instead of 10;
MAML: 1 episode per task instead of 10; meta-test: 2 + 1 episodes instead of 10 + 3); the
speed table of ``docs/speed.md`` gives the full-size numbers of ``scripts/profile_ml10.py``.

    OMP_NUM_THREADS=1 .venv/bin/python scripts/bench_ml10.py [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import metabench  # noqa: F401 - registers the ids
from metabench.harness.run import RunSettings, build_algorithm, make_evaluator, plan_run

RL2_EPISODES, MAML_EPISODES = 2, 1
EXPLORATION_EPISODES, TEST_EPISODES = 2, 1


def _build(algorithm: str, overrides: dict[str, Any]) -> Any:
    out = Path(tempfile.mkdtemp(prefix="bench-ml10-"))
    settings = RunSettings("ML10", algorithm, 0, 1, out, overrides, cpus=os.cpu_count())
    plan = plan_run(settings)
    return build_algorithm(plan.spec, plan.config, None), plan


def _rate(run: Any, steps: int) -> float:
    start = time.perf_counter()
    run()
    return steps / (time.perf_counter() - start)


def measure(rounds: int = 2) -> dict[str, float]:
    """Best env steps per second of each subject over ``rounds`` interleaved rounds."""
    from profile_ml10 import env_only_rate, profiled_test_tasks

    rl2, _ = _build("rl2-ppo", {"episodes_per_trial": RL2_EPISODES})
    maml, _ = _build("maml-trpo", {"episodes_per_task": MAML_EPISODES})
    tested, plan = _build("rl2-ppo", {})
    tasks = profiled_test_tasks(plan)
    evaluator = make_evaluator(
        plan.spec,
        0,
        test_tasks=tasks,
        exploration_episodes=EXPLORATION_EPISODES,
        test_episodes=TEST_EPISODES,
    )
    metatest_steps = len(tasks) * (EXPLORATION_EPISODES + TEST_EPISODES) * 500
    cores = os.cpu_count() or 1
    subjects = {
        "env_only": lambda: env_only_rate(cores, steps=4_000),
        "rl2": lambda: _rate(lambda: rl2.train(1), rl2.steps_per_iteration),
        "maml": lambda: _rate(lambda: maml.train(1), maml.steps_per_iteration),
        "metatest_sequential": lambda: _rate(lambda: evaluator.evaluate(tested), metatest_steps),
        "metatest_batched": lambda: _rate(
            lambda: evaluator.evaluate(tested, processes=cores), metatest_steps
        ),
    }
    best = dict.fromkeys(subjects, 0.0)
    try:
        for _ in range(rounds):
            for name, subject in subjects.items():
                best[name] = max(best[name], subject())
    finally:
        rl2.venv.close()
        maml.close()
        evaluator.close()
    return best


def lean_step_ratio(rounds: int = 3) -> float:
    """Best env-only step rate of metabench's lean Meta-World step over Meta-World's own, on
    every core, ``rounds`` interleaved rounds."""
    from profile_ml10 import env_only_rate

    cores = os.cpu_count() or 1
    best = {False: 0.0, True: 0.0}
    for _ in range(rounds):
        for lean in best:
            best[lean] = max(best[lean], env_only_rate(cores, steps=4_000, lean=lean))
    return best[True] / best[False]


def split_update_ratio(rounds: int = 2, episodes: int = RL2_EPISODES) -> float:
    """RL2-PPO's update on one ML10 rollout (``episodes`` per trial), one process against split
    over the env worker (``update_in_workers``): best time of each over interleaved rounds."""
    algo, _ = _build("rl2-ppo", {"episodes_per_trial": episodes, "update_in_workers": True})
    model = algo.model
    split_venv = model.update_venv
    best = {"one process": float("inf"), "split": float("inf")}
    try:
        algo.train(1)  # a rollout in the buffer (and one update)
        for _ in range(rounds):
            for name, venv in (("one process", None), ("split", split_venv)):
                model.update_venv = venv
                start = time.perf_counter()
                model.train()
                best[name] = min(best[name], time.perf_counter() - start)
    finally:
        algo.venv.close()
    return best["one process"] / best["split"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    rounds = parser.parse_args().rounds
    print(f"lean / Meta-World env-only step: {lean_step_ratio(rounds):.2f}x")
    print(
        f"RL2-PPO update split over the env worker / one process: {split_update_ratio(rounds):.2f}x"
    )
    rates = measure(rounds)
    for name, rate in rates.items():
        print(f"{name:<22s} {rate:8,.0f} env steps/s")
    batched = rates["metatest_batched"] / rates["metatest_sequential"]
    print(
        f"RL2-PPO / env-only {rates['rl2'] / rates['env_only']:.3f}, "
        f"MAML-TRPO / env-only {rates['maml'] / rates['env_only']:.3f}, "
        f"batched / sequential meta-test {batched:.2f}x"
    )


if __name__ == "__main__":
    main()
