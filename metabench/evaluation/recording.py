"""Trial recording shared by both meta-test runners (one task at a time, and batched).

A runner steps trials and records each episode in an :class:`~metabench.data.EpisodeRecorder`;
these functions turn the recorded episodes into what the algorithm adapts on
(:func:`exploration_batch`) and what the result keeps (:func:`task_result`), and check that the
algorithm's wrapper left the trial whole (:func:`check_trial_end`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, SupportsFloat

import gymnasium as gym

from metabench.data import EpisodeBatch, EpisodeRecorder
from metabench.evaluation.results import TaskResult

__all__ = ["EndFlags", "check_trial_end", "exploration_batch", "task_result"]


class EndFlags(gym.Wrapper[Any, Any, Any, Any]):
    """Remembers whether the last step terminated, which a :class:`~metabench.wrappers.Trial`
    hides at inner episode ends (the recorder needs it for bootstrapping)."""

    terminated = False

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.terminated = bool(terminated)
        return obs, reward, terminated, truncated, info


def check_trial_end(index: int, completed: int, episodes_per_trial: int, trial_over: bool) -> None:
    """Raise if test task ``index``'s trial ended before or after ``episodes_per_trial``
    episodes (``completed`` so far): the algorithm's ``wrap_env`` cut or ended it."""
    if trial_over != (completed == episodes_per_trial):
        raise RuntimeError(
            f"the trial of test task {index} ended after {completed} episodes, expected "
            f"{episodes_per_trial}: algo.wrap_env must not end or cut the trial"
        )


def exploration_batch(episodes: Sequence[EpisodeRecorder]) -> EpisodeBatch:
    """The exploration episodes as an :class:`EpisodeBatch`, what ``adapt_policy`` receives.

    ``last_observations`` are the :data:`~metabench.wrappers.trial.FINAL_OBSERVATION` of inner
    episodes (the final observation for the trial's last one). When ``wrap_env`` changes the
    observation space (RL2), the raw final observation has the wrong shape, so the observation
    returned by the ending step is used instead (for RL2: the next episode's first observation
    with the ending step's action, reward and ``done`` flag). ``env_infos["success"]`` is
    recorded when every step reported it.
    """
    with_success = all(s is not None for e in episodes for s in e.successes)
    return EpisodeBatch.from_list([e.path(with_success) for e in episodes])


def task_result(
    index: int, task: Any, exploration_episodes: int, episodes: Sequence[EpisodeRecorder]
) -> TaskResult:
    """The :class:`TaskResult` of test task ``index`` (``task``: its JSON form) from its
    trial's episodes, the first ``exploration_episodes`` of them before adapting."""
    successes = [e.success for e in episodes]
    reported = any(s is not None for s in successes)
    firsts = [next((i for i, s in enumerate(e.successes) if s), None) for e in episodes]
    return TaskResult(
        task_index=index,
        task=task,
        exploration_episodes=exploration_episodes,
        episode_returns=[math.fsum(e.rewards) for e in episodes],
        episode_lengths=[len(e.rewards) for e in episodes],
        episode_successes=[bool(s) for s in successes] if reported else None,
        episode_success_steps=[None if i is None else i + 1 for i in firsts] if reported else None,
        episode_returns_to_success=(
            [
                math.fsum(e.rewards if i is None else e.rewards[: i + 1])
                for e, i in zip(episodes, firsts, strict=True)
            ]
            if reported
            else None
        ),
    )
