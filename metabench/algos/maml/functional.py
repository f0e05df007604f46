"""MAML's functional core: episodes to loss inputs, the inner loss and adaptation, the meta-loss
and the KL between old and new post-adaptation policies, each a pure function of parameter sets
(:class:`~metabench.algos.maml.maml.MAML` runs them; the module doc there gives the steps)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

import torch
from torch.distributions import Normal, kl_divergence

from metabench.algos.common.baseline import LinearFeatureBaseline
from metabench.algos.common.returns import discounted_returns, gae_advantages
from metabench.algos.maml.losses import policy_gradient_loss
from metabench.algos.maml.policy import (
    GaussianMLPPolicy,
    Params,
)
from metabench.data import EpisodeBatch
from metabench.validation import check_count

ADVANTAGE_EPS = 1e-8
"""Added to the advantage std when normalising (garage's VPG ``center_adv``)."""


# -- data --------------------------------------------------------------------------------------
class TaskData(NamedTuple):
    """One task's episodes as loss inputs: every real step (``M`` of them), in the batch's flat
    order."""

    observations: torch.Tensor
    """``(M, obs_dim)``."""
    actions: torch.Tensor
    """``(M, action_dim)``."""
    advantages: torch.Tensor
    """``(M,)`` normalised GAE advantages (constants to the losses)."""


def process_episodes(
    episodes: EpisodeBatch,
    discount: float,
    gae_lambda: float,
    dtype: torch.dtype = torch.float32,
    normalize: bool = True,
    scale: str = "std",
    device: torch.device | None = None,
) -> TaskData:
    """Fit a fresh :class:`LinearFeatureBaseline` to ``episodes`` and turn them into loss inputs.

    The baseline is fitted per task batch on the discounted returns of the very episodes it is
    used on, as in garage's ``VPG._compute_advantage`` and pytorch-maml-rl's
    ``BatchEpisodes.compute_advantages``. Advantages are normalised to mean 0 and std 1 over
    all real steps of the batch (both repos do; it makes ``inner_lr`` independent of the reward
    scale).

    :param episodes: one task's episodes.
    :param discount: reward discount.
    :param gae_lambda: GAE's lambda (1.0: Monte-Carlo returns minus the baseline).
    :param dtype: the policy's dtype.
    :param normalize: normalise the advantages.
    :param scale: divide the centred advantages by their ``"std"``, or by their ``"variance"``
        as Meta-World+ does (its inner step is then smaller wherever the advantages spread by
        more than 1).
    :param device: where the tensors go (``None``: the CPU); the baseline is fitted on the CPU.
    """
    valids = episodes.valids
    real = valids.astype(bool)
    returns = discounted_returns(episodes.padded_rewards, valids, discount)
    baseline = LinearFeatureBaseline()
    baseline.fit(episodes, returns[real])
    values = episodes.padded(baseline.predict(episodes))
    advantages = gae_advantages(episodes.padded_rewards, values, valids, discount, gae_lambda)
    flat = advantages[real]  # row-major over (episode, time): the batch's flat order
    if normalize:
        spread = flat.var() if scale == "variance" else flat.std()
        flat = (flat - flat.mean()) / (spread + ADVANTAGE_EPS)
    n_steps = episodes.n_steps
    return TaskData(
        observations=torch.as_tensor(
            episodes.observations.reshape(n_steps, -1), dtype=dtype, device=device
        ),
        actions=torch.as_tensor(episodes.actions.reshape(n_steps, -1), dtype=dtype, device=device),
        advantages=torch.as_tensor(flat, dtype=dtype, device=device),
    )


class OldOutputs(NamedTuple):
    """The old post-adaptation policy on one task's validation steps (detached)."""

    mean: torch.Tensor
    log_std: torch.Tensor


# -- the named steps as functions ----------------------------------------------------------------
def inner_loss(
    policy: GaussianMLPPolicy,
    params: Mapping[str, torch.Tensor],
    data: TaskData,
    loss: str = "vpg",
    old_log_likelihood: torch.Tensor | None = None,
    clip_range: float = 0.5,
) -> torch.Tensor:
    """The inner algorithm's loss of ``params`` on ``data``, averaged over every real step.

    ``"vpg"`` (the default, garage's ``VPG``, MAML's inner algorithm) is
    ``-mean_t(log pi(a_t|s_t) * A_t)``; ``"trpo"`` and ``"ppo"`` weigh by the ratio to the
    policy that collected ``data``, whose log-likelihood is ``old_log_likelihood``
    (see :func:`~metabench.algos.maml.losses.policy_gradient_loss`)."""
    log_likelihood = policy.log_likelihood(data.observations, data.actions, params)
    if loss == "vpg":
        return -(log_likelihood * data.advantages).mean()
    return policy_gradient_loss(
        loss, log_likelihood, data.advantages, old_log_likelihood, clip_range
    )


def adapt(
    policy: GaussianMLPPolicy,
    params: Mapping[str, torch.Tensor],
    data: TaskData,
    inner_lr: float,
    num_grad_updates: int,
    create_graph: bool,
    loss: str = "vpg",
    clip_range: float = 0.5,
    behaviour_log_likelihood: torch.Tensor | None = None,
) -> Params:
    """``num_grad_updates`` SGD steps ``params <- params - inner_lr * grad inner_loss(params)``.

    Functional: ``params`` is not modified, a new dict is returned. With ``create_graph`` the
    result is differentiable to second order w.r.t. ``params`` (MAML's meta-gradient through the
    inner step, Finn et al. eq. 1); without it the inner gradients are constants, the
    first-order approximation (FOMAML). Parameters that do not require grad (a detached
    meta-test copy) are made to, so that the inner gradient exists.

    With a ratio ``loss`` (``"trpo"``, ``"ppo"``) every step's ratio is to the policy that
    collected ``data``: ``behaviour_log_likelihood`` (detached), by default the policy at
    ``params`` (garage keeps its old policy there too). It is data, a constant to the
    meta-gradient, whose second-order term then carries ``grad log pi grad log pi^T A``: in
    expectation, how the pre-update episodes' distribution depends on the meta-parameters
    (ProMP's low-variance curvature estimator). Finite differences that move the behaviour
    policy with ``params`` see the ``"vpg"`` meta-gradient instead.

    :raises ValueError: if ``num_grad_updates < 1`` or ``inner_lr <= 0``.
    """
    _check_inner(inner_lr, num_grad_updates)
    current: Params = {
        name: tensor if tensor.requires_grad else tensor.detach().requires_grad_()
        for name, tensor in params.items()
    }
    old_log_likelihood = behaviour_log_likelihood
    if loss != "vpg" and old_log_likelihood is None:
        with torch.no_grad():
            old_log_likelihood = policy.log_likelihood(data.observations, data.actions, current)
    for _ in range(num_grad_updates):
        value = inner_loss(policy, current, data, loss, old_log_likelihood, clip_range)
        grads = torch.autograd.grad(value, list(current.values()), create_graph=create_graph)
        current = {
            name: tensor - inner_lr * grad
            for (name, tensor), grad in zip(current.items(), grads, strict=True)
        }
    return current


def old_outputs(
    policy: GaussianMLPPolicy, adapted: Sequence[Params], valid_data: Sequence[TaskData]
) -> list[OldOutputs]:
    """The post-adaptation policies' outputs at their validation steps, frozen as the "old"
    policies of the TRPO surrogate and KL (pytorch-maml-rl's ``detach_distribution``)."""
    outputs = []
    with torch.no_grad():
        for params, data in zip(adapted, valid_data, strict=True):
            mean, log_std = policy.mean_log_std(data.observations, params)
            outputs.append(OldOutputs(mean.detach(), log_std.detach()))
    return outputs


def meta_loss(
    policy: GaussianMLPPolicy,
    adapted: Sequence[Params],
    valid_data: Sequence[TaskData],
    old: Sequence[OldOutputs],
    loss: str = "trpo",
    clip_range: float = 0.5,
) -> torch.Tensor:
    """The ``loss`` of the post-adaptation policies, averaged over tasks: by default the TRPO
    surrogate ``-mean_t(pi_new(a|s) / pi_old(a|s) * A_t)``.

    ``pi_new`` is each task's adapted policy as a function of the meta-parameters; ``pi_old`` is
    the same policy frozen when the episodes were collected, so the ratio is 1 at the start of
    the update and its gradient is the post-adaptation policy gradient. ``"ppo"`` clips the
    ratio to ``1 +- clip_range``; ``"vpg"`` is ``-mean_t(log pi_new(a|s) * A_t)``.
    """
    losses = []
    for params, data, frozen in zip(adapted, valid_data, old, strict=True):
        new_log_likelihood = policy.log_likelihood(data.observations, data.actions, params)
        if loss == "vpg":
            losses.append(-(new_log_likelihood * data.advantages).mean())
            continue
        old_log_likelihood = (
            Normal(frozen.mean, frozen.log_std.exp()).log_prob(data.actions).sum(-1)
        )
        if loss == "trpo":
            ratio = torch.exp(new_log_likelihood - old_log_likelihood)
            losses.append(-(ratio * data.advantages).mean())
            continue
        losses.append(
            policy_gradient_loss(
                loss, new_log_likelihood, data.advantages, old_log_likelihood, clip_range
            )
        )
    return torch.stack(losses).mean()


def post_adaptation_outputs(
    policy: GaussianMLPPolicy, adapted: Sequence[Params], valid_data: Sequence[TaskData]
) -> list[torch.Tensor]:
    """Each task's post-adaptation means and log-stds at its validation steps, as functions of
    the meta-parameters: ``[mean_0, log_std_0, mean_1, log_std_1, ...]``."""
    outputs: list[torch.Tensor] = []
    for params, data in zip(adapted, valid_data, strict=True):
        outputs.extend(policy.mean_log_std(data.observations, params))
    return outputs


def kl_of_outputs(outputs: Sequence[torch.Tensor], old: Sequence[OldOutputs]) -> torch.Tensor:
    """:func:`kl` given the new policies' outputs (laid out as :func:`post_adaptation_outputs`
    returns them)."""
    if len(outputs) != 2 * len(old):
        raise ValueError(
            f"{len(outputs)} outputs for {len(old)} tasks: expected a mean and a log-std per task"
        )
    kls = []
    for index, frozen in enumerate(old):
        mean, log_std = outputs[2 * index], outputs[2 * index + 1]
        per_step = kl_divergence(
            Normal(frozen.mean, frozen.log_std.exp()), Normal(mean, log_std.exp())
        ).sum(-1)
        kls.append(per_step.mean())
    return torch.stack(kls).mean()


def kl(
    policy: GaussianMLPPolicy,
    adapted: Sequence[Params],
    valid_data: Sequence[TaskData],
    old: Sequence[OldOutputs],
) -> torch.Tensor:
    """Mean ``KL(pi_old || pi_new)`` over each task's validation steps, then over tasks.

    The direction of the TRPO paper's constraint (eq. 12); at ``pi_new = pi_old`` both
    directions have the same value (0), gradient (0) and Hessian (the Fisher matrix).
    """
    return kl_of_outputs(post_adaptation_outputs(policy, adapted, valid_data), old)


def _check_inner(inner_lr: float, num_grad_updates: int) -> None:
    if not inner_lr > 0:
        raise ValueError(f"inner_lr must be positive, got {inner_lr}")
    check_count("num_grad_updates", num_grad_updates, hint="the inner gradient steps")
