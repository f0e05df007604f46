"""Discounted returns and GAE advantages over padded episodes ``(N, T)``.

Everything here is numpy ``float64``: advantages are constants to the policy-gradient losses, so
they need no autograd, and float64 keeps the baseline's least-squares fit accurate.

Padding (``valids == 0``) never leaks into a real step: rewards and values there are masked to
zero before use, so garbage in padded slots cannot change a result.

**The value after an episode's last step is 0**, whether the episode ended in ``TERMINAL`` or
``TIMEOUT``. That is what garage (``garage.np._functions.discount_cumsum`` on each path, and
``VPG._compute_advantage`` padding values with zeros) and ProMP do, and what the published
MAML-TRPO numbers were produced with. Bootstrapping a ``TIMEOUT`` from the baseline would be
less biased in principle, but the linear feature baseline is fitted to exactly these
zero-bootstrapped returns (its time features capture the drop toward the horizon), so its value
at the cut would merely echo that choice.
"""

from __future__ import annotations

import numpy as np

__all__ = ["discounted_returns", "gae_advantages"]


def _masked(name: str, array: np.ndarray, valids: np.ndarray) -> np.ndarray:
    """``array`` as float64 with padding set to 0 (``where``, not a product: NaN * 0 is NaN)."""
    array = np.asarray(array, dtype=np.float64)
    if array.shape != valids.shape or array.ndim != 2:
        raise ValueError(
            f"{name} has shape {array.shape}, expected {valids.shape} (N episodes, T steps), "
            f"the shape of valids"
        )
    return np.where(valids > 0, array, 0.0)


def _check_discount(name: str, value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be in [0, 1], got {value}")


def discounted_returns(rewards: np.ndarray, valids: np.ndarray, discount: float) -> np.ndarray:
    """``R_t = sum_{k >= 0} discount**k * r_{t+k}`` within each episode; 0 at padding.

    :param rewards: ``(N, T)`` padded rewards.
    :param valids: ``(N, T)``, 1 at real steps and 0 at padding (``EpisodeBatch.valids``).
    :param discount: in ``[0, 1]``.
    """
    valids = np.asarray(valids, dtype=np.float64)
    rewards = _masked("rewards", rewards, valids)
    _check_discount("discount", discount)
    returns = np.zeros_like(rewards)
    running = np.zeros(rewards.shape[0])
    for t in range(rewards.shape[1] - 1, -1, -1):
        running = rewards[:, t] + discount * running * valids[:, t]
        returns[:, t] = running
    return returns * valids


def gae_advantages(
    rewards: np.ndarray,
    values: np.ndarray,
    valids: np.ndarray,
    discount: float,
    gae_lambda: float,
) -> np.ndarray:
    """Generalised advantage estimates (Schulman et al. 2016, eq. 16); 0 at padding.

    ``delta_t = r_t + discount * V_{t+1} - V_t`` with ``V`` after the last step taken as 0 (see
    the module doc), and ``A_t = sum_k (discount * gae_lambda)**k * delta_{t+k}``. With
    ``gae_lambda = 1`` this is ``R_t - V_t`` (garage's MAML-TRPO setting).

    :param rewards: ``(N, T)`` padded rewards.
    :param values: ``(N, T)`` padded baseline values.
    :param valids: ``(N, T)`` mask of real steps.
    :param discount: in ``[0, 1]``.
    :param gae_lambda: in ``[0, 1]``.
    """
    valids = np.asarray(valids, dtype=np.float64)
    rewards = _masked("rewards", rewards, valids)
    values = _masked("values", values, valids)
    _check_discount("discount", discount)
    _check_discount("gae_lambda", gae_lambda)
    next_values = np.zeros_like(values)
    next_values[:, :-1] = values[:, 1:]  # 0 after the last real step: padding values are 0
    deltas = (rewards + discount * next_values - values) * valids
    advantages = np.zeros_like(deltas)
    running = np.zeros(deltas.shape[0])
    for t in range(deltas.shape[1] - 1, -1, -1):
        running = deltas[:, t] + discount * gae_lambda * running * valids[:, t]
        advantages[:, t] = running
    return advantages * valids
