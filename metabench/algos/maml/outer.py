"""The Adam meta-optimiser of MAML-PPO and MAML-VPG (garage's ``MAML(meta_optimizer=Adam)``).

garage's ``MAMLPPO`` and ``MAMLVPG`` take one ``torch.optim.Adam`` step (``outer_lr`` 1e-3,
``eps`` 1e-5 from ``make_optimizer``) on the meta-loss per iteration. :func:`adam_step` takes
``epochs`` of them on the same episodes (1: garage's), re-adapting from the current
meta-parameters each time, and records what they did the way
:class:`~metabench.algos.common.trpo.TRPOStep` records a TRPO step. The TRPO meta-optimiser is
:func:`metabench.algos.common.trpo.trpo_step`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

import torch

from metabench.algos.common.trpo import TRPOStep

__all__ = ["AdamStep", "OuterStep", "adam_step"]


@dataclasses.dataclass(frozen=True)
class AdamStep:
    """The record of one iteration's Adam meta-steps, for the caller to log.

    :param accepted: whether the parameters changed (not if the first gradient was not finite).
    :param reason: ``"accepted"``, or ``"nonfinite_gradient"`` when an epoch's gradient was NaN
        or infinite: that epoch and the following ones are skipped, so Adam's moments stay
        finite.
    :param loss_before: the meta-loss at the starting parameters.
    :param loss_after: the meta-loss at the parameters left in place.
    :param kl: the mean KL between the old and the new post-adaptation policies afterwards.
    :param epochs: Adam steps taken.
    :param gradient_norm: the norm of the first meta-gradient.
    """

    accepted: bool
    reason: str
    loss_before: float
    loss_after: float
    kl: float
    epochs: int
    gradient_norm: float


OuterStep = TRPOStep | AdamStep
"""What a meta-optimiser step returns."""


def adam_step(
    optimizer: torch.optim.Optimizer,
    params: Sequence[torch.Tensor],
    loss_fn: Callable[[int], torch.Tensor],
    after_fn: Callable[[], tuple[torch.Tensor, torch.Tensor]],
    epochs: int = 1,
) -> AdamStep:
    """``epochs`` steps of ``optimizer`` on ``loss_fn``, in place.

    :param optimizer: an optimiser over ``params`` (its state carries over iterations).
    :param params: the meta-parameters.
    :param loss_fn: ``epoch -> loss`` at the current parameters, with its graph to ``params``.
    :param after_fn: ``() -> (loss, kl)`` at the current parameters, for the record.
    :param epochs: steps to take.
    """
    params = list(params)
    loss_before, gradient_norm, taken, reason = math.nan, math.nan, 0, "accepted"
    for epoch in range(epochs):
        loss = loss_fn(epoch)
        grads = torch.autograd.grad(loss, params, allow_unused=True)
        flat = [torch.zeros_like(p) if g is None else g for g, p in zip(grads, params, strict=True)]
        norm = float(torch.linalg.vector_norm(torch.cat([g.reshape(-1) for g in flat])).item())
        if epoch == 0:
            loss_before, gradient_norm = float(loss.item()), norm
        if not (math.isfinite(norm) and math.isfinite(float(loss.item()))):
            reason = "nonfinite_gradient"
            break
        for param, grad in zip(params, flat, strict=True):
            param.grad = grad.detach()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        taken += 1
    if taken == 0:
        return AdamStep(False, reason, loss_before, loss_before, math.nan, 0, gradient_norm)
    loss_after, kl = after_fn()
    return AdamStep(
        True, reason, loss_before, float(loss_after.item()), float(kl.item()), taken, gradient_norm
    )
