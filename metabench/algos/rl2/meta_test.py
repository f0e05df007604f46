"""RL2's meta-test policies: exploration keeps the recurrent state across the episodes of a
trial, and each test episode restarts from the state exploration ended with."""

from __future__ import annotations

import numpy as np
from sb3_contrib import RecurrentPPO

from metabench.algos.base import Policy, PolicyBatch


class RL2ExplorationPolicy(Policy):
    """The recurrent policy acting in one env; its state spans every episode of the trial.

    ``reset`` keeps the hidden state (garage's ``NoResetPolicy``): RL2 adapts by remembering.
    The state starts fresh when the policy is created, i.e. once per meta-test task.
    """

    def __init__(self, model: RecurrentPPO, deterministic: bool) -> None:
        self.model = model
        self.deterministic = deterministic
        self._state: tuple[np.ndarray, ...] | None = None
        self._episode_start = np.ones(1, dtype=bool)

    def get_action(self, observation: np.ndarray) -> np.ndarray:
        return self.act(observation, self.deterministic)

    def act(self, observation: np.ndarray, deterministic: bool) -> np.ndarray:
        """One step from the current hidden state, the mode if ``deterministic``."""
        action, self._state = self.model.predict(
            observation[None],
            state=self._state,
            episode_start=self._episode_start,
            deterministic=deterministic,
        )
        self._episode_start = np.zeros(1, dtype=bool)
        return np.asarray(action[0])


class RL2AdaptedPolicy(Policy):
    """The recurrent policy after exploration: every test episode starts from the hidden state
    that exploration ended with (garage's ``RL2AdaptedPolicy``, Meta-World+'s ``RL2Wrapped``),
    so each test episode measures the adapted policy, not the one after the previous test.

    :param deterministic: act with the mode (Meta-World+'s ``eval_action``) even where
        exploration sampled.
    """

    def __init__(self, explored: RL2ExplorationPolicy, deterministic: bool) -> None:
        self.model = explored.model
        self.deterministic = deterministic
        self._adapted = explored._state
        self._explored = explored

    def reset(self) -> None:
        self._explored._state = self._adapted
        self._explored._episode_start = np.zeros(1, dtype=bool)

    def get_action(self, observation: np.ndarray) -> np.ndarray:
        return self._explored.act(observation, self.deterministic)


class RL2PolicyBatch(PolicyBatch):
    """:class:`RL2ExplorationPolicy` and :class:`RL2AdaptedPolicy` for ``n`` tasks at once: one
    recurrent forward pass per step over the rows that act, each row with its own hidden state.

    :meth:`adapted` is the batch after exploration: each test episode of a row starts from the
    hidden state that row's exploration ended with.
    """

    def __init__(self, model: RecurrentPPO, deterministic: bool, n: int) -> None:
        self.model = model
        self.deterministic = deterministic
        self.n = n
        self._state: tuple[np.ndarray, ...] | None = None  # (layers, n, hidden) arrays
        self._episode_start = np.ones(n, dtype=bool)
        self._adapted: tuple[np.ndarray, ...] | None = None

    def get_actions(self, observations: np.ndarray, rows: np.ndarray) -> np.ndarray:
        state = None if self._state is None else tuple(s[:, rows] for s in self._state)
        actions, new_state = self.model.predict(
            observations,
            state=state,
            episode_start=self._episode_start[rows],
            deterministic=self.deterministic,
        )
        assert new_state is not None  # a recurrent model always returns its state
        if self._state is None:
            self._state = tuple(
                np.zeros((s.shape[0], self.n, *s.shape[2:]), dtype=s.dtype) for s in new_state
            )
        for full, part in zip(self._state, new_state, strict=True):
            full[:, rows] = part
        self._episode_start[rows] = False
        return np.asarray(actions)

    def adapted(self, deterministic: bool) -> RL2PolicyBatch:
        """The rows' policies after exploration, acting with the mode if ``deterministic``
        (this batch must not explore again)."""
        if self._state is None:
            raise RuntimeError("the exploration policies have not acted: nothing to adapt to")
        self._adapted = tuple(s.copy() for s in self._state)
        self.deterministic = self.deterministic or deterministic
        return self

    def reset(self, rows: np.ndarray) -> None:
        if self._adapted is not None:  # a test episode: back to the state exploration ended in
            assert self._state is not None
            for full, adapted in zip(self._state, self._adapted, strict=True):
                full[:, rows] = adapted[:, rows]
