"""Does a trained RL2 policy on ML1-reach go to the goal it should have found, or to one place
whatever the goal? A check of in-trial adaptation from a run's checkpoint.

The run's own meta-test (``load_run``: its protocol, its test-episode mode) on the first
``--test-tasks`` test tasks, one task at a time, with the hand's position recorded at every step.
Prints, per episode of the trial, the mean closest distance to the goal (Meta-World's reach
succeeds within 0.05 m), the rate of episodes that came that close, and how much of the goals'
spread the hand's end positions follow: the R^2 of a linear fit of end position on goal (1: the
hand ends where each goal is; 0: where it ends has nothing to do with the goal).

    .venv/bin/python scripts/goal_tracking.py RUN_DIR --test-tasks 20 [--actions mode|sampled]

``--actions mode`` acts with the mode in every episode, ``sampled`` samples in every episode
(default: as the run's meta-test does).
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

import gymnasium as gym
import numpy as np
from recorded_meta_test import recorded_meta_test

from metabench.harness.loading import load_run


class HandLog(gym.Wrapper[Any, Any, Any, Any]):
    """Records, per episode, the hand's distance to the goal and its position at every step."""

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        super().__init__(env)
        self.episodes: list[list[tuple[float, np.ndarray, np.ndarray]]] = []

    def reset(self, **kwargs: Any) -> Any:
        self.episodes.append([])
        return self.env.reset(**kwargs)

    def step(self, action: Any) -> Any:
        result = self.env.step(action)
        sawyer = self.env.unwrapped.sawyer_env  # type: ignore[attr-defined]
        hand, goal = np.array(sawyer.tcp_center), np.array(sawyer._target_pos)
        self.episodes[-1].append((float(np.linalg.norm(hand - goal)), hand, goal))
        return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", help="a directory written by metabench train on ML1-reach")
    parser.add_argument("--test-tasks", type=int, default=20, help="the first N test tasks")
    parser.add_argument("--actions", choices=["mode", "sampled"], default=None)
    args = parser.parse_args()
    run = load_run(args.run_dir)
    if args.actions is not None:  # RL2's options: the mode in every episode, or in none
        mode = args.actions == "mode"
        config = run.algorithm.config  # type: ignore[attr-defined]
        run.algorithm.config = dataclasses.replace(  # type: ignore[attr-defined]
            config, deterministic_eval=mode, deterministic_test=mode
        )
    log, reference = recorded_meta_test(run, HandLog, args.test_tasks)
    episodes = [episode for episode in log.episodes if episode]
    per_trial = reference.exploration_episodes + reference.test_episodes
    if len(episodes) != len(reference.test_tasks) * per_trial:
        raise RuntimeError(f"recorded {len(episodes)} episodes, expected {per_trial} per task")
    trials = [episodes[i : i + per_trial] for i in range(0, len(episodes), per_trial)]
    closest = np.array([[min(d for d, _, _ in e) for e in trial] for trial in trials])
    ends = np.array([[e[-1][1] for e in trial] for trial in trials])
    goals = np.array([trial[0][0][2] for trial in trials])
    for k in range(per_trial):
        phase = "explore" if k < reference.exploration_episodes else "test"
        print(
            f"episode {k + 1:2d} {phase:7s}: closest {closest[:, k].mean():.3f} m, within "
            f"0.05 m {(closest[:, k] < 0.05).mean():.2f}, end follows goal R^2 "
            f"{r_squared(goals, ends[:, k]):.2f}"
        )
    test_ends = ends[:, reference.exploration_episodes :].reshape(-1, 3)
    print(f"goal spread (std per axis, m):           {np.round(goals.std(axis=0), 3).tolist()}")
    print(f"test-episode end spread (std per axis):  {np.round(test_ends.std(axis=0), 3).tolist()}")


def r_squared(goals: np.ndarray, ends: np.ndarray) -> float:
    """R^2 of the least-squares fit ends ~ goals (with an intercept), over all three axes."""
    design = np.column_stack([goals, np.ones(len(goals))])
    coefficients, *_ = np.linalg.lstsq(design, ends, rcond=None)
    residual = ((ends - design @ coefficients) ** 2).sum()
    total = ((ends - ends.mean(axis=0)) ** 2).sum()
    return float(1 - residual / total) if total > 0 else 0.0


if __name__ == "__main__":
    main()
