"""Meta-World's own count of a meta-test, computed from metabench's record of every episode.

``metaworld.evaluation.metalearning_evaluation`` (Meta-World 3.x, the evaluator behind
Meta-World+'s published numbers) runs the test episodes of ``envs_per_class`` sub-envs of each
task class side by side. It ends an episode at its first success, starts that sub-env's next test
episode on the same step (Gymnasium's same-step autoreset, from the adapted state), and counts
for each class only the first ``test_episodes`` episodes to *end*. Successful episodes end early,
so they are counted first: a class scores 3 of 3 in a round as soon as one of its sub-envs
succeeds three times before the others reach the time limit. Its success rate is therefore
higher than the fraction of test episodes that succeed (metabench's
``test_episode_success_rate``, the count of garage's evaluator), and its return is that of the
counted episodes, cut at their first success.

:func:`metaworld_count` replays that race on metabench's episodes: each test task is one sub-env,
a class's tasks are taken ``envs_per_class`` at a time as the rounds (``num_evals``), in the
order of the test tasks (Meta-World draws its own order). The test episodes' first-success steps
say when each would have ended.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np


class CountedEpisode(NamedTuple):
    """A test episode as Meta-World's evaluation sees it."""

    length: int
    """Steps until it ends: at its first success, else its full length (the time limit)."""
    success: bool
    ret: float
    """Its return until it ends."""


@dataclass(frozen=True)
class MetaWorldCount:
    """What ``metalearning_evaluation`` returns: the success rate and the return, each the mean
    over rounds (of the mean over classes, and over the counted episodes), and the success rate
    of each class over rounds."""

    success_rate: float
    mean_return: float
    success_rate_per_class: dict[str, float]


def first_to_end(sub_envs: Sequence[Sequence[CountedEpisode]], n: int) -> list[CountedEpisode]:
    """The first ``n`` episodes to end when every sub-env runs its episodes back to back from
    the same step; on the same step, in sub-env order (Meta-World's loop over ``dones``).

    :raises ValueError: if a sub-env has fewer than ``n`` episodes (the race could need more).
    """
    ends = []
    for index, episodes in enumerate(sub_envs):
        if len(episodes) < n:
            raise ValueError(f"sub-env {index} has {len(episodes)} episodes, fewer than {n}")
        step = 0
        for episode in episodes:
            step += episode.length
            ends.append((step, index, episode))
    ends.sort(key=lambda end: (end[0], end[1]))
    return [episode for _, _, episode in ends[:n]]


Round = dict[str, list[Sequence[CountedEpisode]]]
"""One round of the race: the test episodes of the sub-envs of each class in it."""


def rounds(
    classes: Sequence[str],
    test_episodes: Sequence[Sequence[CountedEpisode]],
    envs_per_class: int,
) -> tuple[int, list[Round]]:
    """The test episodes each sub-env counts (``n``, the fewest any task has) and the rounds:
    each class's tasks (``classes[i]`` is task ``i``'s class) taken ``envs_per_class`` at a
    time, in the order of the test tasks."""
    if len(classes) != len(test_episodes) or not classes:
        raise ValueError("one class name and one list of test episodes per test task, at least one")
    n = min(len(episodes) for episodes in test_episodes)
    by_class: dict[str, list[Sequence[CountedEpisode]]] = {}
    for name, episodes in zip(classes, test_episodes, strict=True):
        by_class.setdefault(name, []).append(episodes)
    n_rounds = max(-(-len(tasks) // envs_per_class) for tasks in by_class.values())
    return n, [
        {
            name: tasks[r * envs_per_class : (r + 1) * envs_per_class]
            for name, tasks in by_class.items()
            if tasks[r * envs_per_class : (r + 1) * envs_per_class]
        }
        for r in range(n_rounds)
    ]


def metaworld_count(
    classes: Sequence[str],
    test_episodes: Sequence[Sequence[CountedEpisode]],
    envs_per_class: int,
) -> MetaWorldCount:
    """Meta-World's count of the test episodes of each test task (``classes[i]`` is task
    ``i``'s class), with ``envs_per_class`` sub-envs of a class per round."""
    n, race = rounds(classes, test_episodes, envs_per_class)
    round_rates, round_returns = [], []
    per_class: dict[str, list[float]] = {name: [] for name in dict.fromkeys(classes)}
    for groups in race:
        rates, returns = [], []
        for name, group in groups.items():
            counted = first_to_end(group, n)
            rates.append(float(np.mean([episode.success for episode in counted])))
            returns += [episode.ret for episode in counted]
            per_class[name].append(rates[-1])
        round_rates.append(float(np.mean(rates)))
        round_returns.append(float(np.mean(returns)))
    return MetaWorldCount(
        success_rate=float(np.mean(round_rates)),
        mean_return=float(np.mean(round_returns)),
        success_rate_per_class={name: float(np.mean(rates)) for name, rates in per_class.items()},
    )


def per_goal_count(
    classes: Sequence[str],
    test_episodes: Sequence[Sequence[CountedEpisode]],
    envs_per_class: int,
) -> float:
    """The success rate of the same race as :func:`metaworld_count`, counted per goal as
    Metaworld PR #577 (open) counts it: each sub-env's own first ``n`` episodes, not the first
    ``n`` of its class to end, averaged over the sub-envs of a round, then over rounds. Since each
    test task is one sub-env running its ``n`` test episodes, this is the fraction of test
    episodes that succeed, up to how rounds weight the tasks. Meta-World's count is above it when
    successes end a class's race early, the usual case, and below it when a success comes late,
    after the class's places are filled."""
    n, race = rounds(classes, test_episodes, envs_per_class)
    return float(
        np.mean(
            [
                np.mean([[e.success for e in goal[:n]] for g in groups.values() for goal in g])
                for groups in race
            ]
        )
    )


def task_class(task: Any) -> str:
    """The class of a task in its JSON form: a Meta-World task's env name, else one class."""
    if isinstance(task, dict) and isinstance(task.get("env_name"), str):
        return str(task["env_name"])
    return "task"
