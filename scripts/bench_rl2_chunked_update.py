"""RL2-PPO's ML10 update two ways on the same rollout, timed side by side: the whole-trial update
(garage's, ``rl2-ppo``) and Meta-World+'s chunked update (``rl2-ppo-chunked``: one PPO step per
250-step chunk per epoch, truncated backpropagation; ``metabench/algos/rl2/chunked_update.py``).

Collects one ML10 iteration as ``metabench train --algorithm rl2-ppo`` does, then runs each
update ``--repeats`` times, alternating, each from the same parameters, optimizer state and
rollout. Prints each update's best time, their ratio, and the end-to-end rate each gives with
the rollout collection measured here (after a first reset that builds the envs, as in every
iteration but a run's first).

With ``--split``, ``rl2-ppo-metaworld``'s chunked update instead, in one process and split over
the env worker (``update_in_workers``; ``metabench/algos/rl2/parallel_chunked_update.py``).

    OMP_NUM_THREADS=1 .venv/bin/python scripts/bench_rl2_chunked_update.py [--episodes N]
        [--repeats N] [--split]
"""

from __future__ import annotations

import argparse
import copy
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from profile_ml10 import build

from metabench.algos.rl2.chunked_update import chunked_train
from metabench.algos.rl2.parallel_chunked_update import parallel_chunked_train

CHUNK_LENGTH, CHUNK_OVERLAP = 250, 50
"""Meta-World+'s ML10 setting (``baselines/rl2-ppo-chunked.toml``)."""


@dataclass(frozen=True)
class UpdateTimes:
    """One rollout's collection and each update's best time on it, in seconds."""

    steps: int
    collect: float
    seconds: dict[str, float]
    """Each update's best time, the reference first."""

    @property
    def ratio(self) -> float:
        """The first update's time over the second's."""
        (_, first), (_, second) = self.seconds.items()
        return first / second


def trial_and_chunked(model: Any) -> dict[str, Callable[[], None]]:
    """``rl2-ppo``'s whole-trial update and the chunked one, on its rollout."""
    return {
        "whole-trial (rl2-ppo)": model.train,
        "chunked (rl2-ppo-chunked)": lambda: chunked_train(
            model.update_context(), CHUNK_LENGTH, CHUNK_OVERLAP
        ),
    }


def alone_and_split(model: Any) -> dict[str, Callable[[], None]]:
    """``rl2-ppo-metaworld``'s chunked update in one process and split over the env worker."""
    return {
        "chunked, one process": lambda: chunked_train(
            model.update_context(), CHUNK_LENGTH, CHUNK_OVERLAP
        ),
        "chunked, split": lambda: parallel_chunked_train(
            model.update_context(), CHUNK_LENGTH, CHUNK_OVERLAP, model.update_venv,
            model.policy_constructor(),
        ),
    }  # fmt: skip


def update_times(episodes: int = 10, repeats: int = 2, split: bool = False) -> UpdateTimes:
    """Collect one ML10 iteration of ``episodes`` per trial as ``rl2-ppo`` (``split``:
    ``rl2-ppo-metaworld`` with ``update_in_workers``) does and time both updates on it,
    alternating, ``repeats`` times each (best of each)."""
    overrides: dict[str, Any] = {"episodes_per_trial": episodes}
    if split:
        overrides["update_in_workers"] = True
    algo, _ = build("rl2-ppo-metaworld" if split else "rl2-ppo", overrides)
    model = algo.model
    updates = alone_and_split(model) if split else trial_and_chunked(model)
    seconds: dict[str, list[float]] = {name: [] for name in updates}

    def compare() -> None:
        policy = model.policy
        saved: dict[str, Any] = {
            "policy": copy.deepcopy(policy.state_dict()),
            "optimizer": copy.deepcopy(policy.optimizer.state_dict()),
            # the whole-trial update flattens the buffer in place; the chunked one reads it as
            # collected
            "buffer": copy.deepcopy(vars(model.rollout_buffer)),
        }
        for _ in range(repeats):
            for name, update in updates.items():
                policy.load_state_dict(saved["policy"])
                policy.optimizer.load_state_dict(copy.deepcopy(saved["optimizer"]))
                vars(model.rollout_buffer).update(copy.deepcopy(saved["buffer"]))
                start = time.perf_counter()
                update()
                seconds[name].append(time.perf_counter() - start)

    compared = 0.0  # compare()'s whole time: its copies are not the collection's

    def timed_compare() -> None:
        nonlocal compared
        start = time.perf_counter()
        compare()
        compared = time.perf_counter() - start

    model.train = timed_compare
    try:
        algo.venv.reset()  # builds the Sawyer envs: once per run, not in every iteration
        start = time.perf_counter()
        algo.train(1)
        collect = time.perf_counter() - start - compared
    finally:
        algo.venv.close()
    return UpdateTimes(
        algo.steps_per_iteration, collect, {name: min(times) for name, times in seconds.items()}
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--episodes", type=int, default=10, help="episodes per trial (default: the published 10)"
    )
    parser.add_argument("--repeats", type=int, default=2, help="runs of each update (default 2)")
    parser.add_argument(
        "--split", action="store_true",
        help="rl2-ppo-metaworld's chunked update in one process against split over the worker",
    )  # fmt: skip
    args = parser.parse_args()
    times = update_times(args.episodes, args.repeats, args.split)
    print(
        f"\nRL2-PPO update on ML10 ({times.steps:,} env steps per iteration, {args.episodes} "
        f"episodes per trial; best of {args.repeats}); rollout collection {times.collect:.1f} s"
    )
    for name, update_s in times.seconds.items():
        rate = times.steps / (times.collect + update_s)
        print(f"  {name:<28s} {update_s:7.1f} s   end to end {rate:,.0f} env steps/s")
    first, second = times.seconds
    print(f"  {first} / {second} update time: {times.ratio:.2f}x")


if __name__ == "__main__":
    main()
