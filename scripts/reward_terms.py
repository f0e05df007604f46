"""What a run's meta-test return is made of: the mean of each reward term per episode of the
trial, for the task envs that report their terms in ``info`` (``reward_task``, ``reward_ctrl``,
``reward_contact``, ``reward_survive``: the Ant, Humanoid and Rand-Params tasks), and the mean
episode length.

The run's own meta-test (``load_run``: its protocol, its test-episode mode) on the first
``--test-tasks`` test tasks (default: all, so the test episodes' mean return is the run's).

    .venv/bin/python scripts/reward_terms.py RUN_DIR [--test-tasks N]
"""

from __future__ import annotations

import argparse
from typing import Any

import gymnasium as gym
import numpy as np
from recorded_meta_test import recorded_meta_test

from metabench.harness.loading import load_run

PREFIX = "reward_"


class TermLog(gym.Wrapper[Any, Any, Any, Any]):
    """Records, per episode, the sum of each ``reward_*`` term of ``info`` and the length."""

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        super().__init__(env)
        self.episodes: list[dict[str, float]] = []

    def reset(self, **kwargs: Any) -> Any:
        self.episodes.append({"length": 0.0})
        return self.env.reset(**kwargs)

    def step(self, action: Any) -> Any:
        result = self.env.step(action)
        episode = self.episodes[-1]
        episode["length"] += 1
        for key, value in result[-1].items():
            if key.startswith(PREFIX):
                episode[key] = episode.get(key, 0.0) + float(value)
        return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", help="a directory written by metabench train")
    parser.add_argument("--test-tasks", type=int, default=None, help="the first N test tasks")
    args = parser.parse_args()
    log, reference = recorded_meta_test(load_run(args.run_dir), TermLog, args.test_tasks)
    episodes = [episode for episode in log.episodes if episode["length"] > 0]
    per_trial = reference.exploration_episodes + reference.test_episodes
    if len(episodes) != len(reference.test_tasks) * per_trial:
        raise RuntimeError(f"recorded {len(episodes)} episodes, expected {per_trial} per task")
    if not any(key.startswith(PREFIX) for key in episodes[0]):
        raise SystemExit(f"{args.run_dir}: its task env reports no {PREFIX}* terms in info")
    terms = sorted(key for key in episodes[0] if key.startswith(PREFIX))
    for k in range(per_trial):
        phase = "explore" if k < reference.exploration_episodes else "test"
        trial_k = episodes[k::per_trial]
        means = {key: np.mean([e[key] for e in trial_k]) for key in ["length", *terms]}
        parts = ", ".join(f"{key.removeprefix(PREFIX)} {means[key]:.1f}" for key in terms)
        print(
            f"episode {k + 1:2d} {phase:7s}: return {sum(means[key] for key in terms):.1f} = "
            f"{parts}; length {means['length']:.1f}"
        )


if __name__ == "__main__":
    main()
