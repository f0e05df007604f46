"""PEARL's soft actor-critic losses, as oyster's ``PEARLSoftActorCritic._take_step`` computes
them (``rlkit/torch/sac/sac.py``; garage ``torch/algos/pearl.py`` is the same), written as
functions of tensors so they can be checked by hand.

All inputs are flat over tasks and transitions; values, rewards, done flags and
log-probabilities are ``(n, 1)`` columns, as in oyster (a ``(n,)`` vector would broadcast against
them to ``(n, n)``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["policy_loss", "q_loss", "q_target", "v_loss"]


def q_target(
    rewards: torch.Tensor,
    dones: torch.Tensor,
    next_values: torch.Tensor,
    reward_scale: float,
    discount: float,
) -> torch.Tensor:
    """``reward_scale * r + (1 - done) * discount * V_target(s', z)``: the Bellman target of
    both Q-functions (the reward is scaled here only, not in the context)."""
    return rewards * reward_scale + (1.0 - dones) * discount * next_values


def q_loss(q_values: tuple[torch.Tensor, ...], target: torch.Tensor) -> torch.Tensor:
    """The sum over the Q-functions of their mean squared error to ``target``."""
    first, *others = q_values
    loss = torch.mean((first - target) ** 2)
    for q in others:
        loss = loss + torch.mean((q - target) ** 2)
    return loss


def v_loss(values: torch.Tensor, min_q_new: torch.Tensor, log_prob: torch.Tensor) -> torch.Tensor:
    """Mean squared error of ``V(s, z)`` to ``min(Q1, Q2)(s, a~pi, z) - log pi(a|s, z)``, the
    target held constant."""
    return F.mse_loss(values, (min_q_new - log_prob).detach())


def policy_loss(
    log_prob: torch.Tensor,
    min_q_new: torch.Tensor,
    mean: torch.Tensor,
    log_std: torch.Tensor,
    mean_reg_weight: float,
    std_reg_weight: float,
) -> torch.Tensor:
    """``mean(log pi - min Q)`` plus oyster's regularisers of the pre-tanh mean and the
    log-std (``policy_mean_reg_weight``, ``policy_std_reg_weight``; its pre-activation term has
    weight 0 in every example and is left out)."""
    loss = torch.mean(log_prob - min_q_new)
    return loss + mean_reg_weight * torch.mean(mean**2) + std_reg_weight * torch.mean(log_std**2)
