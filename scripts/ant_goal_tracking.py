"""Does a trained policy on Ant-Goal walk to the goal, and what does its return pay for? A look
inside a run's meta-test, from its checkpoint.

The run's own meta-test (``load_run``: its protocol, its test-episode mode) on the first
``--test-tasks`` test tasks (default: all, so the test episodes' mean return is the run's), one
task at a time, with the env's reward terms and the torso's position recorded at every step.
Prints, per episode of the trial, the mean return split into its terms (minus the L1 distance to
the goal, the control cost, the contact cost), the L1 distance at the start, at the end and at
its closest, the share of episodes that end closer to the goal than they started, and the share
in which the torso touches the ground (its height below 0.3: the torso is a sphere of radius
0.25).

    .venv/bin/python scripts/ant_goal_tracking.py RUN_DIR [--test-tasks N]
"""

from __future__ import annotations

import argparse
from typing import Any

import gymnasium as gym
import numpy as np
from recorded_meta_test import recorded_meta_test

from metabench.harness.loading import load_run

TERMS = ("reward_task", "reward_ctrl", "reward_contact")
TORSO_DOWN = 0.3


class StepLog(gym.Wrapper[Any, Any, Any, Any]):
    """Records, per episode, each step's reward terms, torso height and L1 distance to the goal."""

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        super().__init__(env)
        self.episodes: list[list[tuple[float, ...]]] = []

    def reset(self, **kwargs: Any) -> Any:
        result = self.env.reset(**kwargs)
        self.episodes.append([(0.0, 0.0, 0.0, self._height(), self._distance())])
        return result

    def step(self, action: Any) -> Any:
        result = self.env.step(action)
        info = result[-1]
        terms = tuple(float(info[term]) for term in TERMS)
        self.episodes[-1].append((*terms, self._height(), self._distance()))
        return result

    def _height(self) -> float:
        return float(self.env.unwrapped.data.qpos[2])  # type: ignore[attr-defined]

    def _distance(self) -> float:
        unwrapped = self.env.unwrapped
        goal = np.asarray(unwrapped.task["goal"])  # type: ignore[attr-defined]
        return float(np.abs(unwrapped.data.qpos[:2] - goal).sum())  # type: ignore[attr-defined]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", help="a directory written by metabench train on AntGoal-*")
    parser.add_argument("--test-tasks", type=int, default=None, help="the first N test tasks")
    args = parser.parse_args()
    run = load_run(args.run_dir)
    log, reference = recorded_meta_test(run, StepLog, args.test_tasks)
    episodes = [np.array(episode) for episode in log.episodes if len(episode) > 1]
    per_trial = reference.exploration_episodes + reference.test_episodes
    if len(episodes) != len(reference.test_tasks) * per_trial:
        raise RuntimeError(f"recorded {len(episodes)} episodes, expected {per_trial} per task")
    for k in range(per_trial):
        phase = "explore" if k < reference.exploration_episodes else "test"
        trial_k = episodes[k::per_trial]
        sums = np.array([e[1:, :3].sum(axis=0) for e in trial_k])
        start = np.array([e[0, 4] for e in trial_k])
        end = np.array([e[-1, 4] for e in trial_k])
        closest = np.array([e[:, 4].min() for e in trial_k])
        down = np.array([e[:, 3].min() < TORSO_DOWN for e in trial_k])
        print(
            f"episode {k + 1:2d} {phase:7s}: return {sums.sum(axis=1).mean():7.1f} = distance "
            f"{sums[:, 0].mean():7.1f} + control {sums[:, 1].mean():6.1f} + contact "
            f"{sums[:, 2].mean():6.1f}; L1 start {start.mean():.2f}, end {end.mean():.2f}, "
            f"closest {closest.mean():.2f}; ends closer {(end < start).mean():.2f}, torso down "
            f"{down.mean():.2f}"
        )


if __name__ == "__main__":
    main()
