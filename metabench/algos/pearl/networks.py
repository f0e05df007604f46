"""PEARL's soft actor-critic networks: Stable-Baselines3's SAC pieces on ``[observation, z]``.

The policy is SB3's SAC ``Actor`` (a squashed Gaussian with a state-dependent log-std clamped to
[-20, 2], as oyster's ``TanhGaussianPolicy``), the two Q-functions one SB3 ``ContinuousCritic``
with ``n_critics=2``, and the V-function and its target (PEARL's SAC is the first SAC, with a
learned V; SB3's has none) are ``create_mlp`` networks. Every network reads the observation
concatenated with the task variable ``z``; the critic reads ``z`` with its gradient, which is
how the encoder learns (oyster ``rlkit/torch/sac/sac.py``: "encoder will only get gradients
from Q nets").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3.common.distributions import SquashedDiagGaussianDistribution
from stable_baselines3.common.policies import ContinuousCritic
from stable_baselines3.common.torch_layers import FlattenExtractor, create_mlp
from stable_baselines3.sac.policies import Actor
from torch import nn

__all__ = [
    "PolicySample",
    "make_actor",
    "make_critic",
    "make_value_function",
    "sample_actions",
]


def _input_space(obs_dim: int, latent_size: int) -> gym.spaces.Box:
    return gym.spaces.Box(-np.inf, np.inf, (obs_dim + latent_size,), np.float32)


def _action_space(action_dim: int) -> gym.spaces.Box:
    return gym.spaces.Box(-1.0, 1.0, (action_dim,), np.float32)


def make_actor(
    obs_dim: int, latent_size: int, action_dim: int, hidden_sizes: Sequence[int]
) -> Actor:
    """SB3's SAC actor on ``[observation, z]``, acting in ``[-1, 1]``."""
    space = _input_space(obs_dim, latent_size)
    return Actor(
        space,
        _action_space(action_dim),
        net_arch=list(hidden_sizes),
        features_extractor=FlattenExtractor(space),
        features_dim=obs_dim + latent_size,
        activation_fn=nn.ReLU,
    )


def make_critic(
    obs_dim: int, latent_size: int, action_dim: int, hidden_sizes: Sequence[int]
) -> ContinuousCritic:
    """Two Q-functions on ``[observation, z, action]``. The features extractor is not shared,
    so SB3 lets gradients through the input (its shared extractor runs under ``no_grad``),
    which the encoder learns by."""
    space = _input_space(obs_dim, latent_size)
    return ContinuousCritic(
        space,
        _action_space(action_dim),
        net_arch=list(hidden_sizes),
        features_extractor=FlattenExtractor(space),
        features_dim=obs_dim + latent_size,
        activation_fn=nn.ReLU,
        n_critics=2,
        share_features_extractor=False,
    )


def make_value_function(obs_dim: int, latent_size: int, hidden_sizes: Sequence[int]) -> nn.Module:
    """V on ``[observation, z]`` (PEARL's own: SB3's SAC has no V-function)."""
    return nn.Sequential(*create_mlp(obs_dim + latent_size, 1, list(hidden_sizes)))


class PolicySample(NamedTuple):
    """Reparameterised actions of the squashed Gaussian and what the policy loss needs."""

    actions: torch.Tensor
    """``tanh(pre_tanh)``, ``(n, action_dim)``."""
    log_prob: torch.Tensor
    """``(n, 1)``, with the tanh correction."""
    mean: torch.Tensor
    """The Gaussian's mean before tanh, ``(n, action_dim)``."""
    log_std: torch.Tensor
    """``(n, action_dim)``."""


def sample_actions(actor: Actor, inputs: torch.Tensor, generator: torch.Generator) -> PolicySample:
    """Actions for ``inputs`` ``[observation, z]`` with the reparameterisation trick, the noise
    drawn on the CPU from ``generator`` (SB3's ``action_log_prob`` draws from torch's global
    generator); the log-probability is SB3's ``SquashedDiagGaussianDistribution``'s."""
    mean, log_std, _ = actor.get_action_dist_params(inputs)
    noise = torch.randn(mean.shape, generator=generator, dtype=mean.dtype).to(mean.device)
    pre_tanh = mean + torch.exp(log_std) * noise
    actions = torch.tanh(pre_tanh)
    # a distribution of its own: the actor's keeps the last batch's graph alive between calls
    distribution = SquashedDiagGaussianDistribution(mean.shape[-1])
    log_prob = distribution.proba_distribution(mean, log_std).log_prob(actions, pre_tanh)
    return PolicySample(actions, log_prob.unsqueeze(-1), mean, log_std)


def mean_actions(actor: Actor, inputs: torch.Tensor) -> torch.Tensor:
    """``tanh`` of the Gaussian's mean: the deterministic action."""
    mean, _, _ = actor.get_action_dist_params(inputs)
    return torch.tanh(mean)
