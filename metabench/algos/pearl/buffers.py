"""PEARL's per-task buffers on Stable-Baselines3's ``ReplayBuffer`` storage.

PEARL keeps two buffers per training task (oyster's ``replay_buffer`` and
``enc_replay_buffer``): the RL buffer holds every transition the task collected (up to its
capacity, oldest dropped first), the encoder buffer only the latest collection round's prior and
posterior steps, the context the encoder trains on. SB3's ``ReplayBuffer`` gives the storage
(preallocated arrays, ``pos``/``full``, ``reset``); what is PEARL's own here is adding whole
episodes at once, sampling with the algorithm's generator (SB3's ``sample`` draws from NumPy's
global one) and the checkpoint of the filled part.

Size on disk: a checkpoint holds each buffer's filled rows only, ``4 * (2 * obs_dim + action_dim
+ 2)`` bytes per transition (observation, next observation, action, reward, done flag, all
float32): 192 bytes on HalfCheetah (20 + 20 + 6 + 2 floats), 328 on Meta-World (39-float
observations, 4-float actions). The RL buffers hold at most every transition collected, and at
most ``replay_buffer_size`` per task; the encoder buffers at most one collection round per task.
On HalfCheetahVel at oyster's budget (2.7e6 steps, 100 tasks of 2000 initial steps) a checkpoint
ends at about 0.56 GB: 0.52 GB of RL buffers and at most 0.04 GB of encoder buffers.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3.common.buffers import ReplayBuffer

__all__ = ["SAVED_FIELDS", "TaskReplayBuffer", "Transitions", "bytes_per_transition"]

SAVED_FIELDS = ("observations", "next_observations", "actions", "rewards", "dones")
"""What a checkpoint keeps of each stored transition (SB3's ``timeouts`` stay zero here: the
done flag already leaves time-limit ends out)."""


def bytes_per_transition(obs_dim: int, action_dim: int) -> int:
    """Bytes one stored transition takes in a checkpoint (float32 throughout)."""
    return 4 * (2 * obs_dim + action_dim + 2)


class Transitions(NamedTuple):
    """Transitions as flat float32 arrays, ``(n, ...)``; ``dones`` is 1 where the env
    terminated (never at a time limit, so the Bellman target bootstraps there)."""

    observations: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    next_observations: np.ndarray
    dones: np.ndarray

    def __len__(self) -> int:
        return len(self.rewards)


class TaskReplayBuffer(ReplayBuffer):
    """One task's transitions (SB3 storage, one sub-env), float32.

    :param capacity: transitions kept; the oldest are overwritten first.
    :param obs_dim: observation size.
    :param action_space: the Box the policy acts in.
    """

    def __init__(self, capacity: int, obs_dim: int, action_space: gym.spaces.Box) -> None:
        observation_space = gym.spaces.Box(-np.inf, np.inf, (obs_dim,), np.float32)
        actions = gym.spaces.Box(-1.0, 1.0, action_space.shape, np.float32)
        super().__init__(
            capacity, observation_space, actions, device="cpu", handle_timeout_termination=False
        )

    def __len__(self) -> int:
        return self.size()

    def add_transitions(self, batch: Transitions) -> None:
        """Store ``batch`` after the transitions already held, wrapping around at capacity."""
        n = len(batch)
        if n > self.buffer_size:  # only the last `capacity` would survive
            batch = Transitions(*(array[n - self.buffer_size :] for array in batch))
            n = self.buffer_size
        rows = (self.pos + np.arange(n)) % self.buffer_size
        self.observations[rows, 0] = batch.observations
        self.next_observations[rows, 0] = batch.next_observations
        self.actions[rows, 0] = batch.actions
        self.rewards[rows, 0] = batch.rewards
        self.dones[rows, 0] = batch.dones
        if self.pos + n >= self.buffer_size:
            self.full = True
        self.pos = int((self.pos + n) % self.buffer_size)

    def sample_transitions(self, n: int, rng: np.random.Generator) -> Transitions:
        """``n`` transitions drawn uniformly with replacement (oyster's ``random_batch``)."""
        if self.size() == 0:
            raise ValueError("cannot sample from an empty buffer: collect data for this task first")
        rows = rng.integers(0, self.size(), size=n)
        return Transitions(
            self.observations[rows, 0],
            self.actions[rows, 0],
            self.rewards[rows, 0],
            self.next_observations[rows, 0],
            self.dones[rows, 0],
        )

    def clear(self) -> None:
        """Forget every transition (the encoder buffer of a task about to collect anew)."""
        self.reset()

    # -- checkpoints -----------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The filled rows in storage order (copies: the buffer goes on changing), with the
        write position."""
        size = self.size()
        state: dict[str, Any] = {"pos": int(self.pos), "full": bool(self.full)}
        for name in SAVED_FIELDS:
            state[name] = torch.from_numpy(getattr(self, name)[:size, 0].copy())
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` into a buffer of the same capacity and shapes."""
        size = len(state["rewards"])
        if size > self.buffer_size:
            raise ValueError(
                f"the checkpoint's buffer holds {size} transitions, more than this buffer's "
                f"capacity {self.buffer_size}: build with the checkpoint's replay_buffer_size"
            )
        self.reset()
        for name in SAVED_FIELDS:
            getattr(self, name)[:size, 0] = state[name].numpy()
        self.pos = int(state["pos"])
        self.full = bool(state["full"])
