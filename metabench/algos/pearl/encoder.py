"""PEARL's inference network: a permutation-invariant posterior ``q(z | c)`` over the task.

Each context transition ``(observation, action, reward)`` is mapped on its own to a Gaussian
factor ``N(mu_n, sigma_n^2)`` (an MLP gives ``mu_n`` and, through a softplus, ``sigma_n^2``); the
posterior is the normalised product of the factors, so it does not depend on the order of the
transitions and sharpens as they accumulate. The KL divergence of the posterior from the prior
``N(0, I)`` is the information bottleneck of the encoder's loss (Rakelly et al. 2019, section
4.1; oyster ``rlkit/torch/sac/agent.py``, garage ``torch/policies/context_conditioned_policy.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from stable_baselines3.common.torch_layers import create_mlp
from torch import nn

__all__ = [
    "MIN_FACTOR_VARIANCE",
    "ContextEncoder",
    "context_width",
    "kl_from_prior",
    "product_of_gaussians",
    "sample_latent",
]

MIN_FACTOR_VARIANCE = 1e-7
"""Each factor's variance is clamped to at least this before the product (oyster's
``_product_of_gaussians``), so one confident transition cannot make the product singular."""


def context_width(obs_dim: int, action_dim: int, next_observation: bool = False) -> int:
    """Features of one context transition: observation, action, reward and, with
    ``next_observation`` (oyster's ``use_next_obs_in_context``), the observation reached."""
    return obs_dim + action_dim + 1 + (obs_dim if next_observation else 0)


class ContextEncoder(nn.Module):
    """The MLP from one transition to its factor's mean and variance.

    :param input_dim: :func:`context_width` of the env.
    :param latent_size: dimension of ``z``.
    :param hidden_sizes: hidden layers (ReLU), oyster's ``[200, 200, 200]``.
    """

    def __init__(self, input_dim: int, latent_size: int, hidden_sizes: Sequence[int]) -> None:
        super().__init__()
        self.latent_size = latent_size
        self.net = nn.Sequential(*create_mlp(input_dim, 2 * latent_size, list(hidden_sizes)))

    def factors(self, context: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Means and variances ``(..., n, latent_size)`` of the factors of ``context``
        ``(..., n, input_dim)``, one per transition."""
        out = self.net(context)
        return out[..., : self.latent_size], F.softplus(out[..., self.latent_size :])

    def forward(self, context: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The posterior's mean and variance ``(..., latent_size)`` given ``context``
        ``(..., n, input_dim)`` (``n`` transitions per task, along the second-to-last axis)."""
        return product_of_gaussians(*self.factors(context))


def product_of_gaussians(
    means: torch.Tensor, variances: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The normalised product of diagonal Gaussians along the second-to-last axis: precisions
    add, and the mean is the precision-weighted mean of the means.

    Example::

        >>> m, v = product_of_gaussians(torch.tensor([[0.0], [2.0]]), torch.tensor([[1.0], [1.0]]))
        >>> m.item(), v.item()
        (1.0, 0.5)
    """
    variances = torch.clamp(variances, min=MIN_FACTOR_VARIANCE)
    variance = 1.0 / torch.sum(1.0 / variances, dim=-2)
    return variance * torch.sum(means / variances, dim=-2), variance


def kl_from_prior(means: torch.Tensor, variances: torch.Tensor) -> torch.Tensor:
    """``KL(N(means, variances) || N(0, I))`` summed over every task and latent dimension, as
    oyster's ``compute_kl_div`` sums it (closed form of ``torch.distributions.kl_divergence``)."""
    return 0.5 * torch.sum(variances + means**2 - 1.0 - torch.log(variances))


def sample_latent(
    means: torch.Tensor, variances: torch.Tensor, generator: torch.Generator
) -> torch.Tensor:
    """A reparameterised sample of ``z`` per row, its noise drawn on the CPU from ``generator``
    (so a run on a GPU draws the CPU run's numbers; :mod:`metabench.devices`)."""
    noise = torch.randn(means.shape, generator=generator, dtype=means.dtype)
    return means + torch.sqrt(variances) * noise.to(means.device)
