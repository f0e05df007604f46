"""PEARL's meta-test policies: posterior sampling over the task variable ``z``.

Exploration (oyster's ``collect_paths``): each episode starts by drawing ``z`` from the current
belief, which is the prior for the first ``exploration_prior_episodes`` episodes and afterwards
the posterior of every exploration transition seen so far; so the adaptation curve follows the
posterior as it sharpens. The adapted policy draws ``z`` at each test episode's start from the
posterior of the exploration episodes it was handed, and of nothing else (garage PR #1374 built
it from the replay buffer instead).

A :class:`~metabench.algos.base.Policy` sees observations only. To build its context from the
episodes it runs, the exploration policy needs each step's reward: PEARL's ``wrap_env`` adds
:class:`RewardInObservation`, which appends to every observation the reward of the step that led
to it, and with ``use_next_obs_in_context`` the observation that step reached (at an inner
episode's end the episode's final observation, not the next episode's first). The policies strip
those columns before acting, and the adapted policy reads the rewards from the exploration
episodes; without the columns (an env not wrapped, as in Meta-World's own evaluation)
exploration stays on the prior and only adaptation uses the episodes.
"""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3.sac.policies import Actor

from metabench.algos.base import Policy, PolicyBatch
from metabench.algos.pearl.encoder import ContextEncoder, sample_latent
from metabench.algos.pearl.networks import mean_actions, sample_actions
from metabench.data import EpisodeBatch
from metabench.wrappers.trial import FINAL_OBSERVATION

__all__ = [
    "AdaptedPolicies",
    "ExplorationPolicies",
    "LatentPolicies",
    "RewardInObservation",
    "SinglePolicy",
    "episode_context",
]


