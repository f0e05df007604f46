"""The policy-gradient objectives MAML can adapt with and meta-optimise (garage's inner algorithms).

garage's torch ``MAML`` takes an inner algorithm (``VPG``, ``PPO`` or ``TRPO``) and uses its loss
both for the inner step and, on the post-update episodes, as the meta-loss. Here the kind of loss
is a name, chosen separately for the two places (``inner_loss`` and ``outer_loss`` of
:class:`~metabench.algos.maml.config.MAMLConfig`):

* ``"vpg"``: ``-mean_t(log pi(a_t|s_t) * A_t)``, REINFORCE with a baseline (garage's ``VPG``,
  MAML's original inner loss);
* ``"trpo"``: ``-mean_t(r_t * A_t)`` with ``r_t = pi(a_t|s_t) / pi_old(a_t|s_t)``, the
  likelihood-ratio surrogate of TRPO (Schulman et al. 2015, eq. 14);
* ``"ppo"``: ``-mean_t(min(r_t * A_t, clip(r_t, 1 - eps, 1 + eps) * A_t))``, PPO's clipped
  surrogate (Schulman et al. 2017, eq. 7).

``pi_old`` is the policy that collected the episodes, so ``r_t = 1`` where the loss is first
evaluated and all three have the same gradient there. They differ away from it (later inner
steps, line-search points, further outer epochs), and, as inner losses, in the second-order
term of the meta-gradient: differentiating ``r_t`` twice gives
``grad log pi grad log pi^T + hess log pi`` where ``log pi`` gives the second part only. The
ratio with ``pi_old`` frozen at the pre-update parameters is ProMP's low-variance curvature
objective (Rothfuss et al. 2019, "ProMP", eq. 5), whose Hessian is the one of the expected
return; the ``"vpg"`` inner loss is MAML's original, biased in that term.
"""

from __future__ import annotations

from typing import Literal

import torch

__all__ = ["POLICY_GRADIENT_LOSSES", "PolicyGradientLoss", "policy_gradient_loss"]

PolicyGradientLoss = Literal["vpg", "ppo", "trpo"]
"""The name of a policy-gradient objective (see the module docstring)."""

POLICY_GRADIENT_LOSSES: tuple[str, ...] = ("vpg", "ppo", "trpo")


def policy_gradient_loss(
    kind: str,
    log_likelihood: torch.Tensor,
    advantages: torch.Tensor,
    old_log_likelihood: torch.Tensor | None = None,
    clip_range: float = 0.5,
) -> torch.Tensor:
    """The ``kind`` objective (to be minimised), averaged over every step.

    :param kind: one of :data:`POLICY_GRADIENT_LOSSES`.
    :param log_likelihood: ``(M,)`` log-likelihood of the taken actions under the policy being
        optimised (carries the graph).
    :param advantages: ``(M,)`` advantages (constants).
    :param old_log_likelihood: ``(M,)`` the same under the policy that collected the episodes,
        detached; needed by ``"ppo"`` and ``"trpo"``.
    :param clip_range: PPO's ``eps`` (garage's ``lr_clip_range``); only ``"ppo"`` reads it.
    :raises ValueError: for an unknown ``kind`` or a missing ``old_log_likelihood``.
    """
    if kind == "vpg":
        return -(log_likelihood * advantages).mean()
    if kind not in POLICY_GRADIENT_LOSSES:
        valid = ", ".join(repr(name) for name in POLICY_GRADIENT_LOSSES)
        raise ValueError(f"the policy-gradient loss must be one of {valid}, got {kind!r}")
    if old_log_likelihood is None:
        raise ValueError(f"the {kind!r} loss needs the old policy's log-likelihood")
    ratio = torch.exp(log_likelihood - old_log_likelihood)
    if kind == "trpo":
        return -(ratio * advantages).mean()
    clipped = torch.clamp(ratio, 1.0 - clip_range, 1.0 + clip_range)
    return -torch.min(ratio * advantages, clipped * advantages).mean()