class RewardInObservation(gym.Wrapper[np.ndarray, Any, np.ndarray, Any]):
    """Appends the reward of the step that returned an observation to it (0 after a reset) and,
    with ``next_observation``, the observation that step reached (the observation itself after a
    reset).

    Inside a :class:`~metabench.wrappers.Trial`, the first observation of an inner episode
    carries the reward of the previous episode's last step and, with ``next_observation``, that
    episode's final observation (the Trial's :data:`~metabench.wrappers.FINAL_OBSERVATION`), so
    a policy sees every transition of its episodes.

    Example::

        >>> from metabench.tasks.toy.envs import PointGoalEnv
        >>> env = RewardInObservation(PointGoalEnv())
        >>> env.reset(seed=0, options={"task": {"goal": [0.3, 0.0]}})[0].tolist()
        [0.0, 0.0, 0.0]
        >>> env.step(np.array([0.1, 0.0]))[0].round(3).tolist()
        [0.1, 0.0, -0.2]
    """

    def __init__(self, env: gym.Env[Any, Any], next_observation: bool = False) -> None:
        super().__init__(env)
        space = env.observation_space
        if not isinstance(space, gym.spaces.Box) or len(space.shape) != 1:
            raise ValueError(f"RewardInObservation needs a flat Box observation, got {space}")
        self.next_observation = next_observation
        reached = (space.low, space.high) if next_observation else ([], [])
        self.observation_space = gym.spaces.Box(
            np.concatenate([space.low, [-np.inf], reached[0]]).astype(space.dtype),
            np.concatenate([space.high, [np.inf], reached[1]]).astype(space.dtype),
            dtype=space.dtype,
        )

    def _with(
        self, observation: np.ndarray, reward: SupportsFloat, reached: np.ndarray
    ) -> np.ndarray:
        columns = [float(reward), *np.ravel(reached)] if self.next_observation else float(reward)
        return np.append(observation, columns).astype(self.observation_space.dtype)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        observation, info = self.env.reset(seed=seed, options=options)
        return self._with(observation, 0.0, observation), info

    def step(self, action: Any) -> tuple[np.ndarray, SupportsFloat, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = self.env.step(action)
        reached = info.get(FINAL_OBSERVATION, observation)
        return self._with(observation, reward, reached), reward, terminated, truncated, info


def _shows_transitions(width: int, obs_dim: int, next_observation: bool, what: str) -> bool:
    """Whether observations of ``width`` carry :class:`RewardInObservation`'s columns: the
    reward, and with ``next_observation`` the observation reached.

    :raises ValueError: neither the task env's width nor the wrapped one.
    """
    shown = obs_dim + 1 + (obs_dim if next_observation else 0)
    if width not in (obs_dim, shown):
        columns = "reward and next observation" if next_observation else "reward"
        raise ValueError(
            f"{what} of width {width}, expected {obs_dim} (or {shown} with "
            f"RewardInObservation's {columns})"
        )
    return width == shown


def episode_context(
    episodes: EpisodeBatch, obs_dim: int, next_observation: bool = False
) -> np.ndarray:
    """The context ``[observation, action, reward]`` (float32, one row per step) of
    ``episodes``, with the observation each step reached where ``next_observation``. Their
    observations may carry :class:`RewardInObservation`'s columns; the observation reached is
    then read from them, since an inner episode's recorded last observation is the next
    episode's first.

    :raises ValueError: observations of another width.
    """
    observations = episodes.observations.reshape(episodes.n_steps, -1)
    shown = _shows_transitions(
        observations.shape[1],
        obs_dim,
        next_observation,
        "the exploration episodes have observations",
    )
    actions = episodes.actions.reshape(episodes.n_steps, -1)
    rewards = episodes.rewards.reshape(-1, 1)
    parts = [observations[:, :obs_dim], actions, rewards]
    if next_observation:
        reached = episodes.next_observations.reshape(episodes.n_steps, -1)
        parts.append(reached[:, obs_dim + 1 :] if shown else reached)
    return np.concatenate(parts, axis=1).astype(np.float32)


class LatentPolicies(PolicyBatch):
    """``n`` rows acting on ``[observation, z]``, each row with its own belief over ``z``; a
    row draws ``z`` from its belief at the start of every episode (oyster resamples ``z`` after
    every trajectory).

    :param actor: the trained policy.
    :param encoder: the trained encoder.
    :param obs_dim: the task env's observation size.
    :param means: the rows' beliefs, ``(n, latent_size)``.
    :param variances: as ``means``.
    :param generator: the CPU generator of ``z`` and of sampled actions.
    :param deterministic: act with ``tanh`` of the mean action.
    :param next_observation: the context holds the observation each step reached
        (``use_next_obs_in_context``).
    """

    def __init__(
        self,
        actor: Actor,
        encoder: ContextEncoder,
        obs_dim: int,
        means: torch.Tensor,
        variances: torch.Tensor,
        generator: torch.Generator,
        deterministic: bool,
        next_observation: bool = False,
    ) -> None:
        self.actor = actor
        self.encoder = encoder
        self.obs_dim = obs_dim
        self.next_observation = next_observation
        self.means = means.clone()
        self.variances = variances.clone()
        self.generator = generator
        self.deterministic = deterministic
        self.device = means.device
        self.z = torch.zeros_like(means)
        self._starting = np.ones(len(means), dtype=bool)

    def reset(self, rows: np.ndarray) -> None:
        self._starting[rows] = True

    def get_actions(self, observations: np.ndarray, rows: np.ndarray) -> np.ndarray:
        observations = np.asarray(observations)
        obs_dim = self.obs_dim
        with_rewards = _shows_transitions(
            observations.shape[1], obs_dim, self.next_observation, "observations"
        )
        states = observations[:, :obs_dim].astype(np.float32)
        rewards = observations[:, obs_dim] if with_rewards else None
        reached = None
        if with_rewards and self.next_observation:
            reached = observations[:, obs_dim + 1 :].astype(np.float32)
        with torch.no_grad():
            self._before_acting(rows, rewards, reached)
            starting = rows[self._starting[rows]]
            if starting.size:
                self.z[starting] = sample_latent(
                    self.means[starting], self.variances[starting], self.generator
                )
                self._starting[starting] = False
            inputs = torch.cat([torch.as_tensor(states, device=self.device), self.z[rows]], dim=1)
            if self.deterministic:
                actions = mean_actions(self.actor, inputs)
            else:
                actions = sample_actions(self.actor, inputs, self.generator).actions
        chosen = actions.cpu().numpy()
        self._after_acting(rows, states, chosen, with_rewards)
        return chosen

    def _before_acting(
        self, rows: np.ndarray, rewards: np.ndarray | None, reached: np.ndarray | None
    ) -> None:
        """Before ``rows`` act on observations that came with ``rewards`` and the observations
        their last steps ``reached`` (``None``: not shown), their episode starts included."""

    def _after_acting(
        self, rows: np.ndarray, states: np.ndarray, actions: np.ndarray, with_rewards: bool
    ) -> None:
        """After ``rows`` took ``actions`` in ``states``."""


class ExplorationPolicies(LatentPolicies):
    """The exploration policies of ``n`` tasks: prior, then the posterior of the context so far.

    :param prior_episodes: episodes that act with ``z`` from the prior (oyster's
        ``num_exp_traj_eval``).
    """

    def __init__(
        self,
        actor: Actor,
        encoder: ContextEncoder,
        obs_dim: int,
        n: int,
        generator: torch.Generator,
        deterministic: bool,
        prior_episodes: int,
        next_observation: bool = False,
    ) -> None:
        device = next(encoder.parameters()).device
        prior = torch.zeros(n, encoder.latent_size, device=device)
        super().__init__(
            actor,
            encoder,
            obs_dim,
            prior,
            torch.ones_like(prior),
            generator,
            deterministic,
            next_observation,
        )
        self.prior_episodes = prior_episodes
        self.contexts: list[list[np.ndarray]] = [[] for _ in range(n)]
        """Each row's context transitions so far (:func:`episode_context`'s rows)."""
        self.episodes_started = np.zeros(n, dtype=np.int64)
        self._pending: list[tuple[np.ndarray, np.ndarray] | None] = [None] * n

    def _before_acting(
        self, rows: np.ndarray, rewards: np.ndarray | None, reached: np.ndarray | None
    ) -> None:
        for i, row in enumerate(rows):
            pending = self._pending[row]
            if pending is not None and rewards is not None:  # the last step's reward is shown
                state, action = pending
                parts = [state, action, [rewards[i]]]
                if reached is not None:
                    parts.append(reached[i])
                self.contexts[row].append(np.concatenate(parts).astype(np.float32))
            self._pending[row] = None
            if not self._starting[row]:
                continue
            if self.episodes_started[row] >= self.prior_episodes and self.contexts[row]:
                self.means[row], self.variances[row] = self.posterior(np.stack(self.contexts[row]))
            self.episodes_started[row] += 1

    def _after_acting(
        self, rows: np.ndarray, states: np.ndarray, actions: np.ndarray, with_rewards: bool
    ) -> None:
        if with_rewards:
            for i, row in enumerate(rows):
                self._pending[row] = (states[i], actions[i])

    def posterior(self, context: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """The encoder's posterior of ``context`` ``(n, width)``."""
        with torch.no_grad():
            mean, variance = self.encoder(torch.as_tensor(context, device=self.device))
        return mean, variance

    def adapted(self, exploration_episodes: list[EpisodeBatch]) -> AdaptedPolicies:
        """Each row adapted to its own exploration episodes (and to nothing else)."""
        beliefs = [
            self.posterior(episode_context(e, self.obs_dim, self.next_observation))
            for e in exploration_episodes
        ]
        return AdaptedPolicies(
            self.actor,
            self.encoder,
            self.obs_dim,
            torch.stack([mean for mean, _ in beliefs]),
            torch.stack([variance for _, variance in beliefs]),
            self.generator,
            self.deterministic,
            self.next_observation,
        )


class AdaptedPolicies(LatentPolicies):
    """Rows whose beliefs are the posteriors of their exploration episodes; each test episode
    draws a fresh ``z`` from its row's posterior."""


class SinglePolicy(Policy):
    """One row of a :class:`LatentPolicies` as a :class:`~metabench.algos.base.Policy`."""

    def __init__(self, policies: LatentPolicies) -> None:
        if len(policies.means) != 1:
            raise ValueError(f"SinglePolicy needs a batch of one row, got {len(policies.means)}")
        self.policies = policies

    def reset(self) -> None:
        self.policies.reset(np.zeros(1, dtype=np.int64))

    def get_action(self, observation: np.ndarray) -> np.ndarray:
        rows = np.zeros(1, dtype=np.int64)
        return self.policies.get_actions(np.asarray(observation)[None], rows)[0]
